"""Three-way merge of metaranges, at the cost of the smaller side's change.

Per key, with b, s and d the records of base, source and dest (or their absence): s == b
takes d, d == b takes s, s == d takes either, and anything else is a conflict for the
resolver. The rules are symmetric up to the resolver's answer, so the merge walks the
diff from base of one side only ("walked") and applies what the rules decide onto the
other side ("kept"):

- keys the walked side did not change come from the kept side untouched: ``apply`` reuses
  those ranges by id, so neither they nor the equal base ranges are read;
- for a key the walked side changed, the kept side's record is looked up only when the
  kept range covering it is not a base range: a range with a base range's id holds the
  base's records over its whole span, so there the kept side equals base and the walked
  side wins without a read.

The walked side is the one with fewer ranges that are not in base — a count taken from
the metaranges alone — so a branch merged into a dest that barely moved keeps the
branch's new ranges by id instead of rebuilding them. Either way the result is the same
canonical metarange (see apply.py).

Bounded work: the caller's deadline is checked at every conflict (and every
``DEADLINE_CHECK_EVERY`` differences), so a merge whose client gave up stops. Once a
conflict has failed, the merge has failed and the rest of the walk only reports: it stops
after ``MAX_REPORTED_CONFLICTS`` conflicts from the first failure on (resolved or failed),
so a failed merge asks the resolver at most that many more times and its answer stays small;
``conflicts_truncated`` then says that more may follow.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Literal, NamedTuple

from engine.core.committed.apply import apply_changes
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.diff import Difference, diff_metaranges
from engine.core.committed.globs import GlobSet
from engine.core.committed.globs import glob_regex as glob_regex  # re-exported for tests of single globs
from engine.core.committed.metarange import MetaRange
from engine.core.committed.model import Change, MetaRangeId, Record
from engine.core.committed.ranges import RangeData
from engine.core.committed.store import ObjectStore
from engine.core.deadline import NO_DEADLINE, Deadline
from silt.errors import InvalidArgument

# From the first failed conflict on, how many conflicts a failed merge still examines (and
# reports the failed ones of): the rest of the walk only serves the answer.
MAX_REPORTED_CONFLICTS = 100
DEADLINE_CHECK_EVERY = 1024  # differences between deadline checks away from conflicts

Resolution = Literal["source", "dest", "fail"]
Side = Literal["source", "dest"]


class Conflict(NamedTuple):
    """A key both sides changed differently; a None record means the key is absent there."""

    key: bytes
    base: Record | None
    source: Record | None
    dest: Record | None


Resolver = Callable[[Conflict], Resolution]


class MergeResult(NamedTuple):
    # None exactly when some conflict failed; then nothing was committed to any branch and
    # ranges already written for the aborted result are unreferenced garbage.
    metarange_id: MetaRangeId | None
    # The conflicts that failed, in key order: all of them, unless conflicts_truncated (then
    # those among the MAX_REPORTED_CONFLICTS conflicts from the first failure on).
    conflicts: list[Conflict]
    conflicts_resolved: int  # conflicts the resolver settled for a side
    applied_onto: Side  # the side whose metarange the other side's changes were applied to
    differences_examined: int  # keys the walked side changed from base
    changes_applied: int
    ranges_written: int
    ranges_reused: int
    conflicts_truncated: bool = False  # the walk stopped at the report cap with differences left

    @property
    def succeeded(self) -> bool:
        return self.metarange_id is not None


def _same(first: Record | None, second: Record | None) -> bool:
    if first is None or second is None:
        return first is second
    return first.identity == second.identity


class _KeptLookup:
    """Records of the kept side at increasing keys, reading only ranges that are not base's."""

    def __init__(self, store: ObjectStore, namespace: str, kept: MetaRange, base_ids: frozenset[str]) -> None:
        self._store = store
        self._namespace = namespace
        self._ranges = kept.ranges
        self._max_keys = kept.max_keys
        self._base_ids = base_ids
        self._index = 0
        self._open_index = -1
        self._open: RangeData | None = None

    def get(self, key: bytes, base_record: Record | None) -> Record | None:
        self._index = index = bisect_left(self._max_keys, key, self._index)
        if index == len(self._ranges) or self._ranges[index].min_key > key:
            return None  # in no range's span: absent
        info = self._ranges[index]
        if info.id in self._base_ids:
            return base_record
        if index != self._open_index:
            self._open = self._store.read_range(self._namespace, info.id)
            self._open_index = index
        assert self._open is not None
        return self._open.find(key)


class _Failed(Exception):
    """Stops ``apply`` at the first failed conflict: its result would be thrown away."""


class _Merger:
    def __init__(
        self,
        differences: Iterator[Difference],
        lookup: _KeptLookup,
        walked: Side,
        resolve: Resolver | None,
        deadline: Deadline,
    ) -> None:
        self._differences = differences
        self._lookup = lookup
        self._walked = walked
        self._resolve = resolve
        self._deadline = deadline
        self.conflicts: list[Conflict] = []
        self.resolved = 0
        self.examined = 0
        self.applied = 0
        self.truncated = False
        self._after_failure = 0  # conflicts examined from the first failed one on

    def changes(self) -> Iterator[Change]:
        for difference in self._differences:
            change = self._decide(difference)
            if self.conflicts:
                raise _Failed
            if change is not None:
                self.applied += 1
                yield change

    def collect_remaining_conflicts(self) -> None:
        # The diff walk is still where _Failed left it, so no difference is examined twice.
        for difference in self._differences:
            if self._after_failure >= MAX_REPORTED_CONFLICTS:
                self.truncated = True
                return
            self._decide(difference)

    def _decide(self, difference: Difference) -> Change | None:
        """The change to the kept side that the merge rules make at this key, if any."""
        self.examined += 1
        if self.examined % DEADLINE_CHECK_EVERY == 0:
            self._deadline.check("merging")
        key, base_record, walked_record = difference.key, difference.left, difference.right
        kept_record = self._lookup.get(key, base_record)
        if _same(kept_record, base_record):
            return Change(key, walked_record)
        if _same(kept_record, walked_record):
            return None
        self._deadline.check("merging")  # every conflict: the resolver may be what takes the time
        if self._walked == "source":
            conflict = Conflict(key, base_record, walked_record, kept_record)
        else:
            conflict = Conflict(key, base_record, kept_record, walked_record)
        if self.conflicts:
            self._after_failure += 1
        resolution = self._resolve(conflict) if self._resolve is not None else "fail"
        if resolution == "fail":
            if not self.conflicts:
                self._after_failure = 1
            self.conflicts.append(conflict)
            return None
        if resolution not in ("source", "dest"):
            raise InvalidArgument(f"conflict resolver returned {resolution!r}: expected source, dest or fail")
        self.resolved += 1
        return Change(key, walked_record) if resolution == self._walked else None


def _changed_range_count(metarange: MetaRange, base_ids: frozenset[str]) -> int:
    return sum(info.id not in base_ids for info in metarange.ranges)


def merge_metaranges(
    store: ObjectStore,
    namespace: str,
    policy: ChunkingPolicy,
    base: MetaRange,
    source: MetaRange,
    dest: MetaRange,
    resolve: Resolver | None,
    deadline: Deadline = NO_DEADLINE,
) -> MergeResult:
    # Whole-metarange cases first: one side has nothing to contribute.
    if source.id in (base.id, dest.id):
        return MergeResult(dest.id, [], 0, "dest", 0, 0, 0, len(dest.ranges))
    if dest.id == base.id:
        return MergeResult(source.id, [], 0, "source", 0, 0, 0, len(source.ranges))

    base_ids = frozenset(info.id for info in base.ranges)
    walk_source = _changed_range_count(source, base_ids) <= _changed_range_count(dest, base_ids)
    walked, kept = (source, dest) if walk_source else (dest, source)
    merger = _Merger(
        diff_metaranges(store, namespace, base, walked),
        _KeptLookup(store, namespace, kept, base_ids),
        "source" if walk_source else "dest",
        resolve,
        deadline,
    )
    applied_onto: Side = "dest" if walk_source else "source"
    try:
        result = apply_changes(store, namespace, policy, kept, merger.changes())
    except _Failed:
        merger.collect_remaining_conflicts()
        return MergeResult(
            None,
            merger.conflicts,
            merger.resolved,
            applied_onto,
            merger.examined,
            merger.applied,
            0,
            0,
            merger.truncated,
        )
    return MergeResult(
        result.metarange_id,
        [],
        merger.resolved,
        applied_onto,
        merger.examined,
        merger.applied,
        result.ranges_written,
        result.ranges_reused,
    )


# --- ready resolvers ---------------------------------------------------------------------


def source_wins(conflict: Conflict) -> Resolution:
    return "source"


def dest_wins(conflict: Conflict) -> Resolution:
    return "dest"


def fail(conflict: Conflict) -> Resolution:
    return "fail"


_STRATEGIES: dict[str, Resolution] = {
    "source": "source",
    "source-wins": "source",
    "dest": "dest",
    "dest-wins": "dest",
    "fail": "fail",
}


def _strategy(name: str) -> Resolution:
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise InvalidArgument(f"unknown merge strategy {name!r}: expected one of {sorted(_STRATEGIES)}") from None


def by_pattern(rules: Sequence[tuple[str, str]], default: str = "fail") -> Resolver:
    """A resolver choosing a strategy by the first rule whose glob matches the conflict's key.

    Strategies: ``source``/``source-wins``, ``dest``/``dest-wins``, ``fail``. Rules are
    checked when the resolver is built, so a typo fails before any merge starts. The globs
    are bounded in number and size and compiled once into one automaton, which each
    conflict's key goes through once (globs.py).
    """
    globs = GlobSet([pattern for pattern, _ in rules])
    strategies = [_strategy(strategy) for _, strategy in rules]
    fallback = _strategy(default)

    def resolve(conflict: Conflict) -> Resolution:
        index = globs.first_match(conflict.key)
        return fallback if index is None else strategies[index]

    return resolve
