"""Flushers: move queued history events to where they are stored, in batches, off the request path.

Every `interval` seconds a flusher sends what the queue held when the flush began, in batches of
at most `batch_size`, and then only whole batches: events queued while a flush is sending wait for
the next one. A flush that took whatever had arrived since its last send never ended under steady
traffic: each send's round trip let a few more events in, so a gateway serving 1,000 GETs a
second made a RecordEvents call every few requests instead of five a second, and each call costs
both sides more than the events in it. A batch that cannot be delivered within `timeout` is
dropped and counted: history is lossy by design, and retrying would only let a backlog grow
while graveler is away.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator

from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.queue import MAX_BATCH, EventQueue
from silt.telemetry import metrics

log = logging.getLogger(__name__)

FLUSH_INTERVAL_SECONDS = 0.2
SEND_TIMEOUT_SECONDS = 5.0

AsyncSend = Callable[[list[ev.HistoryEvent]], Awaitable[None]]
Send = Callable[[list[ev.HistoryEvent]], None]


async def run_async_flusher(
    queue: EventQueue,
    send: AsyncSend,
    interval: float = FLUSH_INTERVAL_SECONDS,
    batch_size: int = MAX_BATCH,
    timeout: float = SEND_TIMEOUT_SECONDS,
) -> None:
    """Flush queue through send until cancelled; on cancellation, one last flush of everything
    queued, each batch bounded by timeout."""
    try:
        while True:
            await asyncio.sleep(interval)
            await flush_async(queue, send, batch_size, timeout)
    except asyncio.CancelledError:
        await asyncio.shield(flush_async(queue, send, batch_size, timeout, last=True))
        raise


def batches(queue: EventQueue, batch_size: int, last: bool = False) -> Iterator[list[ev.HistoryEvent]]:
    """The batches of one flush: every event queued when it began, then whole batches only;
    the last flush (a shutdown's) takes everything, arrivals included."""
    owed = len(queue)
    while last or owed > 0 or len(queue) >= batch_size:
        batch = queue.take(batch_size)
        if not batch:
            return
        owed -= len(batch)
        yield batch


def _give_up(queue: EventQueue, batch: list[ev.HistoryEvent], last: bool) -> None:
    """A batch that failed is lost, and counted; after a last flush's failure, so is the rest,
    which no later flush will take."""
    queue.lost(batch)
    if last:
        while rest := queue.take():
            queue.lost(rest)


async def flush_async(queue: EventQueue, send: AsyncSend, batch_size: int, timeout: float, last: bool = False) -> None:
    for batch in batches(queue, batch_size, last):
        try:
            await asyncio.wait_for(send(batch), timeout)
        except asyncio.CancelledError:
            queue.lost(batch)  # whether it arrived is unknown: counted with the lost
            raise
        except Exception as exc:  # any failure loses this batch only, and is counted
            log.warning("history events: %d dropped, delivery failed: %s", len(batch), exc)
            _give_up(queue, batch, last)
            return
        metrics.HISTORY_EVENTS_SENT.inc(len(batch))


class ThreadFlusher:
    """A flusher on a thread of its own, for a process without an event loop (graveler)."""

    def __init__(
        self, queue: EventQueue, send: Send, interval: float = FLUSH_INTERVAL_SECONDS, batch_size: int = MAX_BATCH
    ) -> None:
        self.queue = queue
        self._send = send
        self._interval = interval
        self._batch_size = batch_size
        self._stop = threading.Event()
        # One flush at a time: a flush returns only once every event queued before it is stored,
        # including a batch the thread took just before and is still storing.
        self._flushing = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="history-flusher", daemon=True)

    def start(self) -> ThreadFlusher:
        self._thread.start()
        return self

    def flush(self, last: bool = False) -> None:
        """Store what is queued; on return, every event queued before the call is stored,
        whichever thread took it, or, after a batch that failed (counted lost), still queued for
        the next flush. The last flush (close's) takes arrivals too and counts what it cannot
        store as lost."""
        with self._flushing:
            for batch in batches(self.queue, self._batch_size, last):
                try:
                    self._send(batch)
                except Exception as exc:  # any failure loses this batch only, and is counted
                    log.warning("history events: %d dropped, storing failed: %s", len(batch), exc)
                    _give_up(self.queue, batch, last)
                    return
                metrics.HISTORY_EVENTS_SENT.inc(len(batch))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def close(self, timeout: float = SEND_TIMEOUT_SECONDS) -> None:
        """Stop after one last flush, waiting at most timeout for it."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.flush(last=True)
