"""Writes history events into their hour partitions (silt/history_events/layout.py).

Events are plain writes: no compare-and-set, no key shared between writers. The writer id is
random per process and the sequence a per-process counter, so no two writers ever make the same key.
A call's events of one partition (repository, branch and hour) go as few unconditional applies,
each bounded in bytes (silt.kv.store.writes_by_weight): on SQLite one transaction instead of one a
row, on Cassandra one single-partition batch. The edges send an event for every object read,
write and delete, so a busy gateway's batches are large. A call that fails partway has stored the
applies before the failure and none after (the edge drops such a batch and counts it; the events
are a lossy stream, never retried).
The hour index key is written before the first event of an hour, so a reader that lists the
index never misses an hour that holds events; this process remembers which it wrote.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import defaultdict
from collections.abc import Iterable

from silt.graveler.v1 import events_pb2 as ev
from silt.history_events import layout
from silt.kv.store import Store, writes_by_weight

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
        events = list(events)
        with self._lock:  # the call's sequence numbers in one turn of the lock
            seqs = [next(self._seq) for _ in events]
        rows: defaultdict[bytes, list[tuple[bytes, bytes]]] = defaultdict(list)
        partitions: dict[tuple[str, int], bytes] = {}
        for event, seq in zip(events, seqs, strict=True):
            hour = layout.hour_of(event.timestamp_us)
            partition = partitions.get((event.branch, hour))
            if partition is None:
                self._index(repository_partition, event.branch, hour)
                partition = partitions[event.branch, hour] = layout.events_partition(
                    repository_partition, event.branch, hour
                )
            event.id = layout.event_key(event.timestamp_us, self.writer_id, seq)
            rows[partition].append((event.id.encode(), event.SerializeToString()))
        for partition, puts in rows.items():
            for some_puts, _ in writes_by_weight(puts):
                self.kv.apply(partition, some_puts)
        return sum(len(puts) for puts in rows.values())

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
