"""Writing metaranges and reading them back: iterate, get, ranges, errors."""

from __future__ import annotations

import itertools

import pytest

from engine.core.committed import CommittedCache, CommittedManager, Record
from silt.block.local import LocalAdapter
from silt.errors import InvalidArgument, NotFound
from tests.unit.committed.conftest import NAMESPACE, SMALL_POLICY
from tests.unit.committed.support import key_of, make_record, records

EVEN = records(range(0, 4000, 2))  # odd keys are absent: room to look up gaps


def test_round_trip_spans_many_ranges(manager: CommittedManager) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(EVEN))
    ranges = manager.ranges(NAMESPACE, metarange_id)
    assert len(ranges) > 10
    assert list(manager.iterate(NAMESPACE, metarange_id)) == EVEN
    assert sum(info.count for info in ranges) == len(EVEN)
    assert all(a.max_key < b.min_key for a, b in itertools.pairwise(ranges))


def test_same_records_give_the_same_id_anywhere(manager: CommittedManager, local_adapter: LocalAdapter) -> None:
    first = manager.write_metarange(NAMESPACE, iter(EVEN))
    other = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    assert other.write_metarange("local://elsewhere", iter(EVEN)) == first
    assert manager.write_metarange(NAMESPACE, iter(EVEN[:-1])) != first


def test_empty_metarange(manager: CommittedManager, local_adapter: LocalAdapter) -> None:
    empty = manager.write_metarange(NAMESPACE, iter([]))
    assert len(empty) == 64
    assert manager.ranges(NAMESPACE, empty) == []
    assert list(manager.iterate(NAMESPACE, empty)) == []
    assert list(manager.iterate(NAMESPACE, empty, b"x")) == []
    assert manager.get(NAMESPACE, empty, b"anything") is None
    # A fresh manager reads it back from the store, not from the writer's cache.
    fresh = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    assert fresh.ranges(NAMESPACE, empty) == []
    assert manager.apply(NAMESPACE, empty, []).metarange_id == empty
    assert manager.apply(NAMESPACE, None, []).metarange_id == empty


@pytest.mark.parametrize(
    ("start", "first_index"),
    [
        (b"", 0),
        (b"a", 0),  # before every key
        (key_of(0), 0),
        (key_of(1), 1),  # absent: the next key
        (key_of(1000), 500),
        (key_of(3998), 1999),
        (key_of(3999), 2000),  # after the last key
        (b"zzz", 2000),
    ],
)
def test_iterate_from_start(manager: CommittedManager, start: bytes, first_index: int) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(EVEN))
    assert list(manager.iterate(NAMESPACE, metarange_id, start)) == EVEN[first_index:]


def test_iterate_from_every_range_edge(manager: CommittedManager) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(EVEN))
    position = {record.key: index for index, record in enumerate(EVEN)}
    for info in manager.ranges(NAMESPACE, metarange_id)[:5]:
        first, last = position[info.min_key], position[info.max_key]
        assert list(manager.iterate(NAMESPACE, metarange_id, info.min_key)) == EVEN[first:]
        assert list(manager.iterate(NAMESPACE, metarange_id, info.max_key)) == EVEN[last:]
        assert list(manager.iterate(NAMESPACE, metarange_id, info.max_key + b"\x00")) == EVEN[last + 1 :]


def test_iterate_is_lazy(local_adapter: LocalAdapter) -> None:
    writer = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    metarange_id = writer.write_metarange(NAMESPACE, iter(EVEN))
    reader = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    iterator = reader.iterate(NAMESPACE, metarange_id, key_of(2000))
    assert reader.stats().range_reads == 0
    assert next(iterator) == make_record(key_of(2000))
    assert reader.stats().range_reads == 1


def test_get(manager: CommittedManager) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(EVEN))
    ranges = manager.ranges(NAMESPACE, metarange_id)
    assert manager.get(NAMESPACE, metarange_id, key_of(1234)) == make_record(key_of(1234))
    assert manager.get(NAMESPACE, metarange_id, key_of(1235)) is None
    assert manager.get(NAMESPACE, metarange_id, b"a") is None
    assert manager.get(NAMESPACE, metarange_id, b"zzz") is None
    for info in ranges[:3]:
        assert manager.get(NAMESPACE, metarange_id, info.min_key) == make_record(info.min_key)
        assert manager.get(NAMESPACE, metarange_id, info.max_key) == make_record(info.max_key)
        # Between two ranges: answered from the metarange alone.
        before = manager.stats().range_loads
        assert manager.get(NAMESPACE, metarange_id, info.max_key + b"\x00") is None
        assert manager.stats().range_loads == before


def test_get_reads_only_the_one_range(local_adapter: LocalAdapter) -> None:
    metarange_id = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        NAMESPACE, iter(EVEN)
    )
    reader = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    assert reader.get(NAMESPACE, metarange_id, key_of(3000)) == make_record(key_of(3000))
    stats = reader.stats()
    assert (stats.metarange_reads, stats.range_reads) == (1, 1)


def test_range_records(manager: CommittedManager) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(EVEN))
    info = manager.ranges(NAMESPACE, metarange_id)[1]
    in_range = [record for record in EVEN if info.min_key <= record.key <= info.max_key]
    assert list(manager.range_records(NAMESPACE, info.id)) == in_range
    assert list(manager.range_records(NAMESPACE, info.id, in_range[2].key)) == in_range[2:]


@pytest.mark.parametrize(
    "bad",
    [
        [make_record(b"b"), make_record(b"a")],
        [make_record(b"a"), make_record(b"a")],
    ],
)
def test_unsorted_records_are_refused(manager: CommittedManager, bad: list[Record]) -> None:
    with pytest.raises(InvalidArgument):
        manager.write_metarange(NAMESPACE, iter(bad))


def test_bad_and_missing_ids(manager: CommittedManager) -> None:
    for bad in ("../../etc/passwd", "0" * 64 + "\n", "A" * 64, "0" * 63):
        with pytest.raises(InvalidArgument):
            manager.ranges(NAMESPACE, bad)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        manager.ranges(NAMESPACE, "0" * 64)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        manager.iterate(NAMESPACE, "0" * 64)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        manager.apply(NAMESPACE, "0" * 64, [])  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [1, 7, 500, 100_000])
@pytest.mark.parametrize("start", [b"", key_of(0), key_of(1), key_of(1999), key_of(3998), b"zzz"])
def test_slices_are_the_records_in_lists(manager: CommittedManager, start: bytes, size: int) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(EVEN))
    slices = list(manager.iterate_slices(NAMESPACE, metarange_id, start, size))
    assert all(keys and len(keys) <= size for keys, _, _ in slices)
    assert [
        Record(key, identity, value)
        for keys, identities, values in slices
        for key, identity, value in zip(keys, identities, values, strict=True)
    ] == list(manager.iterate(NAMESPACE, metarange_id, start))
