"""A KV Store that forwards every call to another, for tests' wrappers: one that injects a fault
or records calls subclasses it and overrides only the methods it changes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from silt.kv.store import SCAN_CHUNK, Condition, Entry, Pair, Predicate, Store, ValueWithPredicate


class ForwardingStore(Store):
    """inner, every method of the Store interface passed on to it unchanged (close included:
    a wrapper whose store is someone else's to close overrides close)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        return self.inner.get(partition, key)

    def get_many(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        return self.inner.get_many(partition, keys)

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self.inner.set(partition, key, value)

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        self.inner.set_if(partition, key, value, predicate)

    def delete(self, partition: bytes, key: bytes) -> None:
        self.inner.delete(partition, key)

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | None = None,
        timestamp: int | None = None,
    ) -> None:
        self.inner.apply(partition, puts, deletes, condition, timestamp)

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        return self.inner.scan(partition, start)

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        return self.inner.scan_chunks(partition, start, size)

    def close(self) -> None:
        self.inner.close()
