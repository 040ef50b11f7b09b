"""The bounded in-memory queue every emitting process puts history events into.

`emit` never waits: it takes a lock held only for an append, and when the queue is full the
event is dropped and counted (`silt_history_events_dropped_total{reason="queue_full"}`). A
flusher (flush.py) takes events out in batches and sends them on; a request never waits for that.
"""

from __future__ import annotations

import threading
from collections import deque

from silt.graveler.v1 import events_pb2 as ev
from silt.telemetry import metrics

# About two seconds of a busy gateway's events at 5,000 requests/s: a graveler pause that long
# loses nothing, a longer one costs memory no more than ~10,000 small messages.
DEFAULT_CAPACITY = 10_000
# What one RecordEvents call carries at most (graveler refuses more).
MAX_BATCH = 1_000


class EventQueue:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("an event queue holds at least one event")
        self.capacity = capacity
        self._events: deque[ev.HistoryEvent] = deque()
        self._lock = threading.Lock()
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._events)

    def emit(self, event: ev.HistoryEvent) -> bool:
        """Queue an event; False (and counted) if the queue is full. Never blocks."""
        with self._lock:
            if len(self._events) >= self.capacity:
                self.dropped += 1
                full = True
            else:
                self._events.append(event)
                full = False
        if full:
            metrics.HISTORY_EVENTS_DROPPED.labels("queue_full").inc()
        return not full

    def take(self, limit: int = MAX_BATCH) -> list[ev.HistoryEvent]:
        """Up to limit of the oldest queued events, removed from the queue."""
        with self._lock:
            count = min(limit, len(self._events))
            return [self._events.popleft() for _ in range(count)]

    def lost_one(self, reason: str) -> None:
        """Count an event that could not even be built (reason: a fixed word, a metric label)."""
        with self._lock:
            self.dropped += 1
        metrics.HISTORY_EVENTS_DROPPED.labels(reason).inc()

    def lost(self, events: list[ev.HistoryEvent]) -> None:
        """Count a batch the flusher could not deliver."""
        with self._lock:
            self.dropped += len(events)
        metrics.HISTORY_EVENTS_DROPPED.labels("send_failed").inc(len(events))
