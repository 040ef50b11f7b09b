"""An edge's concurrent writes to one branch, staged together: group commit for StageEntry.

Each 4 KiB PUT used to cost graveler one call of its own: a gRPC round trip, the interceptors
(authentication, limits, telemetry, journal context), one staging write in the KV and one
re-read of the branch, about 1 ms of graveler's CPU and half as much again in the edge. Writes
that arrive while a call for their branch is in flight do not each need their own: they wait
for it and then go together in one StageEntries call, which graveler applies with one writer
flow (docs/design/lockfree-staging.md, "Many writes in one call").

Nothing waits for company: a write that finds fewer than CALLS_IN_FLIGHT calls in flight for its
branch goes at once, alone (as StageEntry, exactly as before), so a lone client's latency is
unchanged; only writes that would otherwise queue behind graveler share a call. Each write is
acknowledged only when graveler's answer for it arrived, so an acknowledged write is staged
(seed 000's first guarantee), and a write still counts as finished only once acknowledged, so a
commit that started after it includes it.

Conditional writes (If-None-Match, If-Match) are single calls: their outcome is their own.
`StageBatcher.StageEntry` is a drop-in for the stub's method: the same request, the same
answer, and a failure is the same grpc.aio.AioRpcError a StageEntry call would raise (an invalid
entry INVALID_ARGUMENT, a missing branch NOT_FOUND, ...), so callers map errors as they always
did. A call's trace and request id are those of the write that opened the batch.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
import grpc.aio

from silt.graveler.v1 import graveler_pb2 as api

# Calls for one branch a process has in flight at once: one being served while the next
# gathers keeps graveler busy without splitting the waiting writes into many small calls.
CALLS_IN_FLIGHT = 2
# What one call carries at most (graveler takes 256 entries; a call's message stays far under
# gRPC's 4 MiB limit even with entries at their largest).
MAX_BATCH_ENTRIES = 64
MAX_BATCH_BYTES = 1024 * 1024


class StageCalls(Protocol):
    """What the batcher calls: graveler's stub (or anything with its two methods)."""

    def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> Any: ...

    def StageEntries(self, request: api.StageEntriesRequest, *, timeout: float | None = None) -> Any: ...


@dataclass
class _Write:
    request: api.StageEntryRequest
    answer: asyncio.Future[api.StageEntryResponse]
    deadline: float
    context: contextvars.Context


@dataclass
class _Branch:
    waiting: deque[_Write] = field(default_factory=deque)
    in_flight: int = 0


def _error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def _copy(exc: grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    # One exception object per waiting write: each is raised, and gets a traceback, on its own.
    return grpc.aio.AioRpcError(
        exc.code(), exc.initial_metadata(), exc.trailing_metadata(), exc.details(), exc.debug_error_string()
    )


class StageBatcher:
    """StageEntry calls of one event loop, gathered per branch (see the module's docstring)."""

    def __init__(self, calls: StageCalls, clock: Callable[[], float] = time.monotonic) -> None:
        self._calls = calls
        self._clock = clock
        self._branches: dict[tuple[str, str, str], _Branch] = {}

    async def StageEntry(self, request: api.StageEntryRequest, *, timeout: float) -> api.StageEntryResponse:
        if request.if_absent or request.if_match_etag:
            answer: api.StageEntryResponse = await self._calls.StageEntry(request, timeout=timeout)
            return answer
        # Writes for two incarnations of a repository's name never share a call: each names its own.
        key = (request.repository, request.branch, request.repository_id)
        branch = self._branches.get(key)
        if branch is None:
            branch = self._branches[key] = _Branch()
        write = _Write(
            request,
            asyncio.get_running_loop().create_future(),
            self._clock() + timeout,
            contextvars.copy_context(),
        )
        branch.waiting.append(write)
        if branch.in_flight < CALLS_IN_FLIGHT:
            branch.in_flight += 1
            asyncio.get_running_loop().create_task(self._drain(key, branch), context=write.context)
        try:
            # Leaving early (a timeout, the request cancelled) cancels write.answer: a write not
            # yet sent is then never sent, and one already sent is not answered to nobody.
            return await asyncio.wait_for(write.answer, timeout)
        except TimeoutError:
            # Not an answer: the write may still be staged by the call it is in, as for a
            # StageEntry call whose deadline passed.
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None

    async def _drain(self, key: tuple[str, str, str], branch: _Branch) -> None:
        """Send what waits on the branch, a call at a time, until nothing does."""
        try:
            while batch := self._take(branch):
                # Each call runs in the context of the write that opened it: its trace and
                # request id, not those of whichever write started this loop.
                await asyncio.get_running_loop().create_task(self._send(key, batch), context=batch[0].context)
        finally:
            branch.in_flight -= 1
            if not branch.in_flight:
                # Only a drain that was cancelled (the edge shutting down) leaves writes behind,
                # and none is left to send them.
                while branch.waiting:
                    gone = _error(grpc.StatusCode.UNAVAILABLE, "the edge stopped before sending the write")
                    _settle(branch.waiting.popleft(), exception=gone)
                self._branches.pop(key, None)

    def _take(self, branch: _Branch) -> list[_Write]:
        now = self._clock()
        batch: list[_Write] = []
        size = 0
        while branch.waiting and len(batch) < MAX_BATCH_ENTRIES:
            write = branch.waiting[0]
            if write.answer.done() or write.deadline <= now:
                # Its caller stopped waiting (it timed out or was cancelled) before it was
                # sent: it is not sent at all, which its caller's error already allows for.
                branch.waiting.popleft()
                continue
            weight = write.request.ByteSize()
            if batch and size + weight > MAX_BATCH_BYTES:
                break
            batch.append(branch.waiting.popleft())
            size += weight
        return batch

    async def _send(self, key: tuple[str, str, str], batch: list[_Write]) -> None:
        timeout = max(write.deadline for write in batch) - self._clock()
        try:
            if len(batch) == 1:
                outcomes = [await self._calls.StageEntry(batch[0].request, timeout=timeout)]
            else:
                outcomes = await self._call_many(key, batch, timeout)
        except grpc.aio.AioRpcError as exc:
            for write in batch:
                _settle(write, exception=_copy(exc))
            return
        except asyncio.CancelledError:
            for write in batch:
                _settle(write, exception=_error(grpc.StatusCode.CANCELLED, "the edge stopped waiting for graveler"))
            raise
        except Exception as exc:  # the call failed on this side: each write fails with it
            for write in batch:
                _settle(write, exception=exc)
            return
        for write, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                _settle(write, exception=outcome)
            else:
                _settle(write, result=api.StageEntryResponse())

    async def _call_many(
        self, key: tuple[str, str, str], batch: list[_Write], timeout: float
    ) -> list[api.StageEntryResponse | BaseException]:
        repository, branch, repository_id = key
        request = api.StageEntriesRequest(repository=repository, branch=branch, repository_id=repository_id)
        for write in batch:
            request.entries.add(key=write.request.key, entry=write.request.entry)
        response = await self._calls.StageEntries(request, timeout=timeout)
        if len(response.outcomes) != len(batch):
            missing = _error(grpc.StatusCode.INTERNAL, "graveler answered a different number of outcomes")
            return [_copy(missing) for _ in batch]
        outcomes: list[api.StageEntryResponse | BaseException] = []
        for outcome in response.outcomes:
            if outcome.result == api.StageEntryOutcome.RESULT_STAGED:
                outcomes.append(api.StageEntryResponse())
            elif outcome.result == api.StageEntryOutcome.RESULT_INVALID:
                outcomes.append(_error(grpc.StatusCode.INVALID_ARGUMENT, outcome.message))
            else:
                outcomes.append(_error(grpc.StatusCode.INTERNAL, f"unknown staging outcome {outcome.result}"))
        return outcomes


def _settle(
    write: _Write, result: api.StageEntryResponse | None = None, exception: BaseException | None = None
) -> None:
    if write.answer.done():
        return
    if exception is not None:
        write.answer.set_exception(exception)
    else:
        write.answer.set_result(result or api.StageEntryResponse())
