"""The caches: memory LRU of decoded objects, disk cache of fetched files, and the counters."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.core.committed import CommittedCache, CommittedManager, DiskCache, MemoryCache
from engine.core.committed.cache import cache_key
from silt.block.local import LocalAdapter
from silt.errors import NotFound
from tests.unit.committed.conftest import MEM_NAMESPACE, NAMESPACE, SMALL_POLICY
from tests.unit.committed.support import MemoryAdapter, key_of, records

RECORDS = records(range(3000))


def test_memory_hits_are_counted(local_adapter: LocalAdapter) -> None:
    metarange_id = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        NAMESPACE, iter(RECORDS)
    )
    manager = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    manager.get(NAMESPACE, metarange_id, key_of(10))
    manager.get(NAMESPACE, metarange_id, key_of(11))
    stats = manager.stats()
    assert (stats.metarange_reads, stats.metarange_memory_hits) == (1, 1)
    assert (stats.range_reads, stats.range_memory_hits) == (1, 1)
    ranges = manager.ranges(NAMESPACE, metarange_id)
    assert list(manager.iterate(NAMESPACE, metarange_id)) == RECORDS
    stats = manager.stats()
    assert stats.range_reads == len(ranges)
    assert stats.range_loads == len(ranges) + 2


def test_writes_warm_the_memory_cache(local_adapter: LocalAdapter) -> None:
    manager = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)
    metarange_id = manager.write_metarange(NAMESPACE, iter(RECORDS))
    assert list(manager.iterate(NAMESPACE, metarange_id)) == RECORDS
    assert manager.stats().range_reads == manager.stats().metarange_reads == 0


def test_a_small_memory_cache_rereads_from_the_store(local_adapter: LocalAdapter) -> None:
    metarange_id = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        NAMESPACE, iter(RECORDS)
    )
    manager = CommittedManager(local_adapter, CommittedCache(memory_bytes=40_000), SMALL_POLICY)
    count = len(manager.ranges(NAMESPACE, metarange_id))
    for _ in range(2):
        assert list(manager.iterate(NAMESPACE, metarange_id)) == RECORDS
    assert manager.stats().range_reads == 2 * count


def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_bytes=100)
    cache.put(("range", "a"), "A", 40)
    cache.put(("range", "b"), "B", 40)
    assert cache.get(("range", "a")) == "A"  # b is now the least recently used
    cache.put(("range", "c"), "C", 40)
    assert cache.get(("range", "b")) is None
    assert (cache.get(("range", "a")), cache.get(("range", "c"))) == ("A", "C")
    assert cache.size == 80
    cache.put(("range", "huge"), "H", 101)
    assert cache.get(("range", "huge")) is None
    assert len(cache) == 2


def test_disk_cache_serves_a_remote_store(memory_adapter: MemoryAdapter, tmp_path: Path) -> None:
    metarange_id = CommittedManager(memory_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        MEM_NAMESPACE, iter(RECORDS)
    )
    first = CommittedManager(memory_adapter, CommittedCache(disk_directory=tmp_path / "cache"), SMALL_POLICY)
    assert list(first.iterate(MEM_NAMESPACE, metarange_id)) == RECORDS
    count = len(first.ranges(MEM_NAMESPACE, metarange_id))
    assert memory_adapter.gets == count + 1
    assert first.stats().range_reads == count

    # A restarted process: empty memory, same directory. Nothing goes to the store.
    second = CommittedManager(memory_adapter, CommittedCache(disk_directory=tmp_path / "cache"), SMALL_POLICY)
    assert list(second.iterate(MEM_NAMESPACE, metarange_id)) == RECORDS
    assert memory_adapter.gets == count + 1
    stats = second.stats()
    assert (stats.range_reads, stats.range_disk_hits, stats.metarange_disk_hits) == (0, count, 1)


def test_without_a_disk_cache_a_remote_store_still_works(memory_adapter: MemoryAdapter) -> None:
    metarange_id = CommittedManager(memory_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        MEM_NAMESPACE, iter(RECORDS)
    )
    reader = CommittedManager(memory_adapter, CommittedCache(), SMALL_POLICY)
    assert list(reader.iterate(MEM_NAMESPACE, metarange_id, key_of(1500))) == RECORDS[1500:]


def test_local_store_is_read_in_place(local_adapter: LocalAdapter, tmp_path: Path) -> None:
    metarange_id = CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        NAMESPACE, iter(RECORDS)
    )
    cache = CommittedCache(disk_directory=tmp_path / "cache")
    assert list(CommittedManager(local_adapter, cache, SMALL_POLICY).iterate(NAMESPACE, metarange_id)) == RECORDS
    assert cache.disk is not None and len(cache.disk) == 0


def test_disk_cache_is_bounded_and_survives_restarts(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=250)
    for name in "abc":
        cache.store(("range", name), io.BytesIO(name.encode() * 100)).close()
    assert len(cache) == 2 and cache.size == 200
    assert cache.open(("range", "a")) is None
    assert not (tmp_path / "range" / "a").exists()
    with cache.open(("range", "b")) as cached:  # type: ignore[union-attr]
        assert cached.read() == b"b" * 100
    (tmp_path / "range" / ".tmp-crashed").write_bytes(b"partial")

    reopened = DiskCache(tmp_path, max_bytes=250)
    assert (len(reopened), reopened.size) == (2, 200)
    assert not (tmp_path / "range" / ".tmp-crashed").exists()
    with reopened.open(("range", "c")) as cached:  # type: ignore[union-attr]
        assert cached.read() == b"c" * 100


def test_one_oversized_file_is_still_served(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=10)
    with cache.store(("range", "big"), io.BytesIO(b"x" * 100)) as stored:
        assert stored.read() == b"x" * 100
    cache.store(("range", "next"), io.BytesIO(b"y" * 100)).close()
    assert cache.open(("range", "big")) is None


def test_concurrent_readers_share_one_manager(memory_adapter: MemoryAdapter, tmp_path: Path) -> None:
    metarange_id = CommittedManager(memory_adapter, CommittedCache(), SMALL_POLICY).write_metarange(
        MEM_NAMESPACE, iter(RECORDS)
    )
    # A memory cache smaller than the data set, so threads keep evicting and refetching.
    cache = CommittedCache(memory_bytes=60_000, disk_directory=tmp_path / "cache", disk_bytes=60_000)
    manager = CommittedManager(memory_adapter, cache, SMALL_POLICY)

    def read(start: int) -> bool:
        found = list(manager.iterate(MEM_NAMESPACE, metarange_id, key_of(start)))
        hits = all(manager.get(MEM_NAMESPACE, metarange_id, key_of(i)) == RECORDS[i] for i in range(0, 3000, 97))
        return found == RECORDS[start:] and hits

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(read, [0, 700, 1400, 2100] * 3))


def test_one_namespace_never_reads_anothers_cached_objects(memory_adapter: MemoryAdapter, tmp_path: Path) -> None:
    """A metarange id is only a name: a repository that names another repository's metarange
    (a restored dump can) must not be served that repository's cached ranges."""
    other = "mem://other-repo"
    for cache in (CommittedCache(), CommittedCache(disk_directory=tmp_path / "cache")):
        manager = CommittedManager(memory_adapter, cache, SMALL_POLICY)
        metarange_id = manager.write_metarange(MEM_NAMESPACE, iter(RECORDS))
        assert list(manager.iterate(MEM_NAMESPACE, metarange_id)) == RECORDS  # cached now, memory and disk
        with pytest.raises(NotFound):
            list(manager.iterate(other, metarange_id))
        range_id = manager.ranges(MEM_NAMESPACE, metarange_id)[0].id
        with pytest.raises(NotFound):
            manager._store.read_range(other, range_id)

        # The same bytes stored in both namespaces are two cache entries, each read from its own.
        for (namespace, key), data in list(memory_adapter.objects.items()):
            if namespace == MEM_NAMESPACE:
                memory_adapter.objects[(other, key)] = data
        assert list(manager.iterate(other, metarange_id)) == RECORDS
        memory_adapter.objects = {k: v for k, v in memory_adapter.objects.items() if k[0] != other}


def test_cache_keys_name_the_namespace() -> None:
    assert cache_key("range", "s3://a", "f" * 64) != cache_key("range", "s3://b", "f" * 64)
    kind, name = cache_key("range", "local://x/../y", "f" * 64)
    assert kind == "range" and "/" not in name and name.endswith("f" * 64)
