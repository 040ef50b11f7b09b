"""A key alone (a log filtered by object) is compared by looking it up in the part of each range
that may hold it: the same answer as the diff walk over the key's span, on random histories."""

from __future__ import annotations

import io
import itertools
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.core.committed import Change, CommittedCache, CommittedManager, MetaRangeId
from engine.core.committed import ranges as range_files
from engine.core.committed.diff import DiffWalk, key_successor
from engine.core.committed.ranges import RANGE_SCHEMA, decode_range, encode_range, identity_in_file
from engine.core.committed.store import ObjectStore
from tests.unit.committed.conftest import MEM_NAMESPACE, SMALL_POLICY
from tests.unit.committed.support import MemoryAdapter, key_of, make_record

NS = MEM_NAMESPACE


def walk_differs(store: ObjectStore, left: MetaRangeId, right: MetaRangeId, key: bytes) -> bool:
    """The comparison before lookups: a diff walk over [key, key_successor(key))."""
    walk = DiffWalk(store, NS, store.read_metarange(NS, left), store.read_metarange(NS, right))
    walk.seek(key)
    return next(walk.run(key_successor(key)), None) is not None


def random_history(rng: random.Random, adapter: MemoryAdapter, commits: int) -> list[MetaRangeId]:
    """Metaranges of successive commits: keys created, changed, deleted and created again,
    one to many per commit, now and then none (the same metarange twice)."""
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    universe = [key_of(i) for i in range(0, 1500, 3)]  # every third index: probes fall between keys too
    history = [writer.write_metarange(NS, iter(make_record(key) for key in universe[:250]))]
    for step in range(commits):
        changes: dict[bytes, Change] = {}
        for _ in range(rng.choice([0, 1, 1, 3, 40])):
            key = rng.choice(universe)
            deleted = rng.random() < 0.3
            changes[key] = Change.delete(key) if deleted else Change.upsert(make_record(key, rng.randrange(3) + step))
        history.append(writer.apply(NS, history[-1], [changes[key] for key in sorted(changes)]).metarange_id)
    return history


@pytest.mark.parametrize("seed", range(3))
def test_key_lookups_answer_as_the_walk_does(seed: int) -> None:
    rng = random.Random(seed)
    adapter = MemoryAdapter()
    history = random_history(rng, adapter, 30)
    pairs = list(itertools.pairwise(history)) + [(rng.choice(history), rng.choice(history)) for _ in range(10)]
    oracle = ObjectStore(adapter, CommittedCache())
    probes = [key_of(i) for i in range(1500)] + [b"", b"a", b"\xff"]
    for left, right in pairs:
        # Cold managers: the lookups read range files, not ranges another lookup decoded.
        lookup = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
        for key in rng.sample(probes, 40):
            assert lookup.changed_paths(NS, left, right, [key]) == walk_differs(oracle, left, right, key), key


@pytest.fixture
def small_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(range_files, "ROW_GROUP_ROWS", 7)


def _range(count: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
    records = [make_record(key_of(2 * i)) for i in range(count)]  # odd indices: between records
    return [r.key for r in records], [r.identity for r in records], [r.value for r in records]


def _probes(count: int) -> list[bytes]:
    return [key_of(i) for i in range(-1, 2 * count + 2)] + [b"", b"\xff"]


@pytest.mark.usefixtures("small_row_groups")
@pytest.mark.parametrize("count", [1, 6, 7, 8, 50])
def test_identity_in_file_is_the_decoded_ranges(count: int) -> None:
    keys, identities, values = _range(count)
    payload = encode_range(keys, identities, values)
    decoded = decode_range(io.BytesIO(payload))
    for key in _probes(count):
        record = decoded.find(key)
        assert identity_in_file(io.BytesIO(payload), key) == (None if record is None else record.identity)


def test_a_file_without_statistics_is_read_whole() -> None:
    keys, identities, values = _range(30)
    table = pa.Table.from_arrays([pa.array(keys), pa.array(identities), pa.array(values)], schema=RANGE_SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=4, write_statistics=False)
    payload = sink.getvalue()
    decoded = decode_range(io.BytesIO(payload))
    for key in _probes(30):
        record = decoded.find(key)
        assert identity_in_file(io.BytesIO(payload), key) == (None if record is None else record.identity)
