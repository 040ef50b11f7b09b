"""In-process KV driver for unit tests: sorted keys per partition behind one lock."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator

from silt.errors import NotFound, PredicateFailed
from silt.kv.store import (
    CheckedBatch,
    Entry,
    Predicate,
    Store,
    ValueWithPredicate,
    check_key,
    check_value,
    register_driver,
)

_PAGE_SIZE = 1000


# How long a tombstone outlives its timestamp's wall time, and how often old ones are purged
# (as the local driver: silt/kv/local.py).
_TOMBSTONE_GRACE_US = 3600 * 1_000_000
_PURGE_EVERY_S = 60.0


class _Partition:
    __slots__ = ("keys", "stamps", "tombstones", "values")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: dict[bytes, bytes] = {}
        # Write timestamps of rows last written by a timestamped apply (see Store.apply).
        self.stamps: dict[bytes, int] = {}
        # Keys a timestamped delete removed, with its timestamp, as Cassandra keeps tombstones:
        # a write stamped before the delete and arriving after it is lost.
        self.tombstones: dict[bytes, int] = {}


class MemStore(Store):
    def __init__(self, page_size: int = _PAGE_SIZE) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[bytes, _Partition] = {}
        self._page_size = page_size
        self._purged_at = time.monotonic()

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        check_key(partition, key)
        with self._lock:
            part = self._partitions.get(bytes(partition))
            value = part.values.get(bytes(key)) if part else None
        if value is None:
            raise NotFound(f"key {key!r} not found")
        return ValueWithPredicate(value, Predicate(value))

    def _put(self, partition: bytes, key: bytes, value: bytes, timestamp: int | None = None) -> None:
        part = self._partitions.setdefault(partition, _Partition())
        if timestamp is not None:
            # Last write wins by timestamp, as in Cassandra: an older write arriving late is lost;
            # at equal timestamps a tombstone beats a value and the larger value the smaller.
            if part.tombstones.get(key, -1) >= timestamp:
                return
            if key in part.values:
                stamp = part.stamps.get(key, 0)
                if stamp > timestamp or (stamp == timestamp and part.values[key] >= value):
                    return
            part.stamps[key] = timestamp
        else:
            part.stamps.pop(key, None)
        part.tombstones.pop(key, None)
        if key not in part.values:
            bisect.insort(part.keys, key)
        part.values[key] = value

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        check_key(partition, key)
        check_value(value)
        with self._lock:
            self._put(bytes(partition), bytes(key), bytes(value))

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        check_key(partition, key)
        check_value(value)
        with self._lock:
            part = self._partitions.get(bytes(partition))
            current = part.values.get(bytes(key)) if part else None
            if predicate is None:
                if current is not None:
                    raise PredicateFailed(f"key {key!r} exists already")
            elif current is None or current != predicate:
                raise PredicateFailed(f"key {key!r} changed since it was read")
            self._put(bytes(partition), bytes(key), bytes(value))

    def _remove(self, partition: bytes, key: bytes, timestamp: int | None = None) -> None:
        part = self._partitions.setdefault(partition, _Partition()) if timestamp else self._partitions.get(partition)
        if part is None:
            return
        if timestamp is not None:
            if key in part.values and part.stamps.get(key, 0) > timestamp:
                return
            part.tombstones[key] = max(timestamp, part.tombstones.get(key, 0))
        else:
            part.tombstones.pop(key, None)
        if key not in part.values:
            return
        del part.values[key]
        part.stamps.pop(key, None)
        del part.keys[bisect.bisect_left(part.keys, key)]

    def delete(self, partition: bytes, key: bytes) -> None:
        check_key(partition, key)
        with self._lock:
            self._remove(bytes(partition), bytes(key))

    def apply_checked(self, batch: CheckedBatch) -> None:
        partition, puts, deletes, conditions = batch.partition, batch.puts, batch.deletes, batch.conditions
        # Under the one lock: a scan copies its page under it too, so it sees all or none.
        with self._lock:
            part = self._partitions.get(partition)
            for key, predicate in conditions:
                current = part.values.get(key) if part else None
                if predicate is None and current is not None:
                    raise PredicateFailed(f"key {key!r} exists already")
                if predicate is not None and current != predicate:
                    raise PredicateFailed(f"key {key!r} changed since it was read")
            for index, (key, value) in enumerate(puts):
                self._put(partition, key, value, batch.stamp_of(index))
            for key in deletes:
                self._remove(partition, key, batch.deletes_at())
            if deletes and batch.deletes_at() is not None:
                self._purge_old_tombstones()

    def _purge_old_tombstones(self) -> None:
        """Forget the tombstones older than the grace, at most once per _PURGE_EVERY_S."""
        now = time.monotonic()
        if now - self._purged_at < _PURGE_EVERY_S:
            return
        self._purged_at = now
        oldest = time.time_ns() // 1000 - _TOMBSTONE_GRACE_US
        for part in self._partitions.values():
            for key in [key for key, stamp in part.tombstones.items() if stamp < oldest]:
                del part.tombstones[key]

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        check_key(partition, b"-")
        cursor = bytes(start)
        while True:
            # Copy one page under the lock so writers are never blocked by a slow reader.
            with self._lock:
                part = self._partitions.get(bytes(partition))
                if part is None:
                    return
                i = bisect.bisect_left(part.keys, cursor)
                page = [Entry(k, part.values[k]) for k in part.keys[i : i + self._page_size]]
            yield from page
            if len(page) < self._page_size:
                return
            cursor = page[-1].key + b"\x00"  # the smallest key after the last one seen

    def close(self) -> None:
        with self._lock:
            self._partitions.clear()


register_driver("mem", lambda config: MemStore())

__all__ = ["MemStore"]
