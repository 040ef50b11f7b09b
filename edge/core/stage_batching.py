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

Conditional writes (If-None-Match, If-Match) and ref-neutral ones (whose key is recorded, create-only,
before it is staged) are single calls: their outcome is their own.

**Deadlines.** A write whose caller was answered DEADLINE_EXCEEDED must never land later (its
caller may have deleted or rewritten the key since, acknowledged). So graveler is never given
more time for a write than its caller waits, less DEADLINE_MARGIN (which covers the trip to
graveler and gRPC's rounding of a call's timeout). Every budget is set only after the wait for a
READY channel (edge/core/write_outcome.py's SentWhenReady): that wait counts against the write's
time, and a write whose time ran out during it is not sent. A single write's call has that
timeout (and graveler checks the call's deadline before its KV write); in a StageEntries call
each entry says how long before the call's deadline its own time ends (`slack_ms`), and
graveler takes the entry's deadline as the call's gRPC deadline (which it counts on its own
clock from the call's arrival, so queueing in graveler counts too) less that, checks it before
writing the entry and answers RESULT_EXPIRED when it passed. The call itself may live as long as
its longest write: giving it the earliest deadline instead would let one write that is nearly
out of time fail every other write of the batch with an outcome nobody can tell
(DEADLINE_EXCEEDED). A call that timed out is not answered before its writes' own deadlines: by
then graveler no longer writes them. Graveler's own refusal to go on (ABORTED: an entry's time
ran out while a commit made it write the call's entries again) answers every write at once, as
possibly staged. Two writes of one key never share a call (graveler would stage only the last).

**What a failure says.** An entry graveler skipped as expired, and a write never sent (its
caller gave up first, its time ran out while the channel connected, or the channel was not
ready: edge/core/write_outcome.py), fail with NotApplied: its bytes may be deleted. Every other
failure may have been applied.

**Older gravelers.** A graveler that does not serve StageEntries (UNIMPLEMENTED: a rolling
upgrade) gets each write of the batch as a StageEntry call of its own, and the batcher keeps
doing so for SINGLES_FOR seconds before it tries StageEntries again. A graveler that serves
StageEntries but predates per-entry deadlines does not set `per_entry_deadlines` in its answer:
it gave every entry of that call the call's (latest) deadline, and the batcher then sends
single calls for SINGLES_FOR seconds too. That one call is the exposure, so gravelers are
upgraded before edges (docs/operations.md, "Upgrading without downtime").
`StageBatcher.StageEntry` is a drop-in for the stub's method: the same request, the same
answer, and a failure is the same grpc.aio.AioRpcError a StageEntry call would raise (an invalid
entry INVALID_ARGUMENT, a missing branch NOT_FOUND, ...), so callers map errors as they always
did. A call's trace and request id are those of the write that opened the batch.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
import grpc.aio

from edge.core.write_outcome import NotApplied, not_applied_error
from silt.graveler.v1 import graveler_pb2 as api

# Calls for one branch a process has in flight at once: one being served while the next
# gathers keeps graveler busy without splitting the waiting writes into many small calls.
CALLS_IN_FLIGHT = 2
# What one call carries at most (graveler takes 256 entries; a call's message stays far under
# gRPC's 4 MiB limit even with entries at their largest).
MAX_BATCH_ENTRIES = 64
MAX_BATCH_BYTES = 1024 * 1024
# Graveler's time for a write ends this long before its caller's: the trip to graveler and
# gRPC's rounding of a timeout (up to 100 ms for one of 10 to 100 s) fit in it, so graveler's
# deadline for a write passes before its caller is told DEADLINE_EXCEEDED.
DEADLINE_MARGIN = 0.25
# After a graveler answered UNIMPLEMENTED to StageEntries, writes go one call each this long.
SINGLES_FOR = 60.0


class StageCalls(Protocol):
    """What the batcher calls: graveler's stub (or anything with its two methods)."""

    def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> Any: ...

    def StageEntries(self, request: api.StageEntriesRequest, *, timeout: float | None = None) -> Any: ...

    async def ready(self, timeout: float | None) -> None:
        """Return once a call can go out (graveler's channel is READY), within timeout; fail
        with a NotApplied otherwise (edge/core/write_outcome.py's SentWhenReady)."""


@dataclass
class _Write:
    request: api.StageEntryRequest
    answer: asyncio.Future[api.StageEntryResponse]
    deadline: float
    context: contextvars.Context
    sent: bool = False  # whether a call carrying it went out (or may have)


@dataclass
class _Branch:
    waiting: deque[_Write] = field(default_factory=deque)
    in_flight: int = 0


def _error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def _copy(exc: grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    # One exception object per waiting write: each is raised, and gets a traceback, on its own.
    # Of the same type: a NotApplied stays one.
    return type(exc)(
        exc.code(), exc.initial_metadata(), exc.trailing_metadata(), exc.details(), exc.debug_error_string()
    )


def _expired() -> NotApplied:
    return not_applied_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded (the write was not staged)")


def _timed_out(exc: BaseException) -> bool:
    """A call that ran out of time, its outcome unknown (not a NotApplied)."""
    return (
        isinstance(exc, grpc.aio.AioRpcError)
        and not isinstance(exc, NotApplied)
        and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    )


class StageBatcher:
    """StageEntry calls of one event loop, gathered per branch (see the module's docstring)."""

    def __init__(self, calls: StageCalls, clock: Callable[[], float] = time.monotonic) -> None:
        self._calls = calls
        self._clock = clock
        self._branches: dict[tuple[str, str, str], _Branch] = {}
        self._singles_until = -math.inf

    async def StageEntry(self, request: api.StageEntryRequest, *, timeout: float) -> api.StageEntryResponse:
        deadline = self._clock() + timeout
        if request.if_absent or request.if_match_etag or request.neutral:
            return await self._alone(request, deadline)
        # Writes for two incarnations of a repository's name never share a call: each names its own.
        key = (request.repository, request.branch, request.repository_id)
        branch = self._branches.get(key)
        if branch is None:
            branch = self._branches[key] = _Branch()
        write = _Write(request, asyncio.get_running_loop().create_future(), deadline, contextvars.copy_context())
        branch.waiting.append(write)
        if branch.in_flight < CALLS_IN_FLIGHT:
            branch.in_flight += 1
            asyncio.get_running_loop().create_task(self._drain(key, branch), context=write.context)
        try:
            # Leaving early (a timeout, the request cancelled) cancels write.answer: a write not
            # yet sent is then never sent, and one already sent is not answered to nobody.
            return await asyncio.wait_for(write.answer, timeout)
        except TimeoutError:
            if not write.sent:
                raise _expired() from None  # it never left: certainly not staged
            # Not an answer: the call it is in may have staged it, as for a StageEntry call
            # whose deadline passed. Graveler's time for it is over by now.
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None

    async def _alone(
        self, request: api.StageEntryRequest, deadline: float, hold: bool = True
    ) -> api.StageEntryResponse:
        """One StageEntry call for one write, with graveler's time ending DEADLINE_MARGIN before
        the caller's; hold: a timed-out call is answered only at the caller's deadline (a
        batched write's caller waits for that by itself)."""
        budget = deadline - DEADLINE_MARGIN - self._clock()
        if budget <= 0:
            raise _expired()
        # The wait for a READY channel is part of the write's time: its budget is what is left after.
        await self._calls.ready(budget)
        budget = deadline - DEADLINE_MARGIN - self._clock()
        if budget <= 0:
            raise _expired()
        try:
            answer: api.StageEntryResponse = await self._calls.StageEntry(request, timeout=budget)
            return answer
        except grpc.aio.AioRpcError as exc:
            if hold and _timed_out(exc):
                await asyncio.sleep(max(0.0, deadline - self._clock()))
            raise

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
                    gone = not_applied_error(grpc.StatusCode.UNAVAILABLE, "the edge stopped before sending the write")
                    _settle(branch.waiting.popleft(), exception=gone)
                self._branches.pop(key, None)

    def _take(self, branch: _Branch) -> list[_Write]:
        now = self._clock()
        batch: list[_Write] = []
        size = 0
        keys: set[str] = set()
        while branch.waiting and len(batch) < MAX_BATCH_ENTRIES:
            write = branch.waiting[0]
            if write.answer.done() or write.deadline - DEADLINE_MARGIN <= now:
                # Its caller stopped waiting (it timed out or was cancelled), or will before
                # graveler could take it: it is not sent at all, and fails as not staged.
                branch.waiting.popleft()
                _settle(write, exception=_expired())
                continue
            weight = write.request.ByteSize()
            if batch and size + weight > MAX_BATCH_BYTES:
                break
            if write.request.key in keys:
                # Never two writes of a key in one call (graveler would stage only the last one):
                # the later one goes in the next call, after this one was answered.
                break
            keys.add(write.request.key)
            # Sent from here on: its caller timing out now may no longer say "not staged".
            write.sent = True
            batch.append(branch.waiting.popleft())
            size += weight
        return batch

    async def _send(self, key: tuple[str, str, str], batch: list[_Write]) -> None:
        try:
            if len(batch) == 1 or self._clock() < self._singles_until:
                await asyncio.gather(*(self._single(write) for write in batch))
                return
            outcomes = await self._call_many(key, batch)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                # A graveler older than StageEntries (a rolling upgrade): the method is not
                # served, so nothing was staged; each write goes as a call of its own.
                self._singles_until = self._clock() + SINGLES_FOR
                await asyncio.gather(*(self._single(write) for write in batch))
                return
            if not _timed_out(exc):
                for write in batch:
                    _settle(write, exception=_copy(exc))
            # A call that timed out answers no write: each caller's own deadline does, once
            # graveler no longer writes it.
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

    async def _single(self, write: _Write) -> None:
        """write as a StageEntry call of its own, answered to its caller."""
        try:
            _settle(write, result=await self._alone(write.request, write.deadline, hold=False))
        except asyncio.CancelledError:
            _settle(write, exception=_error(grpc.StatusCode.CANCELLED, "the edge stopped waiting for graveler"))
            raise
        except Exception as exc:
            if not _timed_out(exc):  # a timed-out call: the caller's own deadline answers it
                _settle(write, exception=_copy(exc) if isinstance(exc, grpc.aio.AioRpcError) else exc)

    async def _call_many(
        self, key: tuple[str, str, str], batch: list[_Write]
    ) -> list[api.StageEntryResponse | BaseException]:
        repository, branch, repository_id = key
        # The wait for a READY channel is part of the writes' time: budgets are set after it.
        await self._calls.ready(max(write.deadline for write in batch) - DEADLINE_MARGIN - self._clock())
        now = self._clock()
        outcomes: list[api.StageEntryResponse | BaseException | None] = [
            None if write.deadline - DEADLINE_MARGIN > now else _expired() for write in batch
        ]
        live = [write for write, outcome in zip(batch, outcomes, strict=True) if outcome is None]
        if not live:  # every write's time ran out while waiting: none is sent
            return [outcome for outcome in outcomes if outcome is not None]
        # The call's deadline is its longest write's; each entry's ends `slack_ms` before it, as
        # graveler counts it on its own clock from the call's arrival (no clocks compared).
        latest = max(write.deadline for write in live)
        request = api.StageEntriesRequest(repository=repository, branch=branch, repository_id=repository_id)
        for write in live:
            # Whole milliseconds, rounded up: graveler's time for an entry never exceeds its caller's.
            slack = math.ceil(round((latest - write.deadline) * 1000, 6))
            request.entries.add(key=write.request.key, entry=write.request.entry, slack_ms=slack)
        response = await self._calls.StageEntries(request, timeout=latest - DEADLINE_MARGIN - now)
        if not response.per_entry_deadlines:
            # A graveler from before per-entry deadlines (a rolling upgrade done edges first):
            # it gave every entry the call's deadline, the latest. Its answer still holds, but
            # until gravelers say otherwise each write goes in a call of its own, with its own time.
            self._singles_until = self._clock() + SINGLES_FOR
        answers = self._outcomes(response, len(live))
        return [outcome if outcome is not None else answers.pop(0) for outcome in outcomes]

    @staticmethod
    def _outcomes(response: api.StageEntriesResponse, count: int) -> list[api.StageEntryResponse | BaseException]:
        if len(response.outcomes) != count:
            missing = _error(grpc.StatusCode.INTERNAL, "graveler answered a different number of outcomes")
            return [_copy(missing) for _ in range(count)]
        outcomes: list[api.StageEntryResponse | BaseException] = []
        for outcome in response.outcomes:
            if outcome.result == api.StageEntryOutcome.RESULT_STAGED:
                outcomes.append(api.StageEntryResponse())
            elif outcome.result == api.StageEntryOutcome.RESULT_INVALID:
                outcomes.append(_error(grpc.StatusCode.INVALID_ARGUMENT, outcome.message))
            elif outcome.result == api.StageEntryOutcome.RESULT_EXPIRED:
                outcomes.append(_expired())
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
