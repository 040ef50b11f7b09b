"""The REST API's live feed (GET .../branches/{branch}/events) on its own stack with small caps:
streams per user and per process are capped with lakeFS-style 429/503 errors, bad `since`
values are typed 400s, and a stream ends with `event: error` when its repository is deleted or
its caller loses read access, instead of retrying for ever; users at their cap cannot keep an
administrator from opening one."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api, error_message
from tests.support.gateway_stack import gateway_stack
from tests.support.wait import wait_until

pytestmark = pytest.mark.e2e

PER_USER = 2
PER_PROCESS = 3
ADMIN_RESERVE = 1  # so other users hold PER_PROCESS - ADMIN_RESERVE = PER_USER feeds together


@pytest.fixture(scope="module")
def feed_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    overrides = {
        "api": {
            "max_live_feeds": PER_PROCESS,
            "max_live_feeds_per_user": PER_USER,
            "live_feed_reauthorize_seconds": 0.5,
            "live_feed_admin_reserve": ADMIN_RESERVE,
        },
        "auth": {"cache_ttl_seconds": 0.5},
    }
    with gateway_stack(Path(tmp_path_factory.mktemp("feed-stack")), overrides=overrides) as stack:
        yield Api(stack, urllib3.PoolManager())


def _headers(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _new_repo(api: Api, name: str) -> str:
    body = json.dumps({"name": name, "storage_namespace": f"local://{name}"}).encode()
    created = api.request(
        "POST", "/repositories", body=body, headers={**_headers(api.stack.admin), "Content-Type": "application/json"}
    )
    assert created.status == 201, created.data
    return name


@dataclass
class Stream:
    """An open live feed read by a thread: what arrived, and whether it ended."""

    response: Any
    data: bytearray = field(default_factory=bytearray)
    ended: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        try:
            for chunk in self.response.stream(1):
                self.data.extend(chunk)
        except Exception:  # the test closed it
            pass
        finally:
            self.ended.set()

    def close(self) -> None:
        if not self.ended.is_set():
            self.response.shutdown()  # unblocks the reading thread
        self.response.close()


def _open(api: Api, repo: str, creds: Credentials) -> tuple[int, Any]:
    # A pool of its own: a stream's connection is never handed to another request.
    response = urllib3.PoolManager().request(
        "GET",
        f"{api.base}/repositories/{repo}/branches/main/events",
        headers=_headers(creds),
        preload_content=False,
        retries=False,
        timeout=urllib3.Timeout(connect=10, read=60),
    )
    return response.status, response


def _follow(api: Api, repo: str, creds: Credentials) -> Stream:
    status, response = _open(api, repo, creds)
    assert status == 200, response.data
    stream = Stream(response)
    threading.Thread(target=stream.read, daemon=True).start()
    wait_until(lambda: stream.data, 10, "the stream's first keepalive")
    return stream


def test_feeds_are_capped_per_user_and_per_process(feed_api: Api) -> None:
    api = feed_api
    repo = _new_repo(api, "capped")
    admin, reader = api.stack.admin, api.stack.reader
    streams = [_follow(api, repo, admin) for _ in range(PER_USER)]
    try:
        _, refused = _open(api, repo, admin)
        assert "live feeds open" in error_message(refused, 429)
        streams.append(_follow(api, repo, reader))  # the process's last one
        _, busy = _open(api, repo, reader)
        assert "retry later" in error_message(busy, 503)
        streams.pop(0).close()  # a closed stream gives its place back

        def reopened() -> Stream | None:
            status, response = _open(api, repo, admin)
            if status != 200:
                response.read()
                return None
            stream = Stream(response)
            threading.Thread(target=stream.read, daemon=True).start()
            return stream

        streams.append(wait_until(reopened, 10, "the closed stream's place given back"))
    finally:
        for stream in streams:
            stream.close()


def test_bad_since_is_a_typed_400(feed_api: Api) -> None:
    api = feed_api
    repo = _new_repo(api, "bad-since")
    for since in (253402300800000000, 2**63, int(time.time() * 1e6) + 2 * 3_600_000_000):
        answer = api.request("GET", f"/repositories/{repo}/branches/main/events?follow=false&since={since}")
        assert "future" in error_message(answer, 400), since


def test_a_deleted_repository_ends_the_stream(feed_api: Api) -> None:
    api = feed_api
    repo = _new_repo(api, "deleted-feed")
    stream = _follow(api, repo, api.stack.admin)
    try:
        assert api.request("DELETE", f"/repositories/{repo}").status == 204
        assert stream.ended.wait(15), bytes(stream.data)
        assert b"event: error" in stream.data and b'"status":404' in stream.data
    finally:
        stream.close()


def test_losing_read_access_ends_the_stream(feed_api: Api) -> None:
    api = feed_api
    repo = _new_repo(api, "revoked-feed")
    stream = _follow(api, repo, api.stack.reader)
    try:
        removed = api.request("DELETE", "/auth/groups/Analysts/members/reader")
        assert removed.status == 204, removed.data
        assert stream.ended.wait(15), bytes(stream.data)
        assert b"event: error" in stream.data and b'"status":403' in stream.data
    finally:
        stream.close()
        restored = api.request("PUT", "/auth/groups/Analysts/members/reader")
        assert restored.status == 201, restored.data


def _analyst(api: Api, prefix: str) -> Credentials:
    """A new user in Analysts (ReadRepo everywhere) with an access key."""
    user = f"{prefix}-{time.monotonic_ns() % 10**9}"
    headers = {**_headers(api.stack.admin), "Content-Type": "application/json"}
    created = api.request("POST", "/auth/users", body=json.dumps({"id": user}).encode(), headers=headers)
    assert created.status == 201, created.data
    joined = api.request("PUT", f"/auth/groups/Analysts/members/{user}")
    assert joined.status == 201, joined.data
    issued = api.request("POST", f"/auth/users/{user}/credentials")
    assert issued.status == 201, issued.data
    key = json.loads(issued.data)
    return Credentials(key["access_key_id"], SecretStr(key["secret_access_key"]))


def test_users_at_their_cap_cannot_lock_an_administrator_out(feed_api: Api) -> None:
    api = feed_api
    repo = _new_repo(api, "crowded-feed")
    first, second = _analyst(api, "hog"), _analyst(api, "hog")
    streams: list[Stream] = []

    def opened(creds: Credentials) -> Stream | None:
        status, response = _open(api, repo, creds)
        if status != 200:
            assert status in (429, 503), response.read()
            return None
        stream = Stream(response)
        threading.Thread(target=stream.read, daemon=True).start()
        streams.append(stream)
        return stream

    try:
        # Earlier tests' feeds are given back as the server sees their connections close.
        for _ in range(PER_USER):
            wait_until(lambda: opened(first), 10, "a feed for a user below every cap")
        refused = opened(second)  # a place beyond the shared part, if the server gives one
        wait_until(lambda: opened(api.stack.admin), 10, "the administrator's feed, from the reserve")
        assert refused is None, "a user got a feed beyond the part shared by those who are not administrators"
    finally:
        for stream in streams:
            stream.close()
