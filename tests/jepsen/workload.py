"""The clients of a run: S3 workers (boto3) on registers, and a committer on the REST API.

Every attempt is one operation in the history: botocore's retries are off and requests makes
one attempt, with short timeouts, so that an ambiguous answer shows as an unknown operation
instead of being retried away. Each worker draws its operations from a random.Random seeded
by the run's seed and its own number; values are unique ("<process>-<n>"), each with bytes
that name it (checker.body_of).
"""

from __future__ import annotations

import hashlib
import random
import threading
from dataclasses import dataclass, field
from typing import Any

import boto3
import requests
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from tests.jepsen.checker import FINAL, body_of, value_of
from tests.jepsen.history import (
    CAS,
    COMMIT,
    CREATE,
    DELETE,
    MERGE,
    MULTIPART,
    READ,
    WRITE,
    History,
    Op,
    Outcome,
    http_exception_outcome,
    s3_outcome,
    status_outcome,
)
from tests.jepsen.topology import Topology

BODY_SIZE = 1024
CONNECT_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 4.0
COMMIT_TIMEOUT_S = 10.0
WEIGHTS = {WRITE: 30, READ: 25, DELETE: 10, CREATE: 12, CAS: 15, MULTIPART: 8}


def etag_of(value: str, multipart: bool) -> str:
    digest = hashlib.md5(body_of(value, BODY_SIZE)).digest()
    if multipart:  # S3's: the MD5 of the parts' MD5s, then the number of parts
        return f"{hashlib.md5(digest).hexdigest()}-1"
    return digest.hex()


@dataclass
class Run:
    """What the clients of one run share."""

    topology: Topology
    repo: str
    history: History
    keys: dict[str, list[str]]  # branch -> its register keys (S3 keys are "<branch>/<key>")
    etags: dict[str, str] = field(default_factory=dict)  # etag (no quotes) -> value
    multipart: set[str] = field(default_factory=set)  # values written by CompleteMultipartUpload
    stop: threading.Event = field(default_factory=threading.Event)

    def s3(self, edge: int) -> Any:
        admin = self.topology.admin
        return boto3.client(
            "s3",
            endpoint_url=self.topology.edge_url(edge),
            aws_access_key_id=admin.access_key_id,
            aws_secret_access_key=admin.secret_access_key.get_secret_value(),
            region_name="us-east-1",
            config=BotoConfig(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1, "mode": "standard"},
                connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
                signature_version="s3v4",
            ),
        )

    def rest(self) -> requests.Session:
        session = requests.Session()
        admin = self.topology.admin
        session.auth = (admin.access_key_id, admin.secret_access_key.get_secret_value())
        return session

    def api(self, edge: int) -> str:
        return f"{self.topology.edge_url(edge)}/api/v1/repositories/{self.repo}"


def s3_read(run: Run, client: Any, process: str, branch: str, key: str) -> Op:
    op = run.history.invoke(process, READ, f"{branch}/{key}")
    try:
        body = client.get_object(Bucket=run.repo, Key=f"{branch}/{key}")["Body"].read()
    except ClientError as exc:
        outcome, why = s3_outcome(exc)
        if why == "404 NoSuchKey":
            return History.complete(op, Outcome.OK, why, value=None)
        return History.complete(op, Outcome.UNKNOWN if outcome is Outcome.OK else outcome, why)
    except Exception as exc:
        return History.complete(op, *s3_outcome(exc))
    return History.complete(op, Outcome.OK, value=value_of(body, BODY_SIZE))


class Worker:
    """One client process of the registers: its own random, edge choice and knowledge of values."""

    def __init__(self, run: Run, number: int, seed: int) -> None:
        self.run = run
        self.process = f"s3-{number}"
        self.rng = random.Random(f"{seed}/{self.process}")
        self.clients = [run.s3(0), run.s3(1)]
        self.count = 0
        self.known: dict[str, str] = {}  # key -> a value this worker saw there last

    def loop(self) -> None:
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        branches = sorted(self.run.keys)
        while not self.run.stop.is_set():
            branch = self.rng.choice(branches)
            key = self.rng.choice(self.run.keys[branch])
            kind = self.rng.choices(kinds, weights)[0]
            self.one(self.clients[self.rng.randrange(2)], kind, branch, key)

    def value(self, multipart: bool = False) -> str:
        self.count += 1
        value = f"{self.process}-{self.count}"
        self.run.etags[etag_of(value, multipart)] = value
        if multipart:
            self.run.multipart.add(value)
        return value

    def one(self, client: Any, kind: str, branch: str, key: str) -> None:
        s3_key, run = f"{branch}/{key}", self.run
        if kind == READ:
            op = s3_read(run, client, self.process, branch, key)
            if op.outcome is Outcome.OK and op.value is not None:
                self.known[s3_key] = op.value
            return
        if kind == CAS and s3_key not in self.known:
            kind = CREATE
        expected = self.known.get(s3_key) if kind == CAS else None
        value = None if kind == DELETE else self.value(multipart=kind == MULTIPART)
        upload_id = ""
        if kind == MULTIPART:
            assert value is not None
            try:  # creating the upload and its part changes no key: not operations of the register
                upload_id = client.create_multipart_upload(Bucket=run.repo, Key=s3_key)["UploadId"]
                part = client.upload_part(
                    Bucket=run.repo, Key=s3_key, UploadId=upload_id, PartNumber=1, Body=body_of(value, BODY_SIZE)
                )
            except Exception:
                return
        op = run.history.invoke(self.process, kind, s3_key, value, expected)
        try:
            if kind == DELETE:
                client.delete_object(Bucket=run.repo, Key=s3_key)
            elif kind == MULTIPART:
                client.complete_multipart_upload(
                    Bucket=run.repo,
                    Key=s3_key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
                )
            else:
                assert value is not None
                conditions: dict[str, str] = {}
                if kind == CREATE:
                    conditions["IfNoneMatch"] = "*"
                elif kind == CAS:
                    assert expected is not None
                    conditions["IfMatch"] = f'"{etag_of(expected, expected in run.multipart)}"'
                client.put_object(Bucket=run.repo, Key=s3_key, Body=body_of(value, BODY_SIZE), **conditions)
        except ClientError as exc:
            outcome, why = s3_outcome(exc)
            if why.startswith("412"):
                History.complete(op, Outcome.OK, why, precondition_failed=True)
                self.known.pop(s3_key, None)
            else:
                op.result["message"] = str(exc.response.get("Error", {}).get("Message", ""))[:500]
                History.complete(op, outcome, why)
            return
        except Exception as exc:
            History.complete(op, *s3_outcome(exc))
            return
        History.complete(op, Outcome.OK)
        if value is not None:
            self.known[s3_key] = value
        else:
            self.known.pop(s3_key, None)


def rest_call(run: Run, process: str, kind: str, branch: str, method: str, url: str, body: dict[str, Any]) -> Op:
    """A commit or merge through the REST API; its result commit id in op.result['id']."""
    op = run.history.invoke(process, kind, branch)
    try:
        response = run.rest().request(method, url, json=body, timeout=(CONNECT_TIMEOUT_S, COMMIT_TIMEOUT_S))
    except requests.RequestException as exc:
        return History.complete(op, *http_exception_outcome(exc))
    outcome = status_outcome(response.status_code)
    if outcome is Outcome.OK:
        answer = response.json()
        op.result["id"] = answer.get("id") or answer.get("reference", "")
        return History.complete(op, outcome, str(response.status_code))
    # The message is for the reader of the report only; the outcome came from the status.
    return History.complete(op, outcome, f"{response.status_code} {response.text[:120]}")


class Committer:
    """Commits the written branches, and after some commits merges that branch into main (which
    no client writes: a merge needs a destination without uncommitted changes), through either
    edge's REST API."""

    def __init__(self, run: Run, seed: int, pause_s: float = 1.0) -> None:
        self.run = run
        self.rng = random.Random(f"{seed}/committer")
        self.pause_s = pause_s
        self.merges: list[tuple[Op, Op]] = []  # (the source's commit, the merge) pairs

    def loop(self) -> None:
        run, n, branches = self.run, 0, sorted(self.run.keys)
        while not run.stop.wait(self.pause_s):
            n += 1
            branch = self.rng.choice(branches)
            url = f"{run.api(self.rng.randrange(2))}/branches/{branch}/commits"
            body = {"message": f"c{n}", "allow_empty": True}
            commit = rest_call(run, "committer", COMMIT, branch, "POST", url, body)
            if commit.outcome is not Outcome.OK or self.rng.random() < 0.5:
                continue
            url = f"{run.api(self.rng.randrange(2))}/refs/{commit.result['id']}/merge/main"
            merge = rest_call(run, "committer", MERGE, "main", "POST", url, {"message": f"m{n}", "allow_empty": True})
            self.merges.append((commit, merge))


def final_reads(run: Run) -> None:
    """Every key through both edges, once every fault has healed (process FINAL). A GET that
    finds nothing is followed by a HEAD, answered from the entry alone: an entry there means
    its bytes are missing, and the read is recorded as failed (checker.unreadable)."""
    clients = [run.s3(0), run.s3(1)]
    for branch, keys in sorted(run.keys.items()):
        for key in keys:
            for client in clients:
                op = s3_read(run, client, FINAL, branch, key)
                if op.outcome is not Outcome.OK or op.value is not None:
                    continue
                try:
                    head = client.head_object(Bucket=run.repo, Key=f"{branch}/{key}")
                except ClientError:
                    continue  # NoSuchKey: absent indeed (any other answer: the GET's stands)
                etag = str(head.get("ETag", "")).strip('"')
                op.outcome = Outcome.FAIL
                op.result["entry"] = run.etags.get(etag, f"unknown-etag:{etag}")
                op.error = f"GET 404 NoSuchKey, HEAD 200 ({op.result['entry']}): the entry's bytes are missing"


def commit_contents(run: Run, commit_id: str, prefix: str) -> dict[str, str | None]:
    """path -> value of every object under prefix in a commit (REST API listing)."""
    out: dict[str, str | None] = {}
    after = ""
    session = run.rest()
    while True:
        response = session.get(
            f"{run.api(0)}/refs/{commit_id}/objects/ls",
            params={"prefix": prefix, "after": after, "amount": "1000"},
            timeout=30,
        )
        response.raise_for_status()
        page = response.json()
        for item in page["results"]:
            checksum = item["checksum"].strip('"')
            out[item["path"]] = run.etags.get(checksum, f"unknown-etag:{checksum}")
        if not page["pagination"]["has_more"]:
            return out
        after = page["pagination"]["next_offset"]
