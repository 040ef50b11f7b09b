"""merge: equal to a dict model of the three-way rules, at the cost of the change, not the repo."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.core.committed import (
    Change,
    ChunkingPolicy,
    CommittedCache,
    CommittedManager,
    Conflict,
    MergeResult,
    MetaRangeId,
    Record,
    Resolution,
    by_pattern,
    dest_wins,
    fail,
    source_wins,
)
from engine.core.committed.globs import (
    MAX_PATH_RULES,
    MAX_PATTERN_BYTES,
    MAX_PATTERN_WILDCARDS,
    MAX_RULES_BYTES,
    GlobSet,
)
from engine.core.committed.merge import MAX_REPORTED_CONFLICTS, glob_regex
from engine.core.deadline import Deadline
from silt.errors import DeadlineExceeded, InvalidArgument
from tests.support.thread_cpu import ThreadCpu
from tests.unit.committed.conftest import MEM_NAMESPACE, SMALL_POLICY
from tests.unit.committed.models import (
    State,
    edited,
    edits,
    fresh_manager,
    model_merge,
    policies,
    states,
    write,
)
from tests.unit.committed.support import MemoryAdapter, key_of, make_record, records

NS = MEM_NAMESPACE
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Resolver = Callable[[Conflict], Resolution]

RESOLVERS: list[Resolver | None] = [
    None,
    source_wins,
    dest_wins,
    fail,
    by_pattern([("k/00*", "source-wins"), ("k/01**", "dest")], default="fail"),
    by_pattern([("k/0[12]*", "fail"), ("**", "source")]),  # brackets are literal: never matches
]


class Recorder:
    """Wraps a resolver, keeping the conflicts it was asked about."""

    def __init__(self, resolve: Resolver | None) -> None:
        self.resolve = resolve
        self.seen: list[Conflict] = []

    def __call__(self, conflict: Conflict) -> Resolution:
        self.seen.append(conflict)
        return self.resolve(conflict) if self.resolve is not None else "fail"


def swapped(resolve: Resolver | None) -> Resolver | None:
    """The same decisions with source and dest exchanged."""
    if resolve is None:
        return None

    def inner(conflict: Conflict) -> Resolution:
        answer = resolve(Conflict(conflict.key, conflict.base, conflict.dest, conflict.source))
        return {"source": "dest", "dest": "source"}.get(answer, answer)  # type: ignore[return-value]

    return inner


# --- properties against the dict model ------------------------------------------------------


@pytest.mark.slow  # a search against a model
@SETTINGS
@given(
    policy=policies(),
    base=states,
    shared=edits,
    source_edit=edits,
    dest_edit=edits,
    unrelated=st.none() | states,
    resolver=st.sampled_from(RESOLVERS),
)
def test_merge_equals_the_model(
    policy: ChunkingPolicy,
    base: State,
    shared: dict[int, int | None],
    source_edit: dict[int, int | None],
    dest_edit: dict[int, int | None],
    unrelated: State | None,
    resolver: Resolver | None,
) -> None:
    # Both sides often make the same edit (shared), so "both changed alike" cases are common.
    source = edited(edited(base, shared), source_edit)
    dest = edited(edited(base, shared), dest_edit) if unrelated is None else unrelated
    manager = fresh_manager(policy)
    base_id, source_id, dest_id = write(manager, base), write(manager, source), write(manager, dest)

    model_recorder = Recorder(resolver)
    expected, expected_failed = model_merge(base, source, dest, model_recorder)
    recorder = Recorder(resolver)
    before = manager.stats()
    result = manager.merge(NS, base_id, source_id, dest_id, recorder if resolver is not None else None)

    event(f"applied onto {result.applied_onto}, {'failed' if expected is None else 'merged'}")
    assert result.conflicts == expected_failed
    if resolver is not None:
        assert recorder.seen == model_recorder.seen  # each conflict once, in key order
    if expected is None:
        assert result.metarange_id is None and not result.succeeded
        assert manager.stats().metaranges_uploaded == before.metaranges_uploaded
        return
    assert result.metarange_id == write(manager, expected)
    assert [record.key for record in manager.iterate(NS, result.metarange_id)] == sorted(expected)
    assert result.conflicts_resolved == len(model_recorder.seen)
    # Symmetric rules: swapping the sides (and the resolver's answers) gives the same metarange.
    mirrored = manager.merge(NS, base_id, dest_id, source_id, swapped(resolver))
    assert mirrored.metarange_id == result.metarange_id


# --- the rules, case by case -----------------------------------------------------------------


def rec(name: str, version: int = 0) -> Record:
    return make_record(name.encode(), version)


@pytest.fixture
def manager() -> CommittedManager:
    return CommittedManager(MemoryAdapter(), CommittedCache(), SMALL_POLICY)


def ids(manager: CommittedManager, *states: list[Record]) -> list[MetaRangeId]:
    return [manager.write_metarange(NS, iter(sorted(state))) for state in states]


def test_rules_case_by_case(manager: CommittedManager) -> None:
    base = [rec("a"), rec("b"), rec("c"), rec("d"), rec("e"), rec("f")]
    # a: only source changed; b: only dest deleted; c: both deleted; d: both changed alike;
    # e: changed differently (conflict); f: source deleted, dest changed (conflict);
    # g: both added alike; h: both added differently (conflict).
    source = [rec("a", 1), rec("b"), rec("d", 1), rec("e", 1), rec("g"), rec("h", 1)]
    dest = [rec("a"), rec("d", 1), rec("e", 2), rec("f", 1), rec("g"), rec("h", 2)]
    base_id, source_id, dest_id = ids(manager, base, source, dest)

    failed = manager.merge(NS, base_id, source_id, dest_id)
    assert failed.metarange_id is None
    assert [c.key for c in failed.conflicts] == [b"e", b"f", b"h"]
    assert failed.conflicts[1] == Conflict(b"f", rec("f"), None, rec("f", 1))
    assert failed.conflicts[2] == Conflict(b"h", None, rec("h", 1), rec("h", 2))

    by_source = manager.merge(NS, base_id, source_id, dest_id, source_wins)
    expected = [rec("a", 1), rec("d", 1), rec("e", 1), rec("g"), rec("h", 1)]
    assert list(manager.iterate(NS, by_source.metarange_id)) == expected  # type: ignore[arg-type]
    assert by_source.conflicts_resolved == 3

    by_dest = manager.merge(NS, base_id, source_id, dest_id, dest_wins)
    expected = [rec("a", 1), rec("d", 1), rec("e", 2), rec("f", 1), rec("g"), rec("h", 2)]
    assert list(manager.iterate(NS, by_dest.metarange_id)) == expected  # type: ignore[arg-type]

    mixed = manager.merge(NS, base_id, source_id, dest_id, lambda c: "source" if c.key == b"f" else "dest")
    expected = [rec("a", 1), rec("d", 1), rec("e", 2), rec("g"), rec("h", 2)]
    assert list(manager.iterate(NS, mixed.metarange_id)) == expected  # type: ignore[arg-type]

    partly = manager.merge(NS, base_id, source_id, dest_id, lambda c: "fail" if c.key == b"h" else "dest")
    assert (partly.metarange_id, [c.key for c in partly.conflicts], partly.conflicts_resolved) == (None, [b"h"], 2)


def test_whole_metarange_shortcuts_read_no_range(manager: CommittedManager) -> None:
    base, changed = ids(manager, records(range(500)), records(range(500), 1))
    before = manager.stats().range_loads
    assert manager.merge(NS, base, base, changed).metarange_id == changed  # nothing to bring
    assert manager.merge(NS, base, changed, base).metarange_id == changed  # fast-forward
    assert manager.merge(NS, base, changed, changed).metarange_id == changed  # same on both
    assert manager.stats().range_loads == before


def test_empty_metaranges(manager: CommittedManager) -> None:
    empty, full, other = ids(manager, [], records(range(100)), records(range(50, 150)))
    assert manager.merge(NS, empty, full, empty).metarange_id == full
    assert manager.merge(NS, full, empty, full).metarange_id == empty
    # Both added keys 50..99 with the same identity: no conflict, the union results.
    union = manager.merge(NS, empty, full, other)
    assert list(manager.iterate(NS, union.metarange_id)) == records(range(150))  # type: ignore[arg-type]
    assert manager.merge(NS, full, empty, other).metarange_id == manager.write_metarange(
        NS, iter(records(range(100, 150)))
    )


def test_bad_resolver_answer(manager: CommittedManager) -> None:
    base, source, dest = ids(manager, [rec("a")], [rec("a", 1)], [rec("a", 2)])
    with pytest.raises(InvalidArgument):
        manager.merge(NS, base, source, dest, lambda conflict: "theirs")  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidArgument):
        by_pattern([("**", "ours")])


# --- resolvers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("tables/**", "tables/a/b/c.parquet", True),
        ("tables/**", "tables", False),
        ("tables/**", "tables2/x", False),
        ("tables/*", "tables/x", True),
        ("tables/*", "tables/x/y", False),
        ("tables/*/data.csv", "tables/t1/data.csv", True),
        ("tables/*/data.csv", "tables/t1/p/data.csv", False),
        ("**/data.csv", "data.csv", True),
        ("**/data.csv", "a/b/data.csv", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/xb", False),
        ("*.parquet", "x.parquet", True),
        ("*.parquet", "d/x.parquet", False),
        ("**.parquet", "d/x.parquet", True),
        ("a.b", "axb", False),  # dots and other regex characters are literal
        ("a+(b)", "a+(b)", True),
        ("logs/**", "logs/line\nbreak", True),
    ],
)
def test_glob(pattern: str, key: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).fullmatch(key.encode())) is matches


def test_by_pattern_first_match_wins() -> None:
    resolve = by_pattern(
        [("tables/raw/**", "fail"), ("tables/**", "source-wins"), ("*.json", "dest-wins")], default="dest"
    )

    def on(key: str) -> Resolution:
        return resolve(Conflict(key.encode(), None, None, None))

    assert [on("tables/raw/x"), on("tables/clean/x"), on("meta.json"), on("dir/meta.json")] == [
        "fail",
        "source",
        "dest",
        "dest",
    ]
    assert by_pattern([])(Conflict(b"k", None, None, None)) == "fail"


# --- cost: range reads follow the size of the change -----------------------------------------


class Big(NamedTuple):
    adapter: MemoryAdapter
    policy: ChunkingPolicy | None
    base: MetaRangeId
    size: int
    rows: list[Record]


@pytest.fixture(scope="module", params=["default-policy", "small-policy"])
def big(request: pytest.FixtureRequest) -> Big:
    # 200k records under the default policy (~28 ranges), 50k under the small one (~700).
    adapter = MemoryAdapter()
    policy, size = (None, 200_000) if request.param == "default-policy" else (SMALL_POLICY, 50_000)
    rows = records(range(size))
    base = CommittedManager(adapter, CommittedCache(), policy).write_metarange(NS, iter(rows))
    return Big(adapter, policy, base, size, rows)


def branch(big: Big, changes: list[Change]) -> MetaRangeId:
    return CommittedManager(big.adapter, CommittedCache(), big.policy).apply(NS, big.base, changes).metarange_id


def cold_merge(
    big: Big, source: MetaRangeId, dest: MetaRangeId, resolve: Resolver | None = None
) -> tuple[CommittedManager, MergeResult]:
    manager = CommittedManager(big.adapter, CommittedCache(), big.policy)  # cold: every load is counted
    return manager, manager.merge(NS, big.base, source, dest, resolve)


def expected_id(big: Big, *change_sets: list[Change]) -> MetaRangeId:
    manager = CommittedManager(big.adapter, CommittedCache(), big.policy)
    merged = {record.key: record for record in big.rows}
    for changes in change_sets:
        for change in changes:
            if change.record is None:
                merged.pop(change.key, None)
            else:
                merged[change.key] = change.record
    return manager.write_metarange(NS, (merged[key] for key in sorted(merged)))


def test_one_key_each_side_reads_o1_ranges(big: Big) -> None:
    source_changes = [Change.upsert(make_record(key_of(big.size // 7), 1))]
    dest_changes = [Change.upsert(make_record(key_of(big.size * 6 // 7), 1))]
    source, dest = branch(big, source_changes), branch(big, dest_changes)
    manager, result = cold_merge(big, source, dest)
    assert result.metarange_id == expected_id(big, source_changes, dest_changes)
    assert (result.differences_examined, result.changes_applied, result.ranges_written) == (1, 1, 1)
    # diff(base, walked side): one range a side; the kept side's range there is base's, so it
    # is not read; apply: the one kept range the change lands in.
    assert manager.stats().range_loads <= 3
    assert result.ranges_reused > 20


def test_two_keys_in_one_range_read_o1_ranges(big: Big) -> None:
    source_changes = [Change.upsert(make_record(key_of(big.size // 2), 1))]
    dest_changes = [Change.delete(key_of(big.size // 2 + 1))]
    source, dest = branch(big, source_changes), branch(big, dest_changes)
    manager, result = cold_merge(big, source, dest)
    assert result.metarange_id == expected_id(big, source_changes, dest_changes)
    assert manager.stats().range_loads <= 4


def test_conflict_reads_o1_ranges_and_writes_nothing(big: Big) -> None:
    source = branch(big, [Change.upsert(make_record(key_of(100), 1))])
    dest = branch(big, [Change.upsert(make_record(key_of(100), 2))])
    manager, result = cold_merge(big, source, dest)
    assert [c.key for c in result.conflicts] == [key_of(100)]
    assert result.metarange_id is None
    stats = manager.stats()
    assert (stats.ranges_uploaded, stats.metaranges_uploaded) == (0, 0)
    assert stats.range_loads <= 3


def test_big_source_change_is_kept_by_id(big: Big) -> None:
    # The source rewrote every 50th record; dest changed one key. The merge walks dest's
    # one-key diff and applies it onto source, keeping all of source's new ranges by id.
    source_changes = [Change.upsert(make_record(key_of(index), 1)) for index in range(3, big.size, 50)]
    dest_changes = [Change.delete(key_of(big.size // 3 + 1))]
    source, dest = branch(big, source_changes), branch(big, dest_changes)
    manager, result = cold_merge(big, source, dest)
    assert result.metarange_id == expected_id(big, source_changes, dest_changes)
    assert result.applied_onto == "source"
    assert result.differences_examined == 1
    # diff(base, dest): 2; source's range at the key differs from base's: 1; apply onto it: 1.
    assert manager.stats().range_loads <= 4
    assert result.ranges_written == 1


def test_many_conflicts_are_all_reported(big: Big) -> None:
    indices = range(0, big.size, big.size // 40)
    source = branch(big, [Change.upsert(make_record(key_of(index), 1)) for index in indices])
    dest = branch(big, [Change.delete(key_of(index)) for index in indices])
    _, result = cold_merge(big, source, dest, by_pattern([("**/part-0000000*", "source")]))
    # Index 0 is the only key matching the rule; every other conflict fails, all are listed.
    assert [c.key for c in result.conflicts] == [key_of(index) for index in indices][1:]
    assert all(c.dest is None and c.source is not None for c in result.conflicts)
    assert (result.metarange_id, result.conflicts_resolved) == (None, 1)


# --- hostile globs: linear time, bounded size ------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("*a*a*a*a*a*a*a*b", "a" * 100 * 1024, False),
        ("*a*a*a*a*a*a*a*b", "a" * 100 * 1024 + "b", True),
        ("**a**a**a**a**a**a**a**b", "a/" * 50 * 1024, False),
        ("**/" * 10 + "b", "a/" * 50 * 1024 + "b", True),
        ("*a" * 16 + "/b", "a" * 100 * 1024 + "/c", False),
    ],
)
def test_a_hostile_glob_over_a_100_kib_key_is_matched_in_linear_time(pattern: str, key: str, matches: bool) -> None:
    regex = glob_regex(pattern)
    with ThreadCpu() as cpu:
        assert (regex.fullmatch(key.encode()) is not None) is matches
    assert cpu.seconds < 0.5


def test_globs_match_bytes_that_are_not_utf8_and_newlines() -> None:
    assert glob_regex("logs/*").fullmatch(b"logs/\xff\x00\n")
    assert glob_regex("**").fullmatch(b"\n/\xfe/")
    assert not glob_regex("*").fullmatch(b"a/\xff")
    assert glob_regex("\u00e9/*").fullmatch("\u00e9/x".encode())


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([("x" * (MAX_PATTERN_BYTES + 1), "source")], "bytes"),
        ([("*/" * (MAX_PATTERN_WILDCARDS + 1), "source")], "wildcards"),
        ([("a", "source")] * (MAX_PATH_RULES + 1), "path strategies"),
        ([("", "source")], "empty"),
        # Each within its own caps, too many bytes together: one automaton for all of them.
        (
            [("*a" * 16 + "x" * (MAX_PATTERN_BYTES - 33), "source")] * (MAX_RULES_BYTES // MAX_PATTERN_BYTES + 1),
            "together",
        ),
    ],
)
def test_globs_are_bounded(rules: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        by_pattern(rules)


# --- all rules in one automaton; bounded work per merge ----------------------------------------

GLOB_PIECES = st.sampled_from(["*", "**", "**/", "a", "b", "/", "ab", "a/"])
KEYS = st.lists(st.sampled_from([b"a", b"b", b"/", b"ab"]), max_size=12).map(b"".join)


@SETTINGS
@given(patterns=st.lists(st.lists(GLOB_PIECES, min_size=1, max_size=6).map("".join), max_size=6), key=KEYS)
def test_a_glob_set_answers_the_first_glob_that_matches(patterns: list[str], key: bytes) -> None:
    singles = [glob_regex(pattern) for pattern in patterns]
    first = next((index for index, regex in enumerate(singles) if regex.fullmatch(key)), None)
    assert GlobSet(patterns).first_match(key) == first


def hostile_rules() -> list[str]:
    """As many bytes of the costliest glob shape as a merge may bring: long literal runs
    between many wildcards keep RE2's automaton building states over a key of a's."""
    count = MAX_RULES_BYTES // MAX_PATTERN_BYTES
    rules = []
    for index in range(count):
        run = MAX_PATTERN_BYTES // MAX_PATTERN_WILDCARDS - 1 - index
        rules.append((("a" * run + "*") * MAX_PATTERN_WILDCARDS)[: MAX_PATTERN_BYTES - 1] + "b")
    return rules


def test_the_largest_hostile_rule_set_costs_milliseconds_per_long_key() -> None:
    # Before: 100 such rules of 1 KiB were accepted and tried one after the other, ~60 ms a key.
    rules = hostile_rules()
    assert sum(len(rule) for rule in rules) <= MAX_RULES_BYTES
    globs = GlobSet(rules)
    keys = [b"a" * 1024, b"a" * 1023 + b"b", (b"a" * 31 + b"/") * 32]
    # The matching's CPU time in this thread, not wall time, which a loaded machine stretches
    # (a late leg once measured 33 ms a key of wall time for this).
    with ThreadCpu() as cpu:
        answers = [globs.first_match(key) for key in keys * 10]
    per_key = cpu.seconds / len(answers)
    assert per_key < 0.025, f"{per_key * 1000:.1f} ms of CPU per key"
    # first match, whatever order RE2 reports them in
    assert answers[:3] == [None, 0, None]


def conflicting_states(manager: CommittedManager, count: int) -> tuple[MetaRangeId, MetaRangeId, MetaRangeId]:
    """base, source and dest where every one of count keys changed differently on each side."""
    base, source, dest = ids(manager, records(range(count)), records(range(count), 1), records(range(count), 2))
    return base, source, dest


def test_a_failed_merge_stops_asking_after_the_report_cap(manager: CommittedManager) -> None:
    base, source, dest = conflicting_states(manager, MAX_REPORTED_CONFLICTS * 5)
    asked = Recorder(fail)
    result = manager.merge(NS, base, source, dest, asked)
    # Before: the resolver was asked about all 500 conflicts and all were listed.
    assert len(asked.seen) == MAX_REPORTED_CONFLICTS
    assert [c.key for c in result.conflicts] == [key_of(index) for index in range(MAX_REPORTED_CONFLICTS)]
    assert result.conflicts_truncated and result.metarange_id is None

    # Conflicts the resolver settles after the failure count too: it is asked at most the cap.
    asked = Recorder(lambda c: "fail" if c.key in (key_of(3), key_of(7)) else "source")
    result = manager.merge(NS, base, source, dest, asked)
    assert len(asked.seen) == 3 + MAX_REPORTED_CONFLICTS
    assert [c.key for c in result.conflicts] == [key_of(3), key_of(7)]
    assert result.conflicts_truncated

    # Without a resolver every conflict fails; the same cap.
    result = manager.merge(NS, base, source, dest)
    assert len(result.conflicts) == MAX_REPORTED_CONFLICTS and result.conflicts_truncated


def test_a_failed_merge_below_the_cap_reports_everything(manager: CommittedManager) -> None:
    base, source, dest = conflicting_states(manager, MAX_REPORTED_CONFLICTS)
    result = manager.merge(NS, base, source, dest)
    assert len(result.conflicts) == MAX_REPORTED_CONFLICTS and not result.conflicts_truncated


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_merge_checks_its_deadline_at_every_conflict(manager: CommittedManager) -> None:
    base, source, dest = conflicting_states(manager, 1000)
    clock = FakeClock()

    def slow_source(conflict: Conflict) -> Resolution:
        clock.now += 1.0  # each conflict "takes" a second
        return "source"

    asked = Recorder(slow_source)
    with pytest.raises(DeadlineExceeded):
        manager.merge(NS, base, source, dest, asked, Deadline.after(10.0, clock))
    # Before: no deadline reached the merge and all 1,000 conflicts were resolved.
    assert len(asked.seen) == 10

    # A cancelled call stops as well, resolving or reporting.
    calls = 0

    def cancelled_after_five() -> bool:
        nonlocal calls
        calls += 1
        return calls <= 5

    asked = Recorder(fail)
    with pytest.raises(DeadlineExceeded, match="cancelled"):
        manager.merge(NS, base, source, dest, asked, Deadline(is_active=cancelled_after_five))
    assert len(asked.seen) == 5
