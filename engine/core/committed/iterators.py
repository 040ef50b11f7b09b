"""Lazy iteration over a metarange's records: one range in memory at a time."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from engine.core.committed.metarange import MetaRange
from engine.core.committed.model import Record
from engine.core.committed.store import ObjectStore


def iterate_records(store: ObjectStore, namespace: str, metarange: MetaRange, start: bytes = b"") -> Iterator[Record]:
    """Records with key >= ``start``, in key order, reading ranges only as the caller advances."""
    first = metarange.first_index_from(start)
    for index in range(first, len(metarange.ranges)):
        data = store.read_range(namespace, metarange.ranges[index].id)
        yield from data.records(start if index == first else b"")


def iterate_slices(
    store: ObjectStore, namespace: str, metarange: MetaRange, start: bytes, size: int
) -> Iterator[tuple[list[bytes], list[bytes], list[bytes]]]:
    """iterate_records' records as (keys, identities, values) of at most size consecutive
    ones, none empty, sliced from each range's lists: no object made per record."""
    first = metarange.first_index_from(start)
    for index in range(first, len(metarange.ranges)):
        data = store.read_range(namespace, metarange.ranges[index].id)
        keys, identities, values = data.keys, data.identities, data.values
        position = bisect_left(keys, start) if index == first and start else 0
        for at in range(position, len(keys), size):
            yield keys[at : at + size], identities[at : at + size], values[at : at + size]
