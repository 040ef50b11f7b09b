"""A Store that reads only: a process that serves another service's data without owning it
(the edge reading graveler's refs and staging) holds its KV through this, so that a bug or a
takeover in that process cannot write what it was only meant to read. On Cassandra the
process's login is granted SELECT alone on that keyspace as well (silt/kv/cassandra_roles.py)."""

from __future__ import annotations

from typing import NoReturn

from silt.errors import PermissionDenied
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import CheckedBatch, Predicate


class ReadOnlyStore(ForwardingStore):
    """Reads pass through to the store underneath; every write is refused, whatever it asks."""

    def set(self, partition: bytes, key: bytes, value: bytes) -> NoReturn:
        self._refuse()

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> NoReturn:
        self._refuse()

    def delete(self, partition: bytes, key: bytes) -> NoReturn:
        self._refuse()

    def apply(self, *batch: object, **options: object) -> NoReturn:
        # Refused before its arguments are looked at, as every other write is.
        self._refuse()

    def apply_checked(self, batch: CheckedBatch) -> NoReturn:
        self._refuse()

    @staticmethod
    def _refuse() -> NoReturn:
        raise PermissionDenied("this KV store is open for reading only")
