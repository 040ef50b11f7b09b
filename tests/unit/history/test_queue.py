"""The emitting side of history events: the bounded queue never blocks and counts what it
drops; flushers send in batches and count batches they could not deliver."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import threading
import time
from collections.abc import Callable

import pytest
from prometheus_client import REGISTRY

from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.emitter import EventEmitter
from silt.history_events.flush import ThreadFlusher, flush_async, run_async_flusher
from silt.history_events.queue import EventQueue


def _event(n: int = 0) -> ev.HistoryEvent:
    return ev.HistoryEvent(timestamp_us=n, repository="r", branch="main", type=ev.WRITE, path=f"k{n}")


def _dropped(reason: str) -> float:
    return REGISTRY.get_sample_value("silt_history_events_dropped_total", {"reason": reason}) or 0.0


def test_a_full_queue_drops_and_counts_without_waiting() -> None:
    queue = EventQueue(capacity=100)
    before = _dropped("queue_full")
    accepted = 0
    durations: list[float] = []
    for n in range(10_000):
        event = _event(n)
        started = time.perf_counter()
        accepted += queue.emit(event)
        durations.append(time.perf_counter() - started)
    assert accepted == 100 and len(queue) == 100
    assert queue.dropped == 9_900
    assert _dropped("queue_full") - before == 9_900
    # A refusal takes microseconds. The median refusal, not the total: a pause of the whole
    # process (a collection over a long run's heap, a loaded machine; once 3 s for all 10,000)
    # cannot fail it, while a wait in every refusal, even of a millisecond, would.
    typical = statistics.median(durations[100:])
    assert typical < 0.001, typical
    assert [e.path for e in queue.take(3)] == ["k0", "k1", "k2"]  # the oldest are kept, in order


def test_emit_never_blocks_while_the_flusher_is_stuck() -> None:
    """A send that hangs (graveler away) holds the flusher, never the emitting threads."""
    queue = EventQueue(capacity=1_000)
    release = threading.Event()
    sent: list[int] = []

    def stuck_send(batch: list[ev.HistoryEvent]) -> None:
        release.wait(10)
        sent.append(len(batch))

    flusher = ThreadFlusher(queue, stuck_send, interval=0.01, batch_size=500).start()

    def emit_many() -> None:
        for n in range(5_000):
            queue.emit(_event(n))

    try:
        threads = [threading.Thread(target=emit_many) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        # Every emitting thread finished while the send was still stuck.
        assert not release.is_set() and not any(thread.is_alive() for thread in threads), "an emit blocked"
        assert queue.dropped > 0  # 20,000 emitted into 1,000 places while nothing drained
    finally:
        release.set()
        flusher.close()
    assert sum(sent) + queue.dropped == 20_000


def test_a_flush_returns_only_after_the_batch_the_thread_is_storing() -> None:
    """A caller's flush (a test's, a shutdown's) must not return while the flusher thread still
    holds events it took before: they would be stored after the caller looks for them."""
    queue = EventQueue()
    stored: list[str] = []
    storing, release = threading.Event(), threading.Event()

    def slow_send(batch: list[ev.HistoryEvent]) -> None:
        if threading.current_thread().name == "history-flusher":
            storing.set()
            release.wait(10)
        stored.extend(e.path for e in batch)

    flusher = ThreadFlusher(queue, slow_send, interval=0.01).start()
    try:
        queue.emit(_event(1))
        assert storing.wait(10)
        queue.emit(_event(2))
        flushed = threading.Thread(target=flusher.flush)
        flushed.start()
        flushed.join(0.3)
        assert flushed.is_alive(), "flush returned while the thread's batch was not stored"
        release.set()
        flushed.join(10)
        assert stored == ["k1", "k2"]
    finally:
        release.set()
        flusher.close()


def test_an_event_protobuf_cannot_carry_is_counted_not_raised() -> None:
    """An S3 key is any string the client sent; one that is not UTF-8 costs the event, never the request."""
    emitter = EventEmitter(ev.S3, graveler=None)
    before = _dropped("invalid")
    emitter.emit(ev.READ, "r", "main", "bad-\udc80-key", "alice")
    emitter.emit(ev.READ, "r", "main", "good-key", "alice")
    assert _dropped("invalid") - before == 1
    assert [e.path for e in emitter.queue.take()] == ["good-key"]


def test_the_async_flusher_sends_in_batches_of_at_most_batch_size() -> None:
    queue = EventQueue()
    batches: list[list[str]] = []

    async def send(batch: list[ev.HistoryEvent]) -> None:
        batches.append([e.path for e in batch])

    for n in range(1_250):
        queue.emit(_event(n))
    asyncio.run(flush_async(queue, send, batch_size=500, timeout=1.0))
    assert [len(b) for b in batches] == [500, 500, 250]
    assert [p for b in batches for p in b] == [f"k{n}" for n in range(1_250)]  # order kept
    assert len(queue) == 0


def _flush_with(
    kind: str, queue: EventQueue, deliver: Callable[[list[ev.HistoryEvent]], None], last: bool = False
) -> None:
    """One flush of queue by the flusher of that kind, delivering through deliver; last: the
    shutdown's (for the thread's, its close)."""
    if kind == "thread":
        flusher = ThreadFlusher(queue, deliver, batch_size=500)
        if last:
            flusher.close()
        else:
            flusher.flush()
        return

    async def send(batch: list[ev.HistoryEvent]) -> None:
        deliver(batch)

    asyncio.run(flush_async(queue, send, batch_size=500, timeout=1.0, last=last))


@pytest.mark.parametrize("kind", ["async", "thread"])
def test_a_flush_under_steady_traffic_ends_and_leaves_the_stragglers_to_the_next(kind: str) -> None:
    """Events that arrive while a flush sends wait for the next flush, unless they make a whole
    batch: a flush that took whatever came in since its last send never ended under steady
    traffic, and sent a call every few requests instead of one an interval."""
    queue = EventQueue()
    sizes: list[int] = []
    arriving = iter(range(1_000, 10_000))

    def steady(batch: list[ev.HistoryEvent]) -> None:
        sizes.append(len(batch))
        for _ in range(3):  # requests served during the call's round trip
            queue.emit(_event(next(arriving)))

    for n in range(7):
        queue.emit(_event(n))
    _flush_with(kind, queue, steady)
    assert sizes == [7]
    assert [e.path for e in queue.take()] == ["k1000", "k1001", "k1002"]

    # A backlog of whole batches still goes out at once, arrivals included while they fill a
    # batch; what is left of a batch waits.
    sizes.clear()
    for n in range(1_200):
        queue.emit(_event(n))

    def flood(batch: list[ev.HistoryEvent]) -> None:
        sizes.append(len(batch))
        if len(sizes) == 1:
            for _ in range(900):
                queue.emit(_event(next(arriving)))

    _flush_with(kind, queue, flood)
    # 1,200 owed and 900 arriving after the first send: four whole batches (the third takes
    # the last 200 owed with 300 that arrived), and the 100 left wait.
    assert sizes == [500, 500, 500, 500]
    assert len(queue) == 100


@pytest.mark.parametrize("kind", ["async", "thread"])
def test_the_last_flush_takes_everything_and_counts_what_it_cannot_deliver(kind: str) -> None:
    """A shutdown's flush sends arrivals too (requests still finishing), and when a batch fails
    counts the rest as lost: no later flush would take them."""
    queue = EventQueue()
    delivered: list[str] = []
    arrivals = iter(range(1_000, 1_006))

    def finishing(batch: list[ev.HistoryEvent]) -> None:
        delivered.extend(e.path for e in batch)
        for n in itertools.islice(arrivals, 3):
            queue.emit(_event(n))

    for n in range(2):
        queue.emit(_event(n))
    _flush_with(kind, queue, finishing, last=True)
    assert delivered == ["k0", "k1", "k1000", "k1001", "k1002", "k1003", "k1004", "k1005"]

    def failing(batch: list[ev.HistoryEvent]) -> None:
        raise OSError("graveler is gone")

    for n in range(1_200):
        queue.emit(_event(n))
    before = _dropped("send_failed")
    _flush_with(kind, queue, failing, last=True)
    assert _dropped("send_failed") - before == 1_200
    assert len(queue) == 0


def test_a_flush_cancelled_mid_send_counts_its_batch_lost() -> None:
    queue = EventQueue()
    before = _dropped("send_failed")

    async def stalls(batch: list[ev.HistoryEvent]) -> None:
        await asyncio.sleep(60)

    async def scenario() -> None:
        task = asyncio.create_task(flush_async(queue, stalls, batch_size=500, timeout=30.0))
        await asyncio.sleep(0.05)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    for n in range(700):
        queue.emit(_event(n))
    asyncio.run(scenario())
    assert _dropped("send_failed") - before == 500  # the batch in flight; 200 still queued
    assert len(queue) == 200


def test_a_failed_or_slow_delivery_drops_the_batch_and_counts_it() -> None:
    queue = EventQueue()
    before = _dropped("send_failed")

    async def hangs(batch: list[ev.HistoryEvent]) -> None:
        await asyncio.sleep(60)

    for n in range(30):
        queue.emit(_event(n))
    started = time.monotonic()
    asyncio.run(flush_async(queue, hangs, batch_size=10, timeout=0.1))
    assert time.monotonic() - started < 5
    # The first batch timed out and was dropped; the rest waits for the next flush.
    assert _dropped("send_failed") - before == 10
    assert len(queue) == 20


def test_the_running_flusher_delivers_within_an_interval_and_flushes_on_stop() -> None:
    queue = EventQueue()
    delivered: list[str] = []

    async def send(batch: list[ev.HistoryEvent]) -> None:
        delivered.extend(e.path for e in batch)

    async def scenario() -> None:
        task = asyncio.create_task(run_async_flusher(queue, send, interval=0.05))
        queue.emit(_event(1))
        for _ in range(100):  # the flusher's own interval, 50 ms, bounds this wait
            if delivered:
                break
            await asyncio.sleep(0.01)
        assert delivered == ["k1"]
        queue.emit(_event(2))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert delivered == ["k1", "k2"]  # the last one went out on cancellation
