"""apply: results equal the canonical metarange, and only touched ranges are rewritten."""

from __future__ import annotations

import pytest

from engine.core.committed import (
    ApplyResult,
    Change,
    ChangeBatch,
    ChunkingPolicy,
    CommittedCache,
    CommittedManager,
    MetaRangeId,
    Record,
)
from silt.block.local import LocalAdapter
from silt.errors import InvalidArgument
from tests.unit.committed.conftest import NAMESPACE, SMALL_POLICY
from tests.unit.committed.support import key_of, make_record, merged, records

BASE = records(range(0, 6000, 2))


def apply_and_check(
    manager: CommittedManager, base_records: list[Record], changes: list[Change]
) -> tuple[MetaRangeId, ApplyResult]:
    """Apply to a freshly written base; check the result against the canonical metarange."""
    base = manager.write_metarange(NAMESPACE, iter(base_records))
    result = manager.apply(NAMESPACE, base, iter(changes))
    expected = merged(base_records, changes)
    assert list(manager.iterate(NAMESPACE, result.metarange_id)) == expected
    assert result.metarange_id == manager.write_metarange(NAMESPACE, iter(expected))
    return base, result


def test_single_change_writes_one_range_and_one_metarange(local_adapter: LocalAdapter) -> None:
    writer = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    base = writer.write_metarange(NAMESPACE, iter(BASE))
    base_ranges = writer.ranges(NAMESPACE, base)
    # A fresh manager, so every range it needs must come from the store.
    manager = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    changed = make_record(key_of(3000), version=1)
    result = manager.apply(NAMESPACE, base, [Change.upsert(changed)])

    stats = manager.stats()
    assert (stats.ranges_uploaded, stats.metaranges_uploaded) == (1, 1)
    assert (stats.metarange_reads, stats.range_reads) == (1, 1)
    assert (result.ranges_written, result.ranges_reused) == (1, len(base_ranges) - 1)
    assert (result.records_added, result.records_removed, result.records_changed) == (0, 0, 1)
    new_ranges = manager.ranges(NAMESPACE, result.metarange_id)
    assert len({info.id for info in new_ranges} - {info.id for info in base_ranges}) == 1
    assert manager.get(NAMESPACE, result.metarange_id, key_of(3000)) == changed


def test_single_change_with_default_policy(local_adapter: LocalAdapter) -> None:
    base_records = records(range(100_000))
    manager = CommittedManager(local_adapter, CommittedCache())
    base = manager.write_metarange(NAMESPACE, iter(base_records))
    before = manager.stats()
    result = manager.apply(NAMESPACE, base, [Change.upsert(make_record(key_of(54_321), version=1))])
    after = manager.stats()
    assert after.ranges_uploaded - before.ranges_uploaded == 1
    assert after.metaranges_uploaded - before.metaranges_uploaded == 1
    assert after.range_loads - before.range_loads == 1
    assert result.ranges_written == 1
    assert result.ranges_reused == len(manager.ranges(NAMESPACE, base)) - 1 > 5


def test_reapplying_the_same_entries_changes_nothing(manager: CommittedManager) -> None:
    base = manager.write_metarange(NAMESPACE, iter(BASE))
    same = [Change.upsert(record) for record in BASE[100:3000:7]]
    absent = [Change.delete(key_of(index)) for index in (-1, 1, 2001, 7001)]
    changes = sorted(same + absent)
    before = manager.stats()
    result = manager.apply(NAMESPACE, base, iter(changes))
    after = manager.stats()
    assert result.metarange_id == base
    assert not result.changed
    assert (result.ranges_written, result.ranges_reused) == (0, len(manager.ranges(NAMESPACE, base)))
    assert after.ranges_uploaded == before.ranges_uploaded
    assert after.metaranges_uploaded == before.metaranges_uploaded


def test_apply_twice_is_idempotent(manager: CommittedManager) -> None:
    changes = [Change.upsert(make_record(key_of(index), 1)) for index in range(1001, 1100, 2)]
    _, first = apply_and_check(manager, BASE, changes)
    again = manager.apply(NAMESPACE, first.metarange_id, iter(changes))
    assert again.metarange_id == first.metarange_id
    assert not again.changed
    assert (first.records_added, first.records_changed) == (len(changes), 0)


def test_deletes_of_absent_keys_between_ranges_read_nothing(local_adapter: LocalAdapter) -> None:
    base = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY).write_metarange(NAMESPACE, iter(BASE))
    manager = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    gaps = [Change.delete(info.max_key + b"\x00") for info in manager.ranges(NAMESPACE, base)]
    assert manager.apply(NAMESPACE, base, iter(gaps)).metarange_id == base
    assert manager.stats().range_reads == 0


def test_deleting_range_end_keys(manager: CommittedManager) -> None:
    base = manager.write_metarange(NAMESPACE, iter(BASE))
    ranges = manager.ranges(NAMESPACE, base)
    # The key that ended a range: that range's rest merges into the next one.
    _, result = apply_and_check(manager, BASE, [Change.delete(ranges[3].max_key)])
    assert result.records_removed == 1
    assert len(manager.ranges(NAMESPACE, result.metarange_id)) < len(ranges)
    # Every range end at once, and the first and last keys.
    ends = [Change.delete(info.max_key) for info in ranges]
    apply_and_check(manager, BASE, [Change.delete(BASE[0].key), *ends])


def test_deleting_whole_ranges_and_everything(manager: CommittedManager) -> None:
    base = manager.write_metarange(NAMESPACE, iter(BASE))
    ranges = manager.ranges(NAMESPACE, base)
    doomed = [record for record in BASE if ranges[2].min_key <= record.key <= ranges[4].max_key]
    apply_and_check(manager, BASE, [Change.delete(record.key) for record in doomed])
    everything = [Change.delete(record.key) for record in BASE]
    _, result = apply_and_check(manager, BASE, everything)
    assert manager.ranges(NAMESPACE, result.metarange_id) == []


@pytest.mark.parametrize(
    "indices",
    [
        [-5, -3, -1],  # before the first range
        [6001, 6003, 7000, 9000],  # after the last range
        [5999],  # inside the last range
        list(range(-11, 6100, 98)),  # across every range
        list(range(2001, 2400, 2)),  # a dense run spanning several ranges
    ],
)
def test_inserts(manager: CommittedManager, indices: list[int]) -> None:
    changes = [
        Change.upsert(make_record(f"{index:+09d}".encode() if index < 0 else key_of(index))) for index in indices
    ]
    _, result = apply_and_check(manager, BASE, sorted(changes))
    assert result.records_added == len(indices)


def test_inserts_after_a_last_range_that_ended_at_a_boundary(manager: CommittedManager) -> None:
    full = manager.write_metarange(NAMESPACE, iter(BASE))
    last_end = manager.ranges(NAMESPACE, full)[-2].max_key
    closed = [record for record in BASE if record.key <= last_end]
    # The base's last range ends where the chunker cut it, so it is reused, not read.
    base, result = apply_and_check(manager, closed, [Change.upsert(make_record(key_of(9999)))])
    assert result.ranges_reused == len(manager.ranges(NAMESPACE, base))


def test_mixed_changes_count(manager: CommittedManager) -> None:
    changes = [
        Change.delete(key_of(0)),
        Change.upsert(make_record(key_of(1))),
        Change.upsert(make_record(key_of(2), 1)),
        Change.upsert(make_record(key_of(4))),  # identical: no change
        Change.delete(key_of(5)),  # absent: no change
        Change.delete(key_of(4000)),
    ]
    _, result = apply_and_check(manager, BASE, changes)
    assert (result.records_added, result.records_removed, result.records_changed) == (1, 2, 1)


def test_apply_to_no_base(manager: CommittedManager) -> None:
    changes = [Change.upsert(record) for record in BASE] + [Change.delete(b"zz")]
    result = manager.apply(NAMESPACE, None, iter(changes))
    assert result.metarange_id == manager.write_metarange(NAMESPACE, iter(BASE))
    assert (result.records_added, result.ranges_reused) == (len(BASE), 0)


def test_size_caps_keep_the_canonical_form(local_adapter: LocalAdapter) -> None:
    # Caps hit often here: most ranges end by count or bytes, not by key.
    policy = ChunkingPolicy(boundary_modulus=1000, min_records=4, max_records=40, max_bytes=3000)
    manager = CommittedManager(local_adapter, CommittedCache(), policy)
    changes = [Change.upsert(make_record(key_of(index), 1)) for index in range(1, 6000, 150)]
    changes += [Change.upsert(make_record(key_of(3000) + b"/big", 0)._replace(value=b"v" * 2500))]
    apply_and_check(manager, BASE, sorted(changes))


@pytest.mark.parametrize(
    "changes",
    [
        [Change.delete(b"b"), Change.delete(b"a")],
        [Change.delete(b"a"), Change.upsert(make_record(b"a"))],
        [Change(b"a", make_record(b"b"))],
    ],
)
def test_bad_changes_are_refused(manager: CommittedManager, changes: list[Change]) -> None:
    base = manager.write_metarange(NAMESPACE, iter(BASE))
    with pytest.raises(InvalidArgument):
        manager.apply(NAMESPACE, base, iter(changes))


def test_batches_of_any_split_apply_as_the_changes_one_by_one(local_adapter: LocalAdapter) -> None:
    """apply_batches (a commit's path) gives the result apply gives for the same changes, in the
    merging path (changes inside base ranges) and the inserting one (past every range)."""
    manager = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    base = manager.write_metarange(NAMESPACE, iter(BASE))
    changes = [
        *(Change.upsert(make_record(key_of(i), version=1)) for i in range(1, 3000, 7)),
        *(Change.delete(key_of(i)) for i in range(3000, 3100, 2)),
        *(Change.upsert(make_record(key_of(i))) for i in range(7000, 9000)),
        Change.delete(key_of(9500)),
    ]
    expected = manager.apply(NAMESPACE, base, iter(changes))
    for size in (1, 5, 999, len(changes)):
        batches = [ChangeBatch.of(changes[i : i + size]) for i in range(0, len(changes), size)]
        batches.insert(1, ChangeBatch([], [], [], []))
        assert manager.apply_batches(NAMESPACE, base, iter(batches)) == expected
    assert manager.apply_batches(NAMESPACE, None, [ChangeBatch.of(changes)]) == manager.apply(NAMESPACE, None, changes)


def test_batches_out_of_order_are_refused(local_adapter: LocalAdapter) -> None:
    manager = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    first, second = ChangeBatch.of([Change.delete(key_of(5))]), ChangeBatch.of([Change.delete(key_of(4))])
    with pytest.raises(InvalidArgument, match="out of order"):
        manager.apply_batches(NAMESPACE, None, [first, second])
    with pytest.raises(InvalidArgument, match="carries a record"):
        ChangeBatch.of([Change(key_of(1), make_record(key_of(2)))])
