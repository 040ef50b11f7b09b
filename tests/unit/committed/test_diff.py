"""diff, diff_changes and changed_paths: equal to a dict model, reading only ranges that differ."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.committed import Change, ChunkingPolicy, CommittedCache, CommittedManager, MetaRangeId, Record
from engine.core.committed.diff import REMOVED, Difference, DifferenceRun, DiffWalk, prefix_end
from engine.core.committed.store import ObjectStore
from silt.errors import InvalidArgument, NotFound
from tests.unit.committed.conftest import MEM_NAMESPACE, SMALL_POLICY
from tests.unit.committed.models import (
    KEY_SPACE,
    State,
    edited,
    edits,
    fresh_manager,
    key,
    model_diff,
    policies,
    states,
    write,
)
from tests.unit.committed.support import MemoryAdapter, key_of, make_record, records

NS = MEM_NAMESPACE
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def adapter() -> MemoryAdapter:
    return MemoryAdapter()


@pytest.fixture
def manager(adapter: MemoryAdapter) -> CommittedManager:
    return CommittedManager(adapter, CommittedCache(), SMALL_POLICY)


def changes_of(left: State, right: State) -> list[Change]:
    return [
        Change.delete(difference.key) if difference.right is None else Change.upsert(difference.right)
        for difference in model_diff(left, right)
    ]


def ungrouped(items: Iterable[Difference | DifferenceRun]) -> Iterator[Difference]:
    for item in items:
        if not isinstance(item, DifferenceRun):
            yield item
            continue
        for record in map(Record, item.keys, item.identities, item.values):
            yield Difference(record.key, item.kind, *((record, None) if item.kind == REMOVED else (None, record)))


# --- properties against the dict model ------------------------------------------------------


@pytest.mark.slow  # a search against a model
@SETTINGS
@given(policy=policies(), left=states, edit=edits, other=st.none() | states, start=st.integers(0, KEY_SPACE))
def test_diff_equals_the_model(
    policy: ChunkingPolicy, left: State, edit: dict[int, int | None], other: State | None, start: int
) -> None:
    # Edits keep most ranges shared; independent states give boundaries that do not line up.
    right = edited(left, edit) if other is None else other
    adapter = MemoryAdapter()
    manager = fresh_manager(policy, adapter)
    left_id, right_id = write(manager, left), write(manager, right)

    before = manager.stats().range_loads
    differences = list(manager.diff(NS, left_id, right_id))
    assert differences == model_diff(left, right)
    # Every range read is one the other side does not share: equal ids are never opened.
    left_ids = {info.id for info in manager.ranges(NS, left_id)}
    right_ids = {info.id for info in manager.ranges(NS, right_id)}
    assert manager.stats().range_loads - before <= len(left_ids ^ right_ids)
    assert list(manager.diff(NS, right_id, left_id)) == model_diff(right, left)
    assert list(manager.diff(NS, left_id, right_id, start=key(start))) == model_diff(left, right, key(start))
    # Abandoned after every difference and resumed, a walk still yields each one once.
    store = ObjectStore(adapter, CommittedCache())
    walk = DiffWalk(store, NS, store.read_metarange(NS, left_id), store.read_metarange(NS, right_id))
    resumed = []
    while (found := next(walk.run(), None)) is not None:
        resumed.append(found)
        walk.seek(found.key)  # at or below the position: must not move it back
    assert resumed == differences
    # Grouped, one-sided stretches come as runs that are exactly those differences.
    grouped = DiffWalk(store, NS, store.read_metarange(NS, left_id), store.read_metarange(NS, right_id))
    assert list(ungrouped(grouped.run_grouped())) == differences
    from_start = DiffWalk(store, NS, store.read_metarange(NS, left_id), store.read_metarange(NS, right_id))
    from_start.seek(key(start))
    assert list(ungrouped(from_start.run_grouped())) == model_diff(left, right, key(start))
    # Replaying the diff onto left rebuilds right exactly, down to the metarange id.
    replayed = manager.apply(NS, left_id, (Change(d.key, d.right) for d in differences))
    assert replayed.metarange_id == right_id


@SETTINGS
@given(policy=policies(), left=states, edit=edits, noise=st.lists(st.integers(0, KEY_SPACE - 1), max_size=20))
def test_diff_changes_equals_the_model(
    policy: ChunkingPolicy, left: State, edit: dict[int, int | None], noise: list[int]
) -> None:
    manager = fresh_manager(policy)
    left_id = write(manager, left)
    right = edited(left, edit)
    # No-op changes among the real ones: rewrites of present records and deletes of absent keys.
    changes = {change.key: change for change in changes_of(left, right)}
    for index in noise:
        k = key(index)
        if k not in changes:
            changes[k] = Change.upsert(left[k]) if k in left else Change.delete(k)
    ordered = [changes[k] for k in sorted(changes)]
    assert list(manager.diff_changes(NS, left_id, iter(ordered))) == model_diff(left, right)


@pytest.mark.slow  # a search against a model
@SETTINGS
@given(
    policy=policies(),
    left=states,
    edit=edits,
    keys=st.lists(st.integers(0, KEY_SPACE - 1), max_size=4),
    prefixes=st.lists(st.integers(0, KEY_SPACE - 1).map(lambda index: key(index)[: 3 + index % 4]), max_size=3),
)
def test_changed_paths_equals_the_model(
    policy: ChunkingPolicy, left: State, edit: dict[int, int | None], keys: list[int], prefixes: list[bytes]
) -> None:
    manager = fresh_manager(policy)
    right = edited(left, edit)
    left_id, right_id = write(manager, left), write(manager, right)
    wanted = [key(index) for index in keys]
    expected = any(
        d.key in wanted or any(d.key.startswith(prefix) for prefix in prefixes) for d in model_diff(left, right)
    )
    assert manager.changed_paths(NS, left_id, right_id, wanted, prefixes) is expected


# --- shapes: empty metaranges, seeking, misaligned boundaries -------------------------------


def test_empty_metaranges(manager: CommittedManager) -> None:
    empty = manager.write_metarange(NS, iter(()))
    full = records(range(300))
    full_id = manager.write_metarange(NS, iter(full))
    assert list(manager.diff(NS, empty, empty)) == []
    assert [(d.kind, d.right) for d in manager.diff(NS, empty, full_id)] == [("added", r) for r in full]
    assert [(d.kind, d.left) for d in manager.diff(NS, full_id, empty)] == [("removed", r) for r in full]
    assert list(manager.diff(NS, full_id, empty, start=key_of(1000))) == []
    assert list(manager.diff_changes(NS, empty, [Change.delete(b"a")])) == []
    assert not manager.changed_paths(NS, empty, empty, [b"a"], [b""])
    assert manager.changed_paths(NS, empty, full_id, [], [b""])


def test_seek_inside_before_and_after_ranges(manager: CommittedManager) -> None:
    left = records(range(0, 3000, 2))
    right = records(range(1, 3000, 2))  # every key differs, so every range differs
    left_id = manager.write_metarange(NS, iter(left))
    right_id = manager.write_metarange(NS, iter(right))
    model = model_diff({r.key: r for r in left}, {r.key: r for r in right})
    for start in [b"", b"a", key_of(0), key_of(1), key_of(1501), key_of(2999), key_of(3000), b"\xff"]:
        assert list(manager.diff(NS, left_id, right_id, start=start)) == [d for d in model if d.key >= start]


def test_seek_reads_nothing_before_start(big_store: BigStore) -> None:
    adapter, _, base = big_store
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    deletes = [Change.delete(key_of(index)) for index in range(0, SMALL_BIG, 1000)]
    changed = writer.apply(NS, base, deletes).metarange_id
    manager = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    differences = list(manager.diff(NS, base, changed, start=key_of(SMALL_BIG - 1000)))
    assert [d.key for d in differences] == [key_of(SMALL_BIG - 1000)]
    assert manager.stats().range_loads <= 4


def test_misaligned_boundaries(manager: CommittedManager, adapter: MemoryAdapter) -> None:
    base_records = records(range(0, 30000, 3))
    base = manager.write_metarange(NS, iter(base_records))
    ranges = manager.ranges(NS, base)
    # Deleting a range's last key joins two ranges; inserting a dense run cuts new ones.
    boundary_key = ranges[10].max_key
    inserted = [make_record(key_of(index)) for index in range(15001, 15400) if index % 3]
    changes = sorted([Change.delete(boundary_key), *map(Change.upsert, inserted)])
    changed = manager.apply(NS, base, changes).metarange_id
    changed_ranges = manager.ranges(NS, changed)
    assert len(changed_ranges) > len(ranges)

    left = {r.key: r for r in base_records}
    right = edited_records(left, changes)
    fresh = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert list(fresh.diff(NS, base, changed)) == model_diff(left, right)
    # Only the ranges around the two edits: never the whole metarange.
    differing = len({i.id for i in ranges} ^ {i.id for i in changed_ranges})
    assert fresh.stats().range_loads <= differing < len(ranges) // 4


def edited_records(state: State, changes: list[Change]) -> State:
    result = dict(state)
    for change in changes:
        if change.record is None:
            result.pop(change.key, None)
        else:
            result[change.key] = change.record
    return result


def test_bad_input(manager: CommittedManager) -> None:
    base = manager.write_metarange(NS, iter(records(range(10))))
    with pytest.raises(InvalidArgument):
        list(manager.diff_changes(NS, base, [Change.delete(b"b"), Change.delete(b"a")]))
    with pytest.raises(InvalidArgument):
        list(manager.diff_changes(NS, base, [Change(b"a", make_record(b"b"))]))
    with pytest.raises(NotFound):
        manager.diff(NS, base, MetaRangeId("0" * 64))
    with pytest.raises(InvalidArgument):
        manager.diff(NS, base, MetaRangeId("../../etc"))


def test_prefix_end() -> None:
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff\xff") == b"b"
    assert prefix_end(b"\xff") is None
    assert prefix_end(b"") is None


# --- cost: range reads follow the size of the change ----------------------------------------


BIG = 200_000  # records of the metarange under the default policy (~28 ranges)
SMALL_BIG = 50_000  # records of the one under the small policy (~700 ranges)


class BigStore(NamedTuple):
    adapter: MemoryAdapter
    default: MetaRangeId
    small: MetaRangeId


@pytest.fixture(scope="module")
def big_store() -> BigStore:
    adapter = MemoryAdapter()
    rows = records(range(BIG))
    default = CommittedManager(adapter, CommittedCache()).write_metarange(NS, iter(rows))
    small = CommittedManager(adapter, CommittedCache(), SMALL_POLICY).write_metarange(NS, iter(rows[:SMALL_BIG]))
    return BigStore(adapter, default, small)


def _loads_of_diff(
    adapter: MemoryAdapter, policy: ChunkingPolicy | None, base: MetaRangeId, changes: list[Change]
) -> tuple[int, int, int]:
    """(differences, range loads of a cold diff, ranges in base)."""
    writer = CommittedManager(adapter, CommittedCache(), policy)
    changed = writer.apply(NS, base, changes).metarange_id
    manager = CommittedManager(adapter, CommittedCache(), policy)  # cold: every load is counted
    count = sum(1 for _ in manager.diff(NS, base, changed))
    return count, manager.stats().range_loads, len(writer.ranges(NS, base))


@pytest.mark.parametrize("small", [False, True], ids=["default-policy", "small-policy"])
@pytest.mark.parametrize(
    "change",
    [
        lambda n: Change.upsert(make_record(key_of(n * 5 // 8 + 7), 1)),
        lambda n: Change.delete(key_of(n * 5 // 8 + 7)),
        lambda n: Change.upsert(make_record(key_of(n * 5 // 8 + 7) + b".new")),
        lambda n: Change.upsert(make_record(key_of(0), 1)),
        lambda n: Change.upsert(make_record(key_of(n - 1), 1)),
        lambda n: Change.upsert(make_record(key_of(n))),
    ],
    ids=["changed", "removed", "added", "first", "last", "appended"],
)
def test_one_changed_key_reads_at_most_two_ranges_a_side(
    big_store: BigStore, small: bool, change: Callable[[int], Change]
) -> None:
    adapter, default, small_id = big_store
    policy, base, size = (SMALL_POLICY, small_id, SMALL_BIG) if small else (None, default, BIG)
    count, loads, total = _loads_of_diff(adapter, policy, base, [change(size)])
    assert count == 1
    assert loads <= 4
    assert total > 20


def test_a_deleted_boundary_key_reads_the_ranges_it_joins(
    big_store: BigStore,
) -> None:
    adapter, _, small_id = big_store
    boundary = CommittedManager(adapter, CommittedCache(), SMALL_POLICY).ranges(NS, small_id)[500].max_key
    count, loads, _ = _loads_of_diff(adapter, SMALL_POLICY, small_id, [Change.delete(boundary)])
    assert count == 1
    assert loads <= 4


@pytest.mark.parametrize("k", [1, 10, 50])
def test_changes_in_k_ranges_read_order_k_ranges(big_store: BigStore, k: int) -> None:
    adapter, _, small_id = big_store
    step = SMALL_BIG // k
    changes = [Change.upsert(make_record(key_of(index * step + 17), 1)) for index in range(k)]
    count, loads, total = _loads_of_diff(adapter, SMALL_POLICY, small_id, changes)
    assert count == k
    assert loads <= 2 * k + 2
    assert total > 500


def test_diff_is_lazy(big_store: BigStore) -> None:
    adapter, default, _ = big_store
    manager = CommittedManager(adapter, CommittedCache())
    empty = manager.write_metarange(NS, iter(()))
    walk: Iterator = manager.diff(NS, default, empty)
    assert manager.stats().range_loads == 0
    assert next(walk).key == key_of(0)
    assert manager.stats().range_loads == 1


def test_diff_changes_reads_only_ranges_changes_fall_in(
    big_store: BigStore,
) -> None:
    adapter, _, small_id = big_store
    manager = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    indices = [10, 11, 12, 30_000, 45_000]
    staged = [Change.upsert(make_record(key_of(i), 1)) for i in indices]
    staged.append(Change.upsert(make_record(key_of(SMALL_BIG + 5))))  # past every range: nothing to read
    staged.append(Change.delete(key_of(10) + b"-absent"))  # next to key 10: no range of its own
    staged.sort()
    differences = list(manager.diff_changes(NS, small_id, staged))
    assert [d.kind for d in differences] == ["changed"] * 5 + ["added"]
    holding = {
        info.id for info in manager.ranges(NS, small_id) for i in indices if info.min_key <= key_of(i) <= info.max_key
    }
    assert manager.stats().range_loads == len(holding) <= 4


# --- changed_paths: a log filtered by paths --------------------------------------------------


def _history(adapter: MemoryAdapter, base: MetaRangeId, indices: list[int]) -> list[MetaRangeId]:
    """Metaranges of successive commits, each rewriting the record at one index."""
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    metaranges = [base]
    for step, index in enumerate(indices):
        change = Change.upsert(make_record(key_of(index), step + 1))
        metaranges.append(writer.apply(NS, metaranges[-1], [change]).metarange_id)
    return metaranges


def _filtered_log(
    manager: CommittedManager, history: list[MetaRangeId], keys: list[bytes], prefixes: list[bytes]
) -> list[int]:
    # What `log` filtered by paths does: compare each commit with its first parent.
    return [
        number
        for number in range(1, len(history))
        if manager.changed_paths(NS, history[number - 1], history[number], keys, prefixes)
    ]


def test_filtered_log_over_unrelated_commits_reads_nothing(
    big_store: BigStore,
) -> None:
    adapter, _, small_id = big_store
    history = _history(adapter, small_id, [20_000 + 37 * step for step in range(50)])
    manager = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    keys = [key_of(5), key_of(40_000), key_of(SMALL_BIG - 1)]
    prefixes = [b"tables/events/date=2026-01-01/part-0000", b"tables/other/"]
    assert _filtered_log(manager, history, keys, prefixes) == []
    stats = manager.stats()
    assert stats.range_loads == 0
    # One range-boundary index per commit, no metarange: the parent's index is the last commit's.
    assert (stats.metarange_reads, stats.index_reads) == (0, len(history))


def test_filtered_log_finds_the_commits_touching_the_paths(
    big_store: BigStore,
) -> None:
    adapter, _, small_id = big_store
    indices = [20_000 + 37 * step for step in range(50)]
    indices[7], indices[31] = 42, 1234  # two commits touch the filter's paths
    history = _history(adapter, small_id, indices)
    manager = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert _filtered_log(manager, history, [key_of(42)], [b"tables/events/date=2026-01-01/part-00001"]) == [8, 32]
    # Two commits, each reading the range pair that holds its change.
    assert manager.stats().range_loads == 4


def index_of(key: bytes) -> int:
    return int(key[-16:-8])


def test_filtered_log_with_changes_next_to_the_paths(
    big_store: BigStore,
) -> None:
    adapter, _, small_id = big_store
    probe = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    shared = next(info for info in probe.ranges(NS, small_id) if info.count > 20 and info.min_key > key_of(20_000))
    first, last = index_of(shared.min_key), index_of(shared.max_key)
    # Every commit changes a key of the range that also holds the filter's key.
    history = _history(adapter, small_id, [first + step % (last - first) for step in range(50)])
    manager = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert _filtered_log(manager, history, [shared.max_key], []) == []
    # Each version of that range read once: the key's identity in the parent's version is
    # kept from the step before, where that version was the newer side.
    assert manager.stats().range_loads == 50 + 1
    assert manager.stats().identity_memory_hits == 50 - 1


def test_changed_paths_reads_only_ranges_under_the_prefixes(manager: CommittedManager, adapter: MemoryAdapter) -> None:
    rows = [Record(b"a/%05d" % i, b"x", b"") for i in range(2000)] + [
        Record(b"b/%05d" % i, b"x", b"") for i in range(2000)
    ]
    left = manager.write_metarange(NS, iter(rows))
    # Everything under b/ changes; a/ is untouched.
    right = manager.apply(NS, left, [Change.upsert(Record(r.key, b"y", b"")) for r in rows[2000:]]).metarange_id
    fresh = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert not fresh.changed_paths(NS, left, right, [b"a/00007"], [b"a/"])
    # At most the one range pair that may straddle a/ and b/.
    assert fresh.stats().range_loads <= 2
    before = fresh.stats().range_loads
    assert fresh.changed_paths(NS, left, right, [], [b"b/01"])
    assert fresh.stats().range_loads - before == 2  # stops at the first difference
