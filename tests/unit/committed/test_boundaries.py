"""The range-boundary index beside each metarange: what a path-filtered log reads per commit.

Its answers must be the metarange file's (a log filtered through indexes lists the commits a
walk of the metaranges lists), a metarange without one (written before indexes existed) or
with a damaged one must still be read right, and the file must never be needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.committed import ChunkingPolicy, CommittedCache, CommittedManager, MetaRangeId
from engine.core.committed.boundaries import (
    METARANGE_INDEX_PREFIX,
    IndexUnreadable,
    decode_index,
    encode_index,
    metarange_index_key,
)
from engine.core.committed.diff import spans_differ
from engine.core.committed.metarange import metarange_id
from engine.core.committed.model import METARANGES_PREFIX, RangeId, RangeInfo
from engine.core.committed.store import ObjectStore
from silt.block.adapter import PutResult
from silt.errors import PermissionDenied
from tests.unit.committed.conftest import MEM_NAMESPACE, SMALL_POLICY
from tests.unit.committed.models import KEY_SPACE, State, edited, edits, key, policies, states, write
from tests.unit.committed.support import MemoryAdapter, key_of, records

NS = MEM_NAMESPACE


def _index_keys(adapter: MemoryAdapter) -> set[str]:
    return {k for ns, k in adapter.objects if ns == NS and k.startswith(METARANGE_INDEX_PREFIX)}


def test_encoding_round_trips_and_refuses_what_is_not_the_metarange() -> None:
    ranges = [
        RangeInfo(RangeId(f"{1:064x}"), b"", b"a", 1, 10),
        RangeInfo(RangeId(f"{2:064x}"), b"b", b"b\x00\xff" * 40, 3, 1 << 40),
    ]
    own_id = metarange_id(ranges)
    data = encode_index(ranges)
    assert decode_index(own_id, data).ranges == ranges
    assert decode_index(metarange_id([]), encode_index([])).ranges == []
    other_id = metarange_id(ranges[:1])
    damaged = [
        data[:-1],  # truncated
        data + b"\x00",  # trailing bytes
        b"PAR1" + data[4:],  # not an index
        data.replace(b"\x03", b"\x04", 1),  # a count changed
        encode_index(ranges[:1]),  # another metarange's index under this name
    ]
    for payload in damaged:
        with pytest.raises(IndexUnreadable):
            decode_index(own_id, payload)
    with pytest.raises(IndexUnreadable):
        decode_index(other_id, data)


def test_written_beside_each_new_metarange_and_read_instead_of_it() -> None:
    adapter = MemoryAdapter()
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    left = writer.write_metarange(NS, iter(records(range(3000))))
    assert writer.apply(NS, left, []).metarange_id == left  # nothing changed: no new metarange, no new index
    assert _index_keys(adapter) == {metarange_index_key(left)}
    changed = writer.write_metarange(NS, iter(records(range(3001))))
    assert _index_keys(adapter) == {metarange_index_key(left), metarange_index_key(changed)}
    assert writer.stats().indexes_uploaded == 2

    reader = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert reader.changed_paths(NS, left, changed, [key_of(3000)])
    assert not reader.changed_paths(NS, left, changed, [key_of(5)])
    stats = reader.stats()
    assert (stats.metarange_reads, stats.index_reads, stats.index_memory_hits) == (0, 2, 2)
    # Reading the metarange itself still reads its file: an index proves nothing about it.
    reader.ranges(NS, left)
    assert reader.stats().metarange_reads == 1


def test_a_metarange_without_an_index_is_read_and_then_indexed() -> None:
    adapter = MemoryAdapter()
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    left = writer.write_metarange(NS, iter(records(range(2000))))
    right = writer.write_metarange(NS, iter(records(range(1, 2000))))
    for index_key in _index_keys(adapter):
        del adapter.objects[(NS, index_key)]  # as written before indexes existed

    old = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert old.changed_paths(NS, left, right, [key_of(0)])
    assert not old.changed_paths(NS, left, right, [key_of(1999)])
    stats = old.stats()
    assert (stats.indexes_missing, stats.metarange_reads, stats.indexes_uploaded) == (2, 2, 2)
    assert _index_keys(adapter) == {metarange_index_key(left), metarange_index_key(right)}

    later = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert later.changed_paths(NS, left, right, [key_of(0)])
    assert (later.stats().index_reads, later.stats().metarange_reads) == (2, 0)


def test_a_damaged_index_is_refused_and_replaced(tmp_path: Path) -> None:
    adapter = MemoryAdapter()
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    left = writer.write_metarange(NS, iter(records(range(2000))))
    right = writer.write_metarange(NS, iter(records(range(1, 2000))))
    # The left index claims the right metarange's rows: believed, it would say key 0 is unchanged.
    adapter.objects[(NS, metarange_index_key(left))] = adapter.objects[(NS, metarange_index_key(right))]

    # A remote store: fetched indexes are kept in the disk cache, the damaged one too at first.
    reader = CommittedManager(adapter, CommittedCache(disk_directory=tmp_path / "cache"), SMALL_POLICY)
    assert reader.changed_paths(NS, left, right, [key_of(0)])
    assert (reader.stats().indexes_refused, reader.stats().metarange_reads) == (1, 1)
    assert decode_index(left, adapter.objects[(NS, metarange_index_key(left))]).ranges == reader.ranges(NS, left)

    # The next process on that disk cache fetches the rewritten index, not the damaged copy.
    later = CommittedManager(adapter, CommittedCache(disk_directory=tmp_path / "cache"), SMALL_POLICY)
    assert later.changed_paths(NS, left, right, [key_of(0)])
    stats = later.stats()
    assert (stats.indexes_refused, stats.metarange_reads, stats.index_reads, stats.index_disk_hits) == (0, 0, 1, 1)


def test_never_needed_when_it_cannot_be_written() -> None:
    class NoIndexes(MemoryAdapter):
        def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
            if key.startswith(METARANGE_INDEX_PREFIX):
                raise PermissionDenied("a bucket policy allowing only the metarange files")
            return super().put(namespace, key, stream, size)

    adapter = NoIndexes()
    writer = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    left = writer.write_metarange(NS, iter(records(range(2000))))
    right = writer.write_metarange(NS, iter(records(range(1, 2000))))
    assert _index_keys(adapter) == set()
    assert any(k.startswith(METARANGES_PREFIX) for _, k in adapter.objects)
    reader = CommittedManager(adapter, CommittedCache(), SMALL_POLICY)
    assert reader.changed_paths(NS, left, right, [key_of(0)])
    assert reader.stats().indexes_uploaded == 0


@pytest.mark.slow  # a search against the metaranges' own answer
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=policies(),
    start=states,
    history=st.lists(edits, min_size=1, max_size=5),
    keys=st.lists(st.integers(0, KEY_SPACE - 1), max_size=3),
    prefixes=st.lists(st.integers(0, KEY_SPACE - 1).map(lambda index: key(index)[: 3 + index % 4]), max_size=2),
    unindexed=st.sets(st.integers(0, 6)),
)
def test_a_log_through_indexes_lists_what_the_metaranges_list(
    policy: ChunkingPolicy,
    start: State,
    history: list[dict[int, int | None]],
    keys: list[int],
    prefixes: list[bytes],
    unindexed: set[int],
) -> None:
    adapter = MemoryAdapter()
    writer = CommittedManager(adapter, CommittedCache(), policy)
    states_ = [start]
    for edit in history:
        states_.append(edited(states_[-1], edit))
    commits = [write(writer, state) for state in states_]
    for number in unindexed & set(range(len(commits))):
        adapter.objects.pop((NS, metarange_index_key(commits[number])), None)  # some written before indexes
    wanted = [key(index) for index in keys]

    def log(touches: Callable[[MetaRangeId, MetaRangeId], bool]) -> list[int]:
        # Newest first, each commit against its parent, as graveler's log walks.
        return [n for n in range(len(commits) - 1, 0, -1) if touches(commits[n - 1], commits[n])]

    through_indexes = CommittedManager(adapter, CommittedCache(), policy)
    metarange_files = ObjectStore(adapter, CommittedCache())

    def by_metaranges(left: MetaRangeId, right: MetaRangeId) -> bool:
        read = metarange_files.read_metarange
        return spans_differ(metarange_files, NS, read(NS, left), read(NS, right), wanted, prefixes)

    assert log(lambda left, right: through_indexes.changed_paths(NS, left, right, wanted, prefixes)) == log(
        by_metaranges
    )
    assert through_indexes.stats().metarange_reads <= len(unindexed)
