"""StageBatcher's logic: which writes share a call, and what each write's caller gets back.

graveler is a double here that records its calls and answers when the test says so; the real
call and the real graveler are exercised by the gateway's and the API's suites.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
import grpc.aio
import pytest

from edge.core import stage_batching
from edge.core.stage_batching import DEADLINE_MARGIN, SINGLES_FOR, StageBatcher
from edge.core.write_outcome import NotApplied, certainly_not_applied
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb


class Graveler:
    """Records each call; a call returns when `release` is set (at once unless `hold`)."""

    def __init__(self, hold: bool = False) -> None:
        self.calls: list[tuple[str, Any, float | None]] = []
        self.release = asyncio.Event()
        if not hold:
            self.release.set()
        self.invalid: set[str] = set()
        self.expired: set[str] = set()
        self.fail_with: grpc.aio.AioRpcError | None = None
        self.many_fails_with: grpc.aio.AioRpcError | None = None
        self.per_entry_deadlines = True
        # A channel that is not READY yet: the next wait for it moves `clock` on by `connect_in`.
        self.clock: list[float] = [0.0]
        self.connect_in = 0.0

    async def ready(self, timeout: float | None) -> None:
        self.clock[0] += self.connect_in
        self.connect_in = 0.0

    async def StageEntry(self, request: api.StageEntryRequest, *, timeout: float | None = None) -> Any:
        self.calls.append(("StageEntry", request, timeout))
        await self.release.wait()
        if self.fail_with is not None:
            raise self.fail_with
        return api.StageEntryResponse()

    async def StageEntries(self, request: api.StageEntriesRequest, *, timeout: float | None = None) -> Any:
        self.calls.append(("StageEntries", request, timeout))
        await self.release.wait()
        if self.many_fails_with is not None:
            raise self.many_fails_with
        if self.fail_with is not None:
            raise self.fail_with
        response = api.StageEntriesResponse(per_entry_deadlines=self.per_entry_deadlines)
        for staged in request.entries:
            if staged.key in self.expired:
                response.outcomes.add(key=staged.key, result=api.StageEntryOutcome.RESULT_EXPIRED)
            elif staged.key in self.invalid:
                response.outcomes.add(key=staged.key, result=api.StageEntryOutcome.RESULT_INVALID, message="bad key")
            else:
                response.outcomes.add(key=staged.key, result=api.StageEntryOutcome.RESULT_STAGED)
        return response


def in_a_loop(scenario: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """The scenario as a test: run on an event loop of its own."""

    def test() -> None:
        asyncio.run(scenario())

    test.__name__, test.__doc__ = scenario.__name__, scenario.__doc__
    return test


def write(key: str, branch: str = "main", **conditions: Any) -> api.StageEntryRequest:
    entry = pb.Entry(physical_address=f"data/{key}", etag=key)
    return api.StageEntryRequest(repository="repo", branch=branch, key=key, entry=entry, **conditions)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def fill_calls(batcher: StageBatcher, *keys: str, timeout: float = 5, branch: str = "main") -> list[Any]:
    """Writes of keys one after another, each let go before the next: a call each, in flight."""
    tasks = []
    for key in keys:
        tasks.append(asyncio.create_task(batcher.StageEntry(write(key, branch), timeout=timeout)))
        await settle()
    return tasks


def batched_keys(graveler: Graveler) -> list[list[str]]:
    out = []
    for method, request, _ in graveler.calls:
        out.append([request.key] if method == "StageEntry" else [e.key for e in request.entries])
    return out


@in_a_loop
async def test_a_lone_write_goes_at_once_as_stage_entry() -> None:
    graveler = Graveler()
    batcher = StageBatcher(graveler)
    await batcher.StageEntry(write("a"), timeout=5)
    assert [(m, r.key) for m, r, _ in graveler.calls] == [("StageEntry", "a")]
    assert 0 < graveler.calls[0][2] <= 5  # type: ignore[operator]


@in_a_loop
async def test_writes_arriving_while_calls_are_in_flight_share_the_next_call() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    first = await fill_calls(batcher, "a", "b")
    # CALLS_IN_FLIGHT calls went at once, one write each; the rest wait for one of them.
    assert batched_keys(graveler) == [["a"], ["b"]]
    waiting = [asyncio.create_task(batcher.StageEntry(write(f"w{i}"), timeout=5)) for i in range(5)]
    await settle()
    assert len(graveler.calls) == 2
    graveler.release.set()
    await asyncio.gather(*first, *waiting)
    assert batched_keys(graveler) == [["a"], ["b"], ["w0", "w1", "w2", "w3", "w4"]]
    assert graveler.calls[2][0] == "StageEntries"
    assert graveler.calls[2][1].repository == "repo" and graveler.calls[2][1].branch == "main"


@in_a_loop
async def test_branches_are_gathered_apart_and_a_call_has_a_bounded_size() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "x0", "x1") + await fill_calls(batcher, "x0", "x1", branch="dev")
    count = stage_batching.MAX_BATCH_ENTRIES + 3
    many = [asyncio.create_task(batcher.StageEntry(write(f"m{i:03d}"), timeout=5)) for i in range(count)]
    dev = [asyncio.create_task(batcher.StageEntry(write(f"d{i}", "dev"), timeout=5)) for i in range(3)]
    graveler.release.set()
    await asyncio.gather(*blockers, *many, *dev)
    calls = [(r.branch, keys) for (_, r, _), keys in zip(graveler.calls, batched_keys(graveler), strict=True)]
    main = [keys for branch, keys in calls if branch == "main"]
    assert all(len(keys) <= stage_batching.MAX_BATCH_ENTRIES for keys in main)
    assert sorted(k for keys in main for k in keys if k.startswith("m")) == [f"m{i:03d}" for i in range(count)]
    assert [k for branch, keys in calls if branch == "dev" for k in keys if k.startswith("d")] == ["d0", "d1", "d2"]


@in_a_loop
async def test_conditional_writes_go_alone_even_when_others_wait() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    tasks = await fill_calls(batcher, "a", "b")
    tasks.append(asyncio.create_task(batcher.StageEntry(write("c"), timeout=5)))
    conditional = asyncio.create_task(batcher.StageEntry(write("if", if_absent=True), timeout=5))
    await settle()
    assert batched_keys(graveler) == [["a"], ["b"], ["if"]]
    graveler.release.set()
    await asyncio.gather(*tasks, conditional)
    assert batched_keys(graveler) == [["a"], ["b"], ["if"], ["c"]]


@in_a_loop
async def test_an_invalid_entry_fails_its_own_write_only() -> None:
    graveler = Graveler(hold=True)
    graveler.invalid.add("bad")
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b")
    good = asyncio.create_task(batcher.StageEntry(write("good"), timeout=5))
    bad = asyncio.create_task(batcher.StageEntry(write("bad"), timeout=5))
    await settle()
    graveler.release.set()
    await asyncio.gather(*blockers, good)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await bad
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "bad key"
    assert ["good", "bad"] in batched_keys(graveler)


@in_a_loop
async def test_a_failed_call_fails_every_write_in_it_with_the_same_status() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    tasks = await fill_calls(batcher, "k0", "k1")
    tasks += [asyncio.create_task(batcher.StageEntry(write(f"k{i}"), timeout=5)) for i in range(2, 6)]
    await settle()
    graveler.fail_with = grpc.aio.AioRpcError(
        grpc.StatusCode.NOT_FOUND, grpc.aio.Metadata(), grpc.aio.Metadata(), "branch not found"
    )
    graveler.release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, grpc.aio.AioRpcError) for r in results)
    assert {(r.code(), r.details()) for r in results} == {(grpc.StatusCode.NOT_FOUND, "branch not found")}  # type: ignore[union-attr]
    assert len({id(r) for r in results}) == len(results)  # each caller its own exception
    assert len(graveler.calls) == 3  # two alone, then the four that waited, together


@in_a_loop
async def test_a_write_whose_caller_gave_up_before_it_was_sent_is_never_sent() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b")
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await batcher.StageEntry(write("impatient"), timeout=0.3)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert isinstance(late.value, NotApplied)  # never sent: its bytes may go
    cancelled = asyncio.create_task(batcher.StageEntry(write("cancelled"), timeout=5))
    kept = asyncio.create_task(batcher.StageEntry(write("kept"), timeout=5))
    await settle()
    cancelled.cancel()
    graveler.release.set()
    await asyncio.gather(*blockers, kept)
    sent = [k for keys in batched_keys(graveler) for k in keys]
    assert "impatient" not in sent and "cancelled" not in sent and "kept" in sent


@in_a_loop
async def test_the_call_lives_as_long_as_its_longest_write_and_each_entry_carries_its_own_budget() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b", timeout=30)
    tasks = [asyncio.create_task(batcher.StageEntry(write(k), timeout=t)) for k, t in (("short", 2), ("long", 20))]
    await settle()
    graveler.release.set()
    await asyncio.gather(*blockers, *tasks)
    method, request, timeout = graveler.calls[-1]
    assert method == "StageEntries"
    assert timeout is not None and 19 < timeout <= 20 - DEADLINE_MARGIN
    # Graveler's time for each entry ends before its caller stops waiting for it: slack_ms
    # before the call's deadline (the longest write's), rounded up.
    slacks = {staged.key: staged.slack_ms for staged in request.entries}
    assert slacks["long"] == 0 and 18000 <= slacks["short"] <= 18050


@in_a_loop
async def test_an_entry_graveler_skipped_as_expired_fails_as_certainly_not_staged() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b")
    late = asyncio.create_task(batcher.StageEntry(write("late"), timeout=5))
    on_time = asyncio.create_task(batcher.StageEntry(write("on-time"), timeout=5))
    await settle()
    graveler.expired.add("late")
    graveler.release.set()
    await asyncio.gather(*blockers, on_time)
    with pytest.raises(grpc.aio.AioRpcError) as expired:
        await late
    assert expired.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert certainly_not_applied(expired.value)


@in_a_loop
async def test_a_write_with_less_time_than_the_margin_is_not_sent() -> None:
    graveler = Graveler()
    batcher = StageBatcher(graveler)
    for request in (write("k"), write("c", if_absent=True)):
        with pytest.raises(NotApplied) as late:
            await batcher.StageEntry(request, timeout=DEADLINE_MARGIN / 2)
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert graveler.calls == []


@in_a_loop
async def test_a_call_that_timed_out_is_answered_no_sooner_than_its_writes_deadline() -> None:
    """Graveler was given less time than the caller waits: the caller hears DEADLINE_EXCEEDED only
    once graveler's time is over, so the write can no longer land after that answer."""
    graveler = Graveler()
    graveler.fail_with = grpc.aio.AioRpcError(
        grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), "Deadline Exceeded"
    )
    batcher = StageBatcher(graveler)
    for request in (write("k"), write("c", if_absent=True)):
        started = asyncio.get_running_loop().time()
        with pytest.raises(grpc.aio.AioRpcError) as timed_out:
            await batcher.StageEntry(request, timeout=0.5)
        assert asyncio.get_running_loop().time() - started >= 0.5 - 0.01
        assert timed_out.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert not certainly_not_applied(timed_out.value)
    # Graveler's time ends the margin before the caller's: what is left of the 0.5 s when the write
    # is sent, less the margin (less still when the loop was slow to send it on a loaded machine).
    timeouts = [timeout for _, _, timeout in graveler.calls]
    assert len(timeouts) == 2, timeouts
    assert all(timeout is not None and 0 < timeout <= 0.5 - DEADLINE_MARGIN + 0.001 for timeout in timeouts), timeouts


@in_a_loop
async def test_a_graveler_without_stage_entries_gets_each_write_as_a_call_of_its_own_for_a_while() -> None:
    graveler = Graveler(hold=True)
    offset = [0.0]
    batcher = StageBatcher(graveler, clock=lambda: time.monotonic() + offset[0])
    graveler.many_fails_with = grpc.aio.AioRpcError(
        grpc.StatusCode.UNIMPLEMENTED, grpc.aio.Metadata(), grpc.aio.Metadata(), "Method not found!"
    )

    async def batch(*keys: str) -> None:
        blockers = await fill_calls(batcher, "x", "y")
        tasks = [asyncio.create_task(batcher.StageEntry(write(k), timeout=5)) for k in keys]
        await settle()
        graveler.release.set()
        await asyncio.gather(*blockers, *tasks)  # every write staged
        graveler.release.clear()

    await batch("a", "b", "c")
    assert [m for m, _, _ in graveler.calls].count("StageEntries") == 1
    assert {r.key for m, r, _ in graveler.calls if m == "StageEntry"} >= {"a", "b", "c"}
    await batch("d", "e")
    assert [m for m, _, _ in graveler.calls].count("StageEntries") == 1  # remembered
    offset[0] = SINGLES_FOR + 1
    graveler.many_fails_with = None
    await batch("f", "g")
    assert [m for m, _, _ in graveler.calls].count("StageEntries") == 2  # tried again, served


@in_a_loop
async def test_writes_left_when_the_edge_stops_fail_instead_of_hanging() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    tasks = await fill_calls(batcher, "k0", "k1", timeout=30)
    tasks += [asyncio.create_task(batcher.StageEntry(write(f"k{i}"), timeout=30)) for i in range(2, 5)]
    await settle()
    drains = [t for t in asyncio.all_tasks() if t not in tasks and t is not asyncio.current_task()]
    for drain in drains:
        drain.cancel()
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
    codes = {r.code() for r in results if isinstance(r, grpc.aio.AioRpcError)}
    assert len(codes) and codes <= {grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE}
    assert all(isinstance(r, grpc.aio.AioRpcError) for r in results)


@in_a_loop
async def test_the_wait_for_a_ready_channel_counts_against_a_lone_writes_time() -> None:
    """Graveler restarting: the channel is READY 0.9 s into a write with 2 s. The call's timeout
    is set after that wait, so graveler's time still ends DEADLINE_MARGIN before the caller's."""
    graveler = Graveler()
    batcher = StageBatcher(graveler, clock=lambda: graveler.clock[0])
    graveler.connect_in = 0.9
    await batcher.StageEntry(write("k"), timeout=2.0)
    ((method, _, timeout),) = graveler.calls
    assert method == "StageEntry"
    assert timeout is not None and timeout <= 2.0 - 0.9 - DEADLINE_MARGIN + 1e-9


@in_a_loop
async def test_budgets_of_a_shared_call_are_set_after_the_wait_for_a_ready_channel() -> None:
    """A write whose time runs out while the channel connects is not sent (certainly not
    staged); the others' call has what is left of the longest write's time."""
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler, clock=lambda: graveler.clock[0])
    blockers = await fill_calls(batcher, "a", "b", timeout=30)
    short = asyncio.create_task(batcher.StageEntry(write("short"), timeout=1.1))
    long = asyncio.create_task(batcher.StageEntry(write("long"), timeout=5.0))
    await settle()
    graveler.connect_in = 0.9  # the connection broke; it is back 0.9 s later
    graveler.release.set()
    await asyncio.gather(*blockers, long)
    with pytest.raises(NotApplied) as unsent:
        await short
    assert unsent.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    method, request, timeout = graveler.calls[-1]
    assert method == "StageEntries" and [(e.key, e.slack_ms) for e in request.entries] == [("long", 0)]
    assert timeout is not None and timeout <= 5.0 - 0.9 - DEADLINE_MARGIN + 1e-9


@in_a_loop
async def test_two_writes_of_a_key_never_share_a_call() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b")
    waiting = [asyncio.create_task(batcher.StageEntry(write(key), timeout=5)) for key in ("k", "k", "m")]
    await settle()
    graveler.release.set()
    await asyncio.gather(*blockers, *waiting)
    calls = batched_keys(graveler)
    assert sorted(key for keys in calls for key in keys) == ["a", "b", "k", "k", "m"]
    assert all(keys.count("k") <= 1 for keys in calls)


@in_a_loop
async def test_after_a_graveler_that_ignores_per_entry_deadlines_writes_go_one_call_each() -> None:
    """A graveler from before per-entry deadlines (it does not say it honoured them): its answer
    holds, and the next writes go as calls of their own, each with its own time."""
    graveler = Graveler(hold=True)
    graveler.per_entry_deadlines = False
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b")
    waiting = [asyncio.create_task(batcher.StageEntry(write(key), timeout=5)) for key in ("c", "d")]
    await settle()
    graveler.release.set()
    await asyncio.gather(*blockers, *waiting)
    assert batched_keys(graveler) == [["a"], ["b"], ["c", "d"]]
    blockers = await fill_calls(batcher, "e", "f")
    later = [asyncio.create_task(batcher.StageEntry(write(key), timeout=5)) for key in ("g", "h")]
    await asyncio.gather(*blockers, *later)
    assert [method for method, _, _ in graveler.calls[3:]] == ["StageEntry"] * 4


@in_a_loop
async def test_gravelers_own_abort_of_a_shared_call_answers_every_write_at_once_as_maybe_staged() -> None:
    """Graveler stopped the call (an entry's time ran out while a commit made it write its
    entries again): each write is answered at once, not at its own deadline, and keeps its bytes."""
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    blockers = await fill_calls(batcher, "a", "b", timeout=30)
    waiting = [asyncio.create_task(batcher.StageEntry(write(key), timeout=30)) for key in ("c", "d")]
    await settle()
    graveler.many_fails_with = grpc.aio.AioRpcError(
        grpc.StatusCode.ABORTED, grpc.aio.Metadata(), grpc.aio.Metadata(), "an entry's deadline passed"
    )
    graveler.release.set()
    await asyncio.gather(*blockers)
    started = time.monotonic()
    results = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 5)
    assert time.monotonic() - started < 5
    for result in results:
        assert isinstance(result, grpc.aio.AioRpcError) and result.code() == grpc.StatusCode.ABORTED
        assert not certainly_not_applied(result)
