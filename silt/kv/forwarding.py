"""ForwardingStore: the base of the KV wrappers that change a few of a Store's calls and pass
the rest on (the read-only store, the instrumented one, and the tests' stores that inject faults
or record calls): each overrides only what it changes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from silt.kv.store import SCAN_CHUNK, CheckedBatch, Entry, Pair, Predicate, Store, ValueWithPredicate


class ForwardingStore(Store):
    """inner, every call passed on to it unchanged, close included.

    An apply reaches inner as the batch Store.apply checked (apply_checked), so a chain of
    wrappers over a driver checks it once; an inner store with an apply of its own gets the
    batch through that apply."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self._inner_applies_itself = type(inner).apply is not Store.apply

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

    def apply_checked(self, batch: CheckedBatch) -> None:
        self.apply_inner(batch)

    def apply_inner(self, batch: CheckedBatch) -> None:
        """Pass a checked batch on to inner."""
        if self._inner_applies_itself:
            # A store that writes its applies in apply itself (a test's store that injects
            # faults there): going round it to apply_checked would skip what it does.
            self.inner.apply(*batch.as_arguments())
        else:
            self.inner.apply_checked(batch)

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        return self.inner.scan(partition, start)

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        return self.inner.scan_chunks(partition, start, size)

    def close(self) -> None:
        self.inner.close()
