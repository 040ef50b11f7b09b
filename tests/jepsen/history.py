"""The history of a run: every client operation as an invocation and its completion.

An operation is recorded when it is invoked and completed with one of three outcomes:

* ok: the system acknowledged it (for a conditional write refused by its condition, ok with
  ``precondition_failed``: the refusal is an answer that says what the key held);
* fail: it certainly did not happen (refused before anything was written, or never sent);
* unknown: it may or may not have happened, at any time after its invocation (a timeout,
  a dropped connection, a 5xx).

Outcomes are decided from types and status codes only (`s3_outcome`, `http_outcome`), never
from an error's text. Times are ``time.monotonic_ns()``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Kinds of operation. Register operations act on one key; commit and merge on a branch.
READ = "read"
WRITE = "write"
DELETE = "delete"
CREATE = "create"  # PUT If-None-Match: *
CAS = "cas"  # PUT If-Match: <etag of expected>
MULTIPART = "multipart"  # CompleteMultipartUpload
COMMIT = "commit"
MERGE = "merge"
REGISTER_KINDS = (READ, WRITE, DELETE, CREATE, CAS, MULTIPART)
MUTATIONS = (WRITE, DELETE, CREATE, CAS, MULTIPART)


class Outcome(StrEnum):
    OK = "ok"
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass
class Op:
    """One operation. value: what a write writes (its unique value) or what a read returned
    (None: the key was absent); expected: a CAS's value it requires the key to hold."""

    index: int
    process: str
    kind: str
    key: str
    invoke_ns: int
    value: str | None = None
    expected: str | None = None
    complete_ns: int | None = None
    outcome: Outcome | None = None
    precondition_failed: bool = False
    error: str = ""  # the status or exception type that decided the outcome
    result: dict[str, Any] = field(default_factory=dict)  # e.g. a commit's id

    @property
    def latency_ns(self) -> int | None:
        return None if self.complete_ns is None else self.complete_ns - self.invoke_ns

    @property
    def effective(self) -> bool:
        """Whether the operation may have changed the key (a refused condition changed nothing)."""
        return self.outcome is not Outcome.FAIL and not self.precondition_failed

    def describe(self) -> str:
        if self.kind == READ:
            what = f"read -> {self.value!r}" if self.outcome is Outcome.OK else "read"
        elif self.kind == DELETE:
            what = "delete"
        elif self.kind == CAS:
            what = f"cas {self.expected!r} -> {self.value!r}"
        elif self.kind in (COMMIT, MERGE):
            what = f"{self.kind} {self.result.get('id', '')}".rstrip()
        else:
            what = f"{self.kind} {self.value!r}"
        outcome = self.outcome.value if self.outcome is not None else "pending"
        if self.precondition_failed:
            outcome += " (precondition failed)"
        if self.error:
            outcome += f" [{self.error}]"
        return f"{what}: {outcome}"


class History:
    """Operations of every client, in invocation order; safe to record from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ops: list[Op] = []

    def invoke(self, process: str, kind: str, key: str, value: str | None = None, expected: str | None = None) -> Op:
        with self._lock:
            op = Op(len(self.ops), process, kind, key, time.monotonic_ns(), value, expected)
            self.ops.append(op)
        return op

    @staticmethod
    def complete(
        op: Op, outcome: Outcome, error: str = "", value: str | None = None, precondition_failed: bool = False
    ) -> Op:
        op.complete_ns = time.monotonic_ns()
        op.outcome = outcome
        op.error = error
        op.precondition_failed = precondition_failed
        if op.kind == READ:
            op.value = value
        return op

    def of_key(self, key: str) -> list[Op]:
        return [op for op in self.ops if op.key == key and op.kind in REGISTER_KINDS]

    def register_keys(self) -> list[str]:
        return sorted({op.key for op in self.ops if op.kind in REGISTER_KINDS})


# --- outcomes from types and statuses ---------------------------------------------------------


def status_outcome(status: int) -> Outcome:
    """An HTTP answer: 2xx happened, 4xx was refused before anything changed, anything else
    (5xx: the server could not say) may or may not have happened."""
    if 200 <= status < 300:
        return Outcome.OK
    if 400 <= status < 500:
        return Outcome.FAIL
    return Outcome.UNKNOWN


def s3_outcome(exc: BaseException) -> tuple[Outcome, str]:
    """A boto3 call's exception: its outcome and the status or type that decided it."""
    from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError

    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        code = str(exc.response.get("Error", {}).get("Code", ""))
        return status_outcome(status), f"{status} {code}".strip()
    # Connection refused or not established: the request was never sent.
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return Outcome.FAIL, type(exc).__name__
    return Outcome.UNKNOWN, type(exc).__name__  # read timeouts, connections closed mid-answer


def http_exception_outcome(exc: BaseException) -> tuple[Outcome, str]:
    """A requests call's exception (the REST API's client)."""
    import requests

    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return Outcome.FAIL, type(exc).__name__
    if isinstance(exc, requests.exceptions.ConnectionError) and not isinstance(exc, requests.exceptions.ReadTimeout):
        # A refused connection carries urllib3's NewConnectionError: never sent. Anything
        # else (reset, closed mid-answer) may have been applied.
        import urllib3.exceptions

        reason = exc.args[0] if exc.args else None
        inner = getattr(reason, "reason", reason)
        if isinstance(inner, urllib3.exceptions.NewConnectionError):
            return Outcome.FAIL, "NewConnectionError"
    return Outcome.UNKNOWN, type(exc).__name__
