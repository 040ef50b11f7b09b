"""Whether a failed graveler write certainly changed nothing: the edge's rule for deleting the bytes it wrote.

An edge writes an object's bytes first and stages their entry after; when staging fails, the
bytes may be deleted only if graveler *certainly* did not apply the entry, or a staged entry
would point at nothing. That is decided from the gRPC client's own signals, never from an
error's text (a message saying "connection refused" may be Cassandra's, after the write landed):

* graveler's refusal (`REFUSED`): it answered, and a refused write changed nothing;
* `NotApplied`: the edge itself knows the request never reached graveler's KV. Either it was
  never sent (`SentWhenReady` sends a write only on a channel that is READY; otherwise no
  request leaves the edge), or graveler answered that it skipped the entry as expired
  (StageEntries' RESULT_EXPIRED).

Anything else (UNAVAILABLE or CANCELLED after the request went out, DEADLINE_EXCEEDED, INTERNAL,
UNKNOWN, ABORTED, graveler's own UNAVAILABLE when its store failed) may have been applied. A
write retried after such an attempt stays "may have been applied" whatever the later attempts
say (`Attempts`): a refusal then may be the earlier attempt's own doing. Such a write keeps its
bytes (garbage collection's uncommitted sweep removes true orphans) and its client gets a
retryable error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

import grpc
import grpc.aio

from silt.errors import NotApplied as StoreNotApplied
from silt.graveler.v1 import graveler_pb2 as api

# Answers after which graveler certainly did not apply the call: it refused it.
REFUSED = frozenset(
    {
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)
# How long a write waits for graveler's channel to become READY (it connects, or reconnects
# after graveler restarted) before it fails unsent; never longer than the write's own time.
READY_WAIT = 1.0


class NotApplied(grpc.aio.AioRpcError):
    """A failed graveler write the edge knows was not applied, from its own signals: it never
    left the edge, or graveler said it skipped it. The status is what the caller is answered
    (UNAVAILABLE, DEADLINE_EXCEEDED); the type is what says the bytes may go."""


def not_applied_error(code: grpc.StatusCode, details: str) -> NotApplied:
    return NotApplied(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def certainly_not_applied(exc: BaseException) -> bool:
    """Whether a failed write certainly changed nothing in graveler: its refusal, a NotApplied
    (a call never sent, or silt's own for a write the edge knows was not applied), or an edge's
    error for it that says so (`not_applied`, set where an edge maps the answer)."""
    if isinstance(exc, NotApplied | StoreNotApplied):
        return True
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code() in REFUSED
    return bool(getattr(exc, "not_applied", False))


class Attempts:
    """The attempts of one write: it is not applied only when no attempt may have been."""

    def __init__(self) -> None:
        self.maybe_applied = False

    def failed(self, exc: BaseException) -> None:
        if not certainly_not_applied(exc):
            self.maybe_applied = True

    @property
    def not_applied(self) -> bool:
        return not self.maybe_applied


class StageMethods(Protocol):
    """Graveler's stub, as far as writes of entries go."""

    def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> Any: ...

    def StageEntries(self, request: api.StageEntriesRequest, *, timeout: float | None = None) -> Any: ...


class SentWhenReady:
    """Graveler's StageEntry and StageEntries, each sent only once the channel is READY.

    A write the channel cannot carry (graveler down or restarting: the channel is connecting or
    failing) fails with NotApplied(UNAVAILABLE) and no request is sent: the one signal that
    proves "never reached graveler" without reading a message. A call sent on a READY channel
    that fails UNAVAILABLE anyway (the connection broke under it) may have been applied.

    The wait for READY counts against the write's own time: the call's timeout is what is left
    of it once the channel is READY (a write whose time ran out while waiting is not sent:
    NotApplied(DEADLINE_EXCEEDED)), so graveler never gets more time than the caller waits.
    """

    def __init__(
        self,
        stub: StageMethods,
        channel: grpc.aio.Channel,
        wait: float = READY_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stub = stub
        self._channel = channel
        self._wait = wait
        self._clock = clock

    async def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> Any:
        return await self._stub.StageEntry(request, timeout=await self._left_when_ready(timeout))

    async def StageEntries(self, request: api.StageEntriesRequest, *, timeout: float | None = None) -> Any:
        return await self._stub.StageEntries(request, timeout=await self._left_when_ready(timeout))

    async def _left_when_ready(self, timeout: float | None) -> float | None:
        """Wait for READY; what is left of timeout then (None: no timeout)."""
        until = None if timeout is None else self._clock() + timeout
        await self.ready(timeout)
        if until is None:
            return None
        left = until - self._clock()
        if left <= 0:
            raise not_applied_error(
                grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded (waiting for graveler; the write was not sent)"
            )
        return left

    async def ready(self, timeout: float | None) -> None:
        """Return once the channel is READY; NotApplied(UNAVAILABLE) if it fails, shuts down or
        is not READY within the wait (at most timeout, counted on the gate's clock from now)."""
        state = self._channel.get_state(try_to_connect=True)
        if state is grpc.ChannelConnectivity.READY:
            return
        until = self._clock() + (self._wait if timeout is None else min(self._wait, timeout))
        while state is not grpc.ChannelConnectivity.READY:
            left = until - self._clock()
            if left <= 0 or state in (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN):
                break
            try:
                async with asyncio.timeout(left):
                    await self._channel.wait_for_state_change(state)
            except TimeoutError:
                break
            state = self._channel.get_state(try_to_connect=True)
        if state is not grpc.ChannelConnectivity.READY:
            raise not_applied_error(
                grpc.StatusCode.UNAVAILABLE, f"graveler is not reachable ({state.name}); the write was not sent"
            )
