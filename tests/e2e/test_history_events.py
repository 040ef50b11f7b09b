"""History events on the running stack: boto3's writes and reads reach `silt events --follow`
and the REST API's live feed within 2 s; commits, merges and resets are recorded by graveler;
reading them needs ReadRepo and recording them is for the gateway and the REST API alone."""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import grpc
import pytest
import urllib3
from pydantic import SecretStr

from silt.graveler.v1 import events_pb2 as ev
from silt.launcher import Stack
from silt.rpc.signing import Credentials
from tests.e2e.conftest import Silt, graveler_stub
from tests.support.wait import wait_until

REPO = "e2e-history"
LIVE_SECONDS = 2.0


@dataclass
class Feed:
    """Events arriving on a stream, each with the moment it arrived."""

    events: list[tuple[dict[str, Any], float]] = field(default_factory=list)
    opened: threading.Event = field(default_factory=threading.Event)
    malformed: list[bytes] = field(default_factory=list)

    def arrival(self, kind: str, path: str) -> float | None:
        return next((at for e, at in self.events if e["type"] == kind and e["path"] == path), None)


def _basic(key: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()}


def _events_url(stack: Stack, repo: str, branch: str = "main") -> str:
    return f"{stack.endpoints['gateway']}/api/v1/repositories/{repo}/branches/{branch}/events"


@pytest.fixture(scope="module")
def repo(silt: Silt) -> str:
    silt("repo", "create", REPO)
    return REPO


@pytest.fixture(scope="module")
def s3(stack: Stack, silt: Silt) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=stack.endpoints["gateway"],
        aws_access_key_id=silt.env["SILT_ACCESS_KEY_ID"],
        aws_secret_access_key=silt.env["SILT_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


@pytest.fixture
def sse(stack: Stack, silt: Silt, repo: str) -> Iterator[Feed]:
    """The REST API's live feed, read as a browser's EventSource would."""
    feed = Feed()
    http = urllib3.PoolManager()
    headers = _basic(str(silt.env["SILT_ACCESS_KEY_ID"]), str(silt.env["SILT_SECRET_ACCESS_KEY"]))
    response = http.request(
        "GET", _events_url(stack, repo), headers=headers, preload_content=False, timeout=urllib3.Timeout(read=30)
    )
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")

    buffer = bytearray()

    def read_lines() -> None:
        try:
            # The answer is chunked (no length): each chunk comes as it arrives.
            for chunk in response.stream():
                buffer.extend(chunk)
                while b"\n\n" in buffer:
                    block, _, rest = bytes(buffer).partition(b"\n\n")
                    buffer[:] = rest
                    if block.startswith(b":"):
                        feed.opened.set()
                        continue
                    fields = dict(line.split(": ", 1) for line in block.decode().split("\n"))
                    data = json.loads(fields.get("data", "{}"))
                    if fields.get("event") != "history" or data.get("id") != fields.get("id"):
                        feed.malformed.append(block)
                    feed.events.append((data, time.monotonic()))
        except (urllib3.exceptions.HTTPError, OSError, AttributeError, ValueError):
            return  # the test closed the connection under the reading thread

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    try:
        assert feed.opened.wait(10), "the stream never opened"
        yield feed
    finally:
        # Ends the reading thread's wait on the socket at once: closing the response from this
        # thread does not, and the thread would read on until the feed's next keep-alive.
        response.shutdown()
        response.release_conn()
        response.close()
        reader.join(10)


@pytest.fixture
def cli_feed(silt: Silt, repo: str) -> Iterator[Feed]:
    """`silt events --follow --json` as a real process, one JSON object per line."""
    feed = Feed()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "events",
            f"silt://{repo}/main",
            "--follow",
            "--json",
            "--since",
            "10m",
        ],
        env=silt.process_env(),
        cwd=silt.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            feed.events.append((json.loads(line), time.monotonic()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield feed
    finally:
        process.terminate()
        process.wait(10)
        reader.join(10)


def test_a_boto3_put_reaches_the_cli_and_the_live_feed_within_2_s(
    s3: Any, sse: Feed, cli_feed: Feed, repo: str
) -> None:
    # The CLI process needs a moment to start: an object written first tells when it follows.
    s3.put_object(Bucket=repo, Key="main/warmup", Body=b"w")
    wait_until(lambda: cli_feed.arrival("write", "warmup"), 30, "the CLI following the branch")

    written_at = time.monotonic()
    s3.put_object(Bucket=repo, Key="main/data/a.csv", Body=b"a,1\n")
    for name, feed in (("silt events --follow", cli_feed), ("the REST API's live feed", sse)):
        arrived = wait_until(functools.partial(feed.arrival, "write", "data/a.csv"), 10, f"the PUT on {name}")
        assert arrived - written_at < LIVE_SECONDS, f"{name}: {arrived - written_at:.2f} s"
    event = next(e for e, _ in sse.events if e["path"] == "data/a.csv")
    assert (event["source"], event["size"], event["user"]) == ("s3", 4, "admin")

    s3.get_object(Bucket=repo, Key="main/data/a.csv")["Body"].read()
    s3.delete_object(Bucket=repo, Key="main/warmup")
    wait_until(lambda: sse.arrival("read", "data/a.csv"), 10, "the GET as a read event")
    wait_until(lambda: sse.arrival("delete", "warmup"), 10, "the DELETE as a delete event")
    assert not sse.malformed


def _stored(stack: Stack, silt: Silt, repo: str, **headers: str) -> list[dict[str, Any]]:
    """The branch's events through the REST API, without following."""
    auth = _basic(str(silt.env["SILT_ACCESS_KEY_ID"]), str(silt.env["SILT_SECRET_ACCESS_KEY"]))
    answer = urllib3.PoolManager().request(
        "GET", _events_url(stack, repo) + "?follow=false", headers={**auth, **headers}, timeout=30
    )
    assert answer.status == 200, answer.data
    return [
        json.loads(line.removeprefix("data: "))
        for line in answer.data.decode().split("\n")
        if line.startswith("data: ")
    ]


def test_the_live_feed_resumes_after_last_event_id(stack: Stack, silt: Silt, s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/resume/one", Body=b"1")
    s3.put_object(Bucket=repo, Key="main/resume/two", Body=b"2")

    def both_stored() -> list[str] | None:
        events = _stored(stack, silt, repo)
        return [e["id"] for e in events] if events and events[-1]["path"] == "resume/two" else None

    every = wait_until(both_stored, 10, "the two PUTs stored")
    assert every == sorted(every)
    assert [e["path"] for e in _stored(stack, silt, repo, **{"Last-Event-ID": every[-2]})] == ["resume/two"]
    assert _stored(stack, silt, repo, **{"Last-Event-ID": every[-1]}) == []
    bad = urllib3.PoolManager().request(
        "GET",
        _events_url(stack, repo),
        headers={
            **_basic(str(silt.env["SILT_ACCESS_KEY_ID"]), str(silt.env["SILT_SECRET_ACCESS_KEY"])),
            "Last-Event-ID": "not-an-event-id",
        },
        timeout=10,
    )
    assert bad.status == 400 and "event id" in json.loads(bad.data)["message"]


def test_commit_merge_and_reset_are_recorded(s3: Any, silt: Silt, repo: str) -> None:
    silt("commit", f"silt://{repo}/main", "-m", "what the other tests wrote", "--allow-empty")
    silt("branch", "create", f"silt://{repo}/feature", "--source", "main")
    s3.put_object(Bucket=repo, Key="feature/f.txt", Body=b"f")
    commit = silt("commit", f"silt://{repo}/feature", "-m", "add f", "--json").json()
    merged = silt("merge", f"silt://{repo}/feature", "main", "-m", "feature into main", "--json").json()
    s3.put_object(Bucket=repo, Key="main/scratch", Body=b"s")
    silt("branch", "reset", f"silt://{repo}/main", "-y")

    def kinds(branch: str) -> list[dict[str, Any]]:
        out = silt("events", f"silt://{repo}/{branch}", "--since", "10m", "--json").out
        return [json.loads(line) for line in out.splitlines()]

    def main_has_merge_and_reset() -> list[dict[str, Any]] | None:
        found = [e for e in kinds("main") if e["source"] == "graveler"]
        return found if {"merge", "reset"} <= {e["type"] for e in found} else None

    main = wait_until(main_has_merge_and_reset, 10, "the merge and the reset on main")
    merge = next(e for e in main if e["type"] == "merge")
    assert merge["commit_id"] == merged["id"] and merge["message"] == "feature into main" and merge["user"] == "admin"
    feature = kinds("feature")
    assert [e["type"] for e in feature if e["source"] == "graveler"] == ["branch_created", "commit"]
    assert next(e for e in feature if e["type"] == "commit")["commit_id"] == commit["id"]

    # The gateway sends its events (the write of f.txt) in batches, after the response.
    def readable_with_write() -> str | None:
        out = silt("events", f"silt://{repo}/feature", "--since", "10m").out
        return out if "f.txt" in out else None

    readable = wait_until(readable_with_write, 10, "the gateway's write of f.txt in the readable listing")
    assert "commit" in readable and commit["id"][:12] in readable


def test_reading_events_needs_read_and_recording_is_for_services(stack: Stack, silt: Silt, repo: str) -> None:
    http = urllib3.PoolManager()
    anonymous = http.request("GET", _events_url(stack, repo), timeout=10)
    assert anonymous.status == 401 and "message" in json.loads(anonymous.data)

    silt.proc("auth", "users", "create", "nobody-events")
    key = silt("auth", "credentials", "create", "--user", "nobody-events", "--json").json()
    nobody = Credentials(key["access_key_id"], SecretStr(key["secret_access_key"]))
    refused = http.request(
        "GET", _events_url(stack, repo), headers=_basic(key["access_key_id"], key["secret_access_key"]), timeout=10
    )
    assert refused.status == 403 and "ReadRepo" in json.loads(refused.data)["message"]
    denied = silt.as_user(key["access_key_id"], key["secret_access_key"])("events", f"silt://{repo}/main", ok=False)
    assert denied.code == 6 and "permission denied" in denied.err.lower()
    with pytest.raises(grpc.RpcError) as watched:
        list(
            graveler_stub(stack, nobody).WatchEvents(ev.WatchEventsRequest(repository=repo, branch="main"), timeout=10)
        )
    assert watched.value.code() == grpc.StatusCode.PERMISSION_DENIED

    # Not even an administrator writes events in others' names: only the services that saw them.
    forged = ev.HistoryEvent(
        timestamp_us=time.time_ns() // 1000, repository=repo, branch="main", type=ev.READ, path="x", user="alice"
    )
    with pytest.raises(grpc.RpcError) as recorded:
        graveler_stub(stack).RecordEvents(ev.RecordEventsRequest(events=[forged]), timeout=10)
    assert recorded.value.code() == grpc.StatusCode.PERMISSION_DENIED

    missing = http.request(
        "GET",
        _events_url(stack, repo, "no-such-branch"),
        headers=_basic(str(silt.env["SILT_ACCESS_KEY_ID"]), str(silt.env["SILT_SECRET_ACCESS_KEY"])),
        timeout=10,
    )
    assert missing.status == 404
