"""WatchEvents streams against real auth and graveler servers: a stream whose caller loses ReadRepo
ends with PERMISSION_DENIED within the re-authorization interval and forwards nothing written
after it, and callers at their stream cap cannot take the slots kept for administrators."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.features.history_events.streams import StreamLimits
from silt.auth.v1 import auth_pb2 as auth_api
from silt.config import DatabaseConfig
from silt.graveler.v1 import events_pb2 as ev
from silt.kv import open_store
from silt.rpc.signing import Credentials
from tests.integration.auth.support import Stack, start_stack

# Production's caps, a short interval: the test waits for it once.
LIMITS = StreamLimits(total=8, per_caller=2, admin_reserve=2, reauthorize_seconds=0.5)
# On top of the interval: one poll (0.25 s) and auth's answer, on a loaded machine.
CLOSE_GRACE_SECONDS = 2.0
# The caches of the stream-opening checks never expire by themselves (a manual clock).
CACHE_TTL = 60.0


@pytest.fixture(scope="module")
def streams_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root: Path = tmp_path_factory.mktemp("streams")
    store = open_store(DatabaseConfig(type="mem"))
    running = start_stack(store, root / "data", CACHE_TTL, streams=LIMITS)
    try:
        yield running
    finally:
        running.close()
        store.close()


def _now_us() -> int:
    return time.time_ns() // 1000


def _record(stack: Stack, repo: str, path: str) -> int:
    """A write event on main, recorded as the S3 gateway would; its timestamp."""
    stamp = _now_us()
    event = ev.HistoryEvent(timestamp_us=stamp, repository=repo, branch="main", type=ev.WRITE, path=path, user="u")
    answer = stack.gv(stack.services["gateway"]).RecordEvents(ev.RecordEventsRequest(events=[event]), timeout=10)
    assert answer.recorded == 1, answer
    return stamp


def _watch(stack: Stack, creds: Credentials, repo: str) -> Any:
    """A followed stream: an iterator of events that is also the call (cancel())."""
    request = ev.WatchEventsRequest(repository=repo, branch="main", follow=True)
    return stack.gv(creds).WatchEvents(request, timeout=60)


@dataclass
class Reader:
    """A followed stream read by a thread: the events that came, and how it ended."""

    call: Any
    events: list[ev.HistoryEvent] = field(default_factory=list)
    first: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    ended_at: float = 0.0
    error: grpc.RpcError | None = None

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._read, name="test-stream-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for event in self.call:
                self.events.append(event)
                self.first.set()
        except grpc.RpcError as exc:
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.ended.set()

    def stop(self) -> None:
        self.call.cancel()
        self._thread.join(10)
        assert not self._thread.is_alive()


def test_a_stream_ends_once_its_caller_loses_read_access(streams_stack: Stack) -> None:
    stack = streams_stack
    repo = stack.new_repo("revoked")
    user, creds = stack.new_user(groups=["Analysts"], prefix="watcher")
    _record(stack, repo, "before")
    reader = Reader(_watch(stack, creds, repo))
    try:
        assert reader.first.wait(10), "the stream never delivered the stored event"
        stack.auth(stack.admin).RemoveGroupMember(auth_api.GroupMemberRequest(group_id="Analysts", user_id=user))
        removed_at, removed_us = time.monotonic(), _now_us()
        written = 0
        # Writes keep coming, as the finding's 40 did, until the stream ends or clearly will not.
        while not reader.ended.wait(0.05) and time.monotonic() - removed_at < LIMITS.reauthorize_seconds + 5:
            _record(stack, repo, f"after-{written}")
            written += 1
        assert reader.ended.is_set(), f"the stream still runs {written} writes after its caller lost ReadRepo"
        assert reader.error is not None and reader.error.code() == grpc.StatusCode.PERMISSION_DENIED, reader.error
        took = reader.ended_at - removed_at
        assert took <= LIMITS.reauthorize_seconds + CLOSE_GRACE_SECONDS, f"ended {took:.2f} s after the removal"
        horizon = removed_us + int(LIMITS.reauthorize_seconds * 1e6)
        late = [e.path for e in reader.events if e.timestamp_us > horizon]
        assert not late, f"written more than the interval after the removal, yet forwarded: {late}"
        assert written, "no write was made while the stream ran: nothing was tested"
    finally:
        reader.stop()


def test_users_at_their_cap_cannot_lock_an_administrator_out(streams_stack: Stack) -> None:
    stack = streams_stack
    repo = stack.new_repo("crowded")
    _record(stack, repo, "seed")
    open_calls: list[Any] = []
    refused: list[grpc.StatusCode] = []
    try:
        # Enough users at their cap to take every slot, were none kept for administrators.
        for _ in range(LIMITS.total // LIMITS.per_caller + 1):
            _, creds = stack.new_user(groups=["Analysts"], prefix="hog")
            for _ in range(LIMITS.per_caller):
                call = _watch(stack, creds, repo)
                try:
                    assert next(call).path == "seed"
                except grpc.RpcError as exc:
                    refused.append(exc.code())
                    break
                open_calls.append(call)
        assert refused and set(refused) == {grpc.StatusCode.RESOURCE_EXHAUSTED}, refused
        for _ in range(LIMITS.admin_reserve):
            admin_call = _watch(stack, stack.admin, repo)
            open_calls.append(admin_call)
            try:
                assert next(admin_call).path == "seed"
            except grpc.RpcError as exc:
                pytest.fail(f"the administrator was refused a stream: {exc.code()} {exc.details()}")
        # The others were held to the shared part, the administrator's streams took the reserve.
        assert len(open_calls) == LIMITS.total
    finally:
        for call in open_calls:
            call.cancel()
