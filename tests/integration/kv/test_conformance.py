"""The Store semantics of docs/design/kv.md, checked identically on every driver (mem, local, cassandra)."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.errors import InvalidArgument, NotFound, PredicateFailed
from silt.kv import Store, open_store
from silt.kv.mem import MemStore
from silt.kv.store import MAX_SCAN_CHUNK, Predicate, scan_prefix
from tests.conftest import KV_DRIVERS
from tests.integration.kv.racing import race, replicated


def keys_of(store: Store, partition: bytes, start: bytes = b"") -> list[bytes]:
    return [entry.key for entry in store.scan(partition, start)]


def bulk_set(store: Store, partition: bytes, items: list[tuple[bytes, bytes]], workers: int = 16) -> None:
    # Networked drivers answer one request per round trip; writing in parallel keeps setup short.
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(lambda kv: store.set(partition, kv[0], kv[1]), items):
            pass


def test_get_missing_raises_not_found(store: Store, partition: bytes) -> None:
    with pytest.raises(NotFound):
        store.get(partition, b"missing")


def test_read_after_write_and_overwrite(store: Store, partition: bytes) -> None:
    store.set(partition, b"k", b"v1")
    assert store.get(partition, b"k").value == b"v1"
    store.set(partition, b"k", b"v2")
    assert store.get(partition, b"k").value == b"v2"


def test_get_many_returns_the_keys_that_exist(store: Store, partition: bytes) -> None:
    store.set(partition, b"a", b"1")
    store.set(partition, b"c", b"")
    store.set(partition + b"-other", b"b", b"elsewhere")
    assert store.get_many(partition, [b"a", b"b", b"c", b"a"]) == {b"a": b"1", b"c": b""}
    assert store.get_many(partition, []) == {}
    store.delete(partition, b"a")
    assert store.get_many(partition, [b"a", b"c"]) == {b"c": b""}


def test_empty_value_is_a_value(store: Store, partition: bytes) -> None:
    store.set(partition, b"empty", b"")
    assert store.get(partition, b"empty").value == b""
    assert [(e.key, e.value) for e in store.scan(partition)] == [(b"empty", b"")]


def test_one_mebibyte_value_round_trips(store: Store, partition: bytes) -> None:
    big = bytes(range(256)) * 4096
    assert len(big) == 1024 * 1024
    store.set(partition, b"big", big)
    assert store.get(partition, b"big").value == big
    assert next(iter(store.scan(partition))).value == big


def test_scan_is_in_byte_order_including_nul_and_ff(store: Store, partition: bytes) -> None:
    keys = [b"\xff", b"a\xff", b"\x00", b"a", b"\x00\x00", b"b", b"a\x00", b"\xff\xff", b"\x7f", b"\x80", b"A"]
    for i, key in enumerate(keys):
        store.set(partition, key, str(i).encode())
    assert keys_of(store, partition) == sorted(keys)
    values = {e.key: e.value for e in store.scan(partition)}
    assert values == {key: str(i).encode() for i, key in enumerate(keys)}


def test_scan_from_start_key(store: Store, partition: bytes) -> None:
    for key in (b"a", b"b", b"c", b"d"):
        store.set(partition, key, key)
    assert keys_of(store, partition, b"b") == [b"b", b"c", b"d"]  # start key present: included
    assert keys_of(store, partition, b"bb") == [b"c", b"d"]  # absent: the next key on
    assert keys_of(store, partition, b"\x00") == [b"a", b"b", b"c", b"d"]
    assert keys_of(store, partition, b"e") == []


def test_scan_of_empty_partition(store: Store, partition: bytes) -> None:
    assert keys_of(store, partition) == []


def test_partitions_are_isolated(store: Store, partition: bytes) -> None:
    other = partition + b"x"  # shares a prefix: must still be a different partition
    store.set(partition, b"k", b"mine")
    store.set(other, b"k", b"theirs")
    store.set(other, b"only-there", b"1")
    assert store.get(partition, b"k").value == b"mine"
    assert store.get(other, b"k").value == b"theirs"
    assert keys_of(store, partition) == [b"k"]
    with pytest.raises(NotFound):
        store.get(partition, b"only-there")
    store.delete(other, b"k")
    assert store.get(partition, b"k").value == b"mine"


def test_scan_prefix_stops_at_prefix_end(store: Store, partition: bytes) -> None:
    for key in (b"a/1", b"a/2", b"a0", b"b/1", b"a/"):
        store.set(partition, key, b"")
    assert [e.key for e in scan_prefix(store, partition, b"a/")] == [b"a/", b"a/1", b"a/2"]


def test_set_if_absent_predicate(store: Store, partition: bytes) -> None:
    store.set_if(partition, b"k", b"first", None)
    assert store.get(partition, b"k").value == b"first"
    with pytest.raises(PredicateFailed):
        store.set_if(partition, b"k", b"second", None)
    assert store.get(partition, b"k").value == b"first"


def test_set_if_with_current_predicate_succeeds_and_stale_fails(store: Store, partition: bytes) -> None:
    store.set(partition, b"k", b"v1")
    seen = store.get(partition, b"k")
    store.set_if(partition, b"k", b"v2", seen.predicate)
    assert store.get(partition, b"k").value == b"v2"
    with pytest.raises(PredicateFailed):
        store.set_if(partition, b"k", b"v3", seen.predicate)  # stale: still expects v1
    assert store.get(partition, b"k").value == b"v2"


def test_set_if_on_deleted_key_fails(store: Store, partition: bytes) -> None:
    store.set(partition, b"k", b"v1")
    seen = store.get(partition, b"k")
    store.delete(partition, b"k")
    with pytest.raises(PredicateFailed):
        store.set_if(partition, b"k", b"v2", seen.predicate)
    with pytest.raises(NotFound):
        store.get(partition, b"k")
    store.set_if(partition, b"k", b"v3", None)
    assert store.get(partition, b"k").value == b"v3"


def test_set_if_same_value_with_current_predicate_succeeds(store: Store, partition: bytes) -> None:
    store.set(partition, b"k", b"same")
    store.set_if(partition, b"k", b"same", store.get(partition, b"k").predicate)
    assert store.get(partition, b"k").value == b"same"


def test_racing_set_if_has_exactly_one_winner_each_round(
    store: Store, partition: bytes, request: pytest.FixtureRequest
) -> None:
    threads, rounds = 8, 15
    store.set_if(partition, b"counter", b"round-0", None)
    for round_no in range(rounds):
        predicate = store.get(partition, b"counter").predicate

        def value_of(w: int, r: int = round_no) -> bytes:
            return f"round-{r + 1}-w{w}".encode()

        def attempt(w: int, p: Predicate = predicate) -> None:
            store.set_if(partition, b"counter", value_of(w), p)

        outcome = race(threads, attempt)
        outcome.check(threads, store.get(partition, b"counter").value, value_of, replicated(request))


def test_racing_create_if_absent_has_exactly_one_winner(
    store: Store, partition: bytes, request: pytest.FixtureRequest
) -> None:
    threads = 8
    for round_no in range(10):
        key = f"new-{round_no}".encode()

        def create(w: int, k: bytes = key) -> None:
            store.set_if(partition, k, str(w).encode(), None)

        outcome = race(threads, create)
        outcome.check(threads, store.get(partition, key).value, lambda w: str(w).encode(), replicated(request))


def test_delete_then_get(store: Store, partition: bytes) -> None:
    store.set(partition, b"a", b"1")
    store.set(partition, b"b", b"2")
    store.delete(partition, b"a")
    with pytest.raises(NotFound):
        store.get(partition, b"a")
    assert keys_of(store, partition) == [b"b"]
    store.delete(partition, b"a")  # deleting a missing key is not an error
    store.delete(partition + b"-never-written", b"x")


def test_empty_keys_and_partitions_are_refused(store: Store, partition: bytes) -> None:
    with pytest.raises(InvalidArgument):
        store.set(partition, b"", b"v")
    with pytest.raises(InvalidArgument):
        store.set(b"", b"k", b"v")
    with pytest.raises(InvalidArgument):
        store.get(partition, b"")


def test_scan_survives_writes_during_iteration(store: Store, partition: bytes) -> None:
    keys = [f"k{i:05d}".encode() for i in range(3000)]
    bulk_set(store, partition, [(k, b"v") for k in keys])
    seen: list[bytes] = []
    for i, entry in enumerate(store.scan(partition)):
        seen.append(entry.key)
        if i == 10:
            # Delete keys far ahead (past any page boundary) and add one behind the cursor.
            for k in keys[2000:2100]:
                store.delete(partition, k)
            store.set(partition, b"k0000", b"behind")
    assert seen == sorted(set(seen)), "scan must stay strictly ascending without duplicates"
    assert set(seen) == set(keys) - set(keys[2000:2100])


SCAN_PAGE = 100


@pytest.fixture(params=KV_DRIVERS)
def small_page_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store of each driver that scans SCAN_PAGE keys a page: what a page holds is then small
    beside the data, without writing the data at the drivers' own page sizes (on Cassandra,
    100,000 writes cost most of a minute)."""
    if request.param == "mem":
        opened: Store = MemStore(page_size=SCAN_PAGE)
    elif request.param == "local":
        local = LocalDatabaseConfig(path=str(tmp_path / "metadata.db"), scan_page_size=SCAN_PAGE)
        opened = open_store(DatabaseConfig(type="local", local=local))
    else:  # the shared node's test keyspace, which exists: opening it changes no schema
        server = request.getfixturevalue("cassandra_server")
        opened = open_store(server.database_config(keyspace="silt_tests", page_size=SCAN_PAGE))
    yield opened
    opened.close()


def test_get_many_of_more_keys_than_a_page_returns_all_that_exist(small_page_store: Store, partition: bytes) -> None:
    store = small_page_store
    keys = [b"k%05d" % i for i in range(2 * SCAN_PAGE + 7)]
    bulk_set(store, partition, [(k, k[::-1]) for k in keys[::2]])  # every other key exists
    asked = keys + [b"never-%d" % i for i in range(5)]
    assert store.get_many(partition, asked) == {k: k[::-1] for k in keys[::2]}


# Not on the cluster: paging is the driver's, the same on one node, and the replica writes on
# two shared cores would cost much of the run for nothing the single-node leg does not show.
@pytest.mark.slow
def test_scan_of_20k_keys_is_complete_ordered_and_bounded_in_memory(small_page_store: Store, partition: bytes) -> None:
    store = small_page_store
    count = 20_000  # 200 pages: a scan that held them all would hold 200 times what one page does
    value = b"x" * 100
    # Inserted in shuffled order so ordering comes from the store, not from insertion.
    keys = [f"key/{i:08d}/{uuid.UUID(int=i * 7919).hex[:8]}".encode() for i in range(count)]
    shuffled = keys[::2] + keys[1::2]
    bulk_set(store, partition, [(k, value) for k in shuffled], workers=32)

    gc.collect()
    tracemalloc.start()
    try:
        previous = b""
        seen = 0
        for entry in store.scan(partition):
            assert entry.key > previous
            previous = entry.key
            seen += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    assert previous == max(keys)
    held_all = count * (len(value) + len(keys[0]))
    # All keys and values together weigh ~2.5 MB raw (far more as Python objects);
    # a paged scan holds one page at a time.
    assert peak < held_all / 3, f"scan peaked at {peak} bytes; all data is {held_all} bytes"


@pytest.mark.parametrize("size", [1, 3, 1000, 10**9])
def test_scan_chunks_are_the_scan_in_lists_of_at_most_size(store: Store, partition: bytes, size: int) -> None:
    keys = [bytes([i]) * (1 + i % 3) for i in range(1, 40)]
    for key in keys:
        store.set(partition, key, key[::-1])
    for start in (b"", b"\x05", b"\x05\x05\x05\x05", b"\xff"):
        chunks = list(store.scan_chunks(partition, start, size))
        assert all(0 < len(chunk) <= min(size, MAX_SCAN_CHUNK) for chunk in chunks)
        assert [tuple(e) for chunk in chunks for e in chunk] == [tuple(e) for e in store.scan(partition, start)]
    assert list(store.scan_chunks(partition + b"-empty", b"", size)) == []


def test_a_timestamped_delete_shadows_older_writes_arriving_after_it(store: Store, partition: bytes) -> None:
    """Last write wins by timestamp, deletes included, as on Cassandra: a delete stamped 100
    keeps its tombstone, so a put stamped 90 arriving after it stays invisible; a put stamped
    110 is the value. A delete of a key never written shadows older puts too."""
    store.apply(partition, [(b"k", b"first")], timestamp=50)
    store.apply(partition, [], [b"k", b"never"], timestamp=100)
    store.apply(partition, [(b"k", b"late"), (b"never", b"late")], timestamp=90)
    with pytest.raises(NotFound):
        store.get(partition, b"k")
    assert store.get_many(partition, [b"k", b"never"]) == {}
    assert keys_of(store, partition) == []
    assert [tuple(pair) for chunk in store.scan_chunks(partition) for pair in chunk] == []
    # A tombstone is no value to a compare-and-set: the key is absent.
    with pytest.raises(PredicateFailed):
        store.set_if(partition, b"k", b"x", Predicate(b"late"))
    store.apply(partition, [(b"k", b"newer")], timestamp=110)
    assert store.get(partition, b"k").value == b"newer"
    assert store.get_many(partition, [b"k", b"never"]) == {b"k": b"newer"}


def test_equal_timestamps_break_ties_as_cassandra_does(store: Store, partition: bytes) -> None:
    """At one timestamp a tombstone beats a value and the larger value beats the smaller,
    whatever the arrival order."""
    store.apply(partition, [(b"k", b"b")], timestamp=100)
    store.apply(partition, [(b"k", b"a")], timestamp=100)
    assert store.get(partition, b"k").value == b"b"
    store.apply(partition, [(b"k", b"c")], timestamp=100)
    assert store.get(partition, b"k").value == b"c"
    store.apply(partition, [], [b"k"], timestamp=100)
    store.apply(partition, [(b"k", b"d")], timestamp=100)
    with pytest.raises(NotFound):
        store.get(partition, b"k")


def test_an_absent_write_succeeds_over_a_tombstone(store: Store, partition: bytes) -> None:
    """Keys written by compare-and-set are never written with timestamps (docs/design/kv.md),
    but a tombstone left in a partition must not read as a value to one either."""
    store.apply(partition, [], [b"k"], timestamp=100)
    store.set_if(partition, b"k", b"v", None)
    assert store.get(partition, b"k").value == b"v"
