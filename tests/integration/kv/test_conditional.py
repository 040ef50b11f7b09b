"""silt.kv.conditional: a blind set or delete made as compare-and-set, on every driver."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from silt.errors import Aborted, NotFound, PredicateFailed
from silt.kv import Store
from silt.kv.conditional import delete_current, replace
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import AllOf, Condition, Predicate, Timestamp


def test_replace_writes_whatever_is_there(store: Store, partition: bytes) -> None:
    replace(store, partition, b"k", b"v1")
    replace(store, partition, b"k", b"v2")
    assert store.get(partition, b"k").value == b"v2"


def test_delete_current_deletes_whatever_is_there(store: Store, partition: bytes) -> None:
    assert delete_current(store, partition, b"k") is False
    store.set_if(partition, b"k", b"v1", None)
    assert delete_current(store, partition, b"k") is True
    with pytest.raises(NotFound):
        store.get(partition, b"k")


class _AlwaysRaced(ForwardingStore):
    """A store on which another writer always gets in between a read and a write."""

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        raise AssertionError("a plain write")

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        raise PredicateFailed("raced")

    def delete(self, partition: bytes, key: bytes) -> None:
        raise AssertionError("a plain delete")

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        assert condition is not None, "an unconditional apply"
        raise PredicateFailed("raced")


def test_a_key_that_never_stays_put_gives_up_with_aborted(store: Store, partition: bytes) -> None:
    store.set_if(partition, b"k", b"v1", None)
    raced = _AlwaysRaced(store)
    with pytest.raises(Aborted):
        replace(raced, partition, b"k", b"v2", attempts=3)
    with pytest.raises(Aborted):
        delete_current(raced, partition, b"k", attempts=3)
    assert store.get(partition, b"k").value == b"v1"
