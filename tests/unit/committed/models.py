"""Dict models of diff and merge, and hypothesis strategies for states of a small key space."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from engine.core.committed import (
    ChunkingPolicy,
    CommittedCache,
    CommittedManager,
    Conflict,
    Difference,
    MetaRangeId,
    Record,
    Resolution,
)
from tests.unit.committed.conftest import MEM_NAMESPACE
from tests.unit.committed.support import MemoryAdapter, make_record

State = dict[bytes, Record]

# Small enough that independent states overlap a lot, large enough for dozens of ranges
# under the tiny policies below.
KEY_SPACE = 300
VERSIONS = 3  # few versions, so independent edits often agree by accident


def key(index: int) -> bytes:
    return b"k/%04d" % index


@st.composite
def policies(draw: st.DrawFn) -> ChunkingPolicy:
    min_records = draw(st.integers(1, 6))
    return ChunkingPolicy(
        boundary_modulus=draw(st.integers(1, 16)),
        min_records=min_records,
        max_records=draw(st.integers(min_records, min_records + 24)),
        max_bytes=draw(st.sampled_from([150, 400, 1 << 20])),
    )


# Per key: absent (None) or present at a version.
_SLOT = st.one_of(st.none(), st.integers(0, VERSIONS - 1))


def _state(slots: list[int | None]) -> State:
    return {key(index): make_record(key(index), version) for index, version in enumerate(slots) if version is not None}


states: st.SearchStrategy[State] = st.one_of(
    st.just({}),
    st.lists(_SLOT, min_size=KEY_SPACE, max_size=KEY_SPACE).map(_state),
    # A dense run of keys, as a table's files are.
    st.tuples(st.integers(0, KEY_SPACE), st.integers(0, KEY_SPACE), st.integers(0, VERSIONS - 1)).map(
        lambda spec: _state([spec[2] if spec[0] <= index < spec[1] else None for index in range(KEY_SPACE)])
    ),
)

# An edit of a state: per key, keep (absent from the dict), delete (None) or set a version.
_EDIT_SLOT = st.one_of(st.just(-1), st.just(-1), st.just(-1), st.none(), st.integers(0, VERSIONS - 1))
sparse_edits = st.dictionaries(st.integers(0, KEY_SPACE - 1), st.none() | st.integers(0, VERSIONS - 1), max_size=10)
dense_edits = st.lists(_EDIT_SLOT, min_size=KEY_SPACE, max_size=KEY_SPACE).map(
    lambda slots: {index: slot for index, slot in enumerate(slots) if slot != -1}
)
edits = st.one_of(sparse_edits, dense_edits)


def edited(state: State, edit: dict[int, int | None]) -> State:
    result = dict(state)
    for index, version in edit.items():
        if version is None:
            result.pop(key(index), None)
        else:
            result[key(index)] = make_record(key(index), version)
    return result


def fresh_manager(policy: ChunkingPolicy, adapter: MemoryAdapter | None = None) -> CommittedManager:
    return CommittedManager(adapter if adapter is not None else MemoryAdapter(), CommittedCache(), policy)


def write(manager: CommittedManager, state: State) -> MetaRangeId:
    return manager.write_metarange(MEM_NAMESPACE, (state[k] for k in sorted(state)))


def same(first: Record | None, second: Record | None) -> bool:
    if first is None or second is None:
        return first is second
    return first.identity == second.identity


def model_diff(left: State, right: State, start: bytes = b"") -> list[Difference]:
    result = []
    for k in sorted(left.keys() | right.keys()):
        if k < start:
            continue
        before, after = left.get(k), right.get(k)
        if before is None:
            result.append(Difference(k, "added", None, after))
        elif after is None:
            result.append(Difference(k, "removed", before, None))
        elif before.identity != after.identity:
            result.append(Difference(k, "changed", before, after))
    return result


def model_merge(
    base: State, source: State, dest: State, resolve: Callable[[Conflict], Resolution] | None
) -> tuple[State | None, list[Conflict]]:
    """The three-way merge key by key: (merged state or None, failed conflicts)."""
    merged: State = {}
    failed: list[Conflict] = []
    for k in sorted(base.keys() | source.keys() | dest.keys()):
        b, s, d = base.get(k), source.get(k), dest.get(k)
        if same(s, b):
            chosen = d
        elif same(d, b) or same(s, d):
            chosen = s
        else:
            conflict = Conflict(k, b, s, d)
            resolution = resolve(conflict) if resolve is not None else "fail"
            if resolution == "fail":
                failed.append(conflict)
                continue
            chosen = s if resolution == "source" else d
        if chosen is not None:
            merged[k] = chosen
    return (None if failed else merged), failed
