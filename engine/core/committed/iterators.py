"""Lazy iteration over a metarange's records: one range in memory at a time."""

from __future__ import annotations

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
