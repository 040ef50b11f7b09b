"""A Store that reads only: a process that serves another service's data without owning it
(the edge reading graveler's refs and staging) holds its KV through this, so that a bug or a
takeover in that process cannot write what it was only meant to read. On Cassandra the
process's login is granted SELECT alone on that keyspace as well (silt/kv/cassandra_roles.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NoReturn

from silt.errors import PermissionDenied
from silt.kv.store import SCAN_CHUNK, Condition, Entry, Pair, Predicate, Store, ValueWithPredicate


class ReadOnlyStore(Store):
    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        return self._store.get(partition, key)

    def get_many(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        return self._store.get_many(partition, keys)

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        return self._store.scan(partition, start)

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        return self._store.scan_chunks(partition, start, size)

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self._refuse()

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        self._refuse()

    def delete(self, partition: bytes, key: bytes) -> None:
        self._refuse()

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | None = None,
        timestamp: int | None = None,
    ) -> None:
        self._refuse()

    def close(self) -> None:
        self._store.close()

    @staticmethod
    def _refuse() -> NoReturn:
        raise PermissionDenied("this KV store is open for reading only")
