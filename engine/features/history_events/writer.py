"""Writes history events into their hour partitions (silt/history_events/layout.py).

Each event is one plain `set`: no compare-and-set, no key shared between writers. The writer id is
random per process and the sequence a per-process counter, so no two writers ever make the same key.
The hour index key is written before the first event of an hour, so a reader that lists the
index never misses an hour that holds events; this process remembers which it wrote.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Iterable

from silt.graveler.v1 import events_pb2 as ev
from silt.history_events import layout
from silt.kv.store import Store

# Index keys this process remembers having written; past this the memory starts over (a few
# extra index writes, harmless: they are idempotent).
MAX_REMEMBERED_HOURS = 10_000
INDEX_VALUE = b"\x01"


class EventWriter:
    def __init__(self, kv: Store, writer_id: int | None = None) -> None:
        self.kv = kv
        self.writer_id = writer_id if writer_id is not None else secrets.randbits(64)
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._indexed: set[tuple[bytes, str, int]] = set()

    def write(self, repository_partition: bytes, events: Iterable[ev.HistoryEvent]) -> int:
        """Store events (their `id` is set here); return how many were stored."""
        stored = 0
        for event in events:
            hour = layout.hour_of(event.timestamp_us)
            self._index(repository_partition, event.branch, hour)
            with self._lock:
                seq = next(self._seq)
            event.id = layout.event_key(event.timestamp_us, self.writer_id, seq)
            partition = layout.events_partition(repository_partition, event.branch, hour)
            self.kv.set(partition, event.id.encode(), event.SerializeToString())
            stored += 1
        return stored

    def _index(self, repository_partition: bytes, branch: str, hour: int) -> None:
        remembered = (repository_partition, branch, hour)
        if remembered in self._indexed:
            return
        self.kv.set(repository_partition, layout.hour_key(branch, hour), INDEX_VALUE)
        with self._lock:
            if len(self._indexed) >= MAX_REMEMBERED_HOURS:
                self._indexed.clear()
            self._indexed.add(remembered)

    def forget(self, repository_partition: bytes, branch: str, hour: int) -> None:
        """Retention dropped this hour: a late event must write its index key again."""
        with self._lock:
            self._indexed.discard((repository_partition, branch, hour))
