"""Bounds of WatchEvents streams in one graveler process: how many run at once, in all and per
caller, and how long one may wait for its client to take the next event.

A streaming handler holds one of graveler's worker threads for as long as it runs, and the
thread blocks in send while the client does not read (HTTP/2 flow control). Without these bounds
a few streams that are opened and never read would take every worker, and with them every read
and write of every repository."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from silt.errors import ResourceExhausted

# Well under graveler's 32 workers (silt/rpc/limits.py): the rest always serve reads and writes.
MAX_STREAMS = 8
# One caller (a user, a service) holds at most this many of them.
MAX_STREAMS_PER_CALLER = 2
# A stream whose client takes no event for this long is cancelled, releasing its thread: an
# honest client reads an event (at most 64 KiB) within milliseconds.
WRITE_TIMEOUT_SECONDS = 10.0

T = TypeVar("T")


class StreamSlots:
    """At most `total` streams at once, at most `per_caller` of them by one caller."""

    def __init__(self, total: int = MAX_STREAMS, per_caller: int = MAX_STREAMS_PER_CALLER) -> None:
        self._total = total
        self._per_caller = per_caller
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    @contextmanager
    def hold(self, caller: str) -> Iterator[None]:
        """A slot for the stream's lifetime; ResourceExhausted when none is free."""
        with self._lock:
            if sum(self._held.values()) >= self._total:
                raise ResourceExhausted(f"more than {self._total} event streams at once; retry later")
            if self._held.get(caller, 0) >= self._per_caller:
                raise ResourceExhausted(f"more than {self._per_caller} event streams of {caller!r} at once")
            self._held[caller] = self._held.get(caller, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._held[caller] - 1
                if left:
                    self._held[caller] = left
                else:
                    del self._held[caller]


class WriteWatchdog:
    """Calls `cancel` when an armed send takes longer than `seconds`: one thread per stream,
    waiting on a condition rather than started per event."""

    def __init__(self, cancel: Callable[[], object], seconds: float = WRITE_TIMEOUT_SECONDS) -> None:
        self._cancel = cancel
        self._seconds = seconds
        self._condition = threading.Condition()
        self._armed_until: float | None = None
        self._closed = False
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="event-stream-watchdog", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        with self._condition:
            self._armed_until = time.monotonic() + self._seconds
            self._condition.notify()

    def disarm(self) -> None:
        with self._condition:
            self._armed_until = None

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join(timeout=self._seconds)

    def _run(self) -> None:
        with self._condition:
            while not self._closed:
                if self._armed_until is None:
                    self._condition.wait()
                    continue
                left = self._armed_until - time.monotonic()
                if left > 0:
                    self._condition.wait(left)
                    continue
                self.fired = True
                self._armed_until = None
                break
        if self.fired:
            self._cancel()


def sent_within_deadline(items: Iterator[T], cancel: Callable[[], object], seconds: float) -> Iterator[T]:
    """items, cancelling the call when the client takes longer than `seconds` to take one: the
    time between a yield and the next request for an item is the send of the item yielded."""
    watchdog = WriteWatchdog(cancel, seconds)
    try:
        for item in items:
            watchdog.arm()
            yield item
            watchdog.disarm()
    finally:
        watchdog.close()
