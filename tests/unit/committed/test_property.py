"""The canonical-form property: apply(write(base), changes) == write(base ⊕ changes)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.committed import Change, ChunkingPolicy, CommittedCache, CommittedManager, Record
from tests.unit.committed.conftest import MEM_NAMESPACE
from tests.unit.committed.support import MemoryAdapter, make_record, merged

# Searches against a model: seconds each.
pytestmark = pytest.mark.slow

# A small key space, so changes often hit base keys, range ends and gaps alike.
KEY_SPACE = 400
KEYS = st.integers(0, KEY_SPACE - 1).map(lambda index: b"k/%04d" % index)
VERSIONS = st.integers(0, 2)  # version 0 is the base's own record: an upsert that changes nothing
# Per key of a dense change set: nothing, a delete (None), or an upsert of a version.
_DENSE_SLOT = st.one_of(st.just(-1), st.just(-1), st.none(), VERSIONS)


@st.composite
def policies(draw: st.DrawFn) -> ChunkingPolicy:
    min_records = draw(st.integers(1, 6))
    return ChunkingPolicy(
        boundary_modulus=draw(st.integers(1, 16)),
        min_records=min_records,
        max_records=draw(st.integers(min_records, min_records + 24)),
        # Values are ~40 bytes a record: small caps make byte-ended ranges common.
        max_bytes=draw(st.sampled_from([150, 400, 1 << 20])),
    )


def base_records(keys: set[bytes]) -> list[Record]:
    return [make_record(key) for key in sorted(keys)]


# Fixed-length masks rather than sets: hypothesis keeps generated sets small, and the
# interesting cases (many ranges, changes in most of them) need hundreds of keys.
base_key_sets = st.one_of(
    st.sets(KEYS, max_size=40),
    # A run of consecutive keys: changes land before, inside and after it.
    st.tuples(st.integers(0, KEY_SPACE), st.integers(0, KEY_SPACE)).map(
        lambda bounds: {b"k/%04d" % index for index in range(min(bounds), max(bounds))}
    ),
    st.lists(st.booleans(), min_size=KEY_SPACE, max_size=KEY_SPACE).map(
        lambda mask: {b"k/%04d" % index for index, present in enumerate(mask) if present}
    ),
)


def _as_changes(chosen: dict[bytes, int | None]) -> list[Change]:
    return [
        Change.delete(key) if version is None else Change.upsert(make_record(key, version))
        for key, version in sorted(chosen.items())
    ]


change_sets = st.one_of(
    st.dictionaries(KEYS, st.none() | VERSIONS, max_size=12).map(_as_changes),
    st.lists(_DENSE_SLOT, min_size=KEY_SPACE, max_size=KEY_SPACE).map(
        lambda slots: _as_changes({b"k/%04d" % index: slot for index, slot in enumerate(slots) if slot != -1})
    ),
)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(policy=policies(), base_keys=base_key_sets, changes=change_sets)
def test_apply_equals_writing_the_result(policy: ChunkingPolicy, base_keys: set[bytes], changes: list[Change]) -> None:
    manager = CommittedManager(MemoryAdapter(), CommittedCache(), policy)
    base = base_records(base_keys)
    base_id = manager.write_metarange(MEM_NAMESPACE, iter(base))
    result = manager.apply(MEM_NAMESPACE, base_id, iter(changes))
    expected = merged(base, changes)

    assert list(manager.iterate(MEM_NAMESPACE, result.metarange_id)) == expected
    assert result.metarange_id == manager.write_metarange(MEM_NAMESPACE, iter(expected))
    if not result.changed:
        assert result.metarange_id == base_id
    result_ranges = manager.ranges(MEM_NAMESPACE, result.metarange_id)
    assert result.ranges_written + result.ranges_reused == len(result_ranges)
    base_ids = {info.id for info in manager.ranges(MEM_NAMESPACE, base_id)}
    assert sum(info.id in base_ids for info in result_ranges) >= result.ranges_reused


@SETTINGS
@given(policy=policies(), base_keys=base_key_sets, steps=st.lists(change_sets, max_size=3))
def test_successive_applies_stay_canonical(
    policy: ChunkingPolicy, base_keys: set[bytes], steps: list[list[Change]]
) -> None:
    manager = CommittedManager(MemoryAdapter(), CommittedCache(), policy)
    current = base_records(base_keys)
    metarange_id = manager.write_metarange(MEM_NAMESPACE, iter(current))
    for changes in steps:
        metarange_id = manager.apply(MEM_NAMESPACE, metarange_id, iter(changes)).metarange_id
        current = merged(current, changes)
    assert metarange_id == manager.write_metarange(MEM_NAMESPACE, iter(current))
    for key in (b"k/0000", b"k/0200", b"k/0399"):
        found = manager.get(MEM_NAMESPACE, metarange_id, key)
        assert found == next((record for record in current if record.key == key), None)
