"""JournaledStore on every KV driver: each journaled mutation and its journal row commit together."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.errors import InvalidArgument, PredicateFailed, Unavailable
from silt.journal import envelope
from silt.journal.clock import HybridLogicalClock, wall_micros
from silt.journal.context import journal_context
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.store import JournaledStore, raw_store
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv import Store
from silt.kv.store import open_store, scan_prefix


@pytest.fixture
def partition() -> bytes:
    return b"p-" + uuid.uuid4().hex.encode()


def records(store: Store, partition: bytes) -> list[Record]:
    """The partition's journal records in row-key order (= logical time order)."""
    return [decode_record(e.value) for e in scan_prefix(raw_store(store), partition, JOURNAL_PREFIX)]


class SkewedWall:
    """A wall clock offset from the real one, as another machine's might be."""

    def __init__(self, offset_us: int) -> None:
        self.offset_us = offset_us

    def __call__(self) -> int:
        return wall_micros() + self.offset_us


def test_a_write_in_a_context_is_stored_with_its_record(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store)
    with journal_context("branch_create", "alice", "repo") as context:
        context.repository_partition = "repo-1"
        journaled.set_if(partition, b"branches/main", b"value", None)
    assert journaled.get(partition, b"branches/main").value == b"value"
    stored = store.get(partition, b"branches/main").value
    timestamp, value = envelope.unwrap(stored)
    assert value == b"value"
    [record] = records(store, partition)
    assert record.logical_timestamp == timestamp
    assert (record.event_type, record.client_id, record.repository, record.repository_partition) == (
        "branch_create",
        "alice",
        "repo",
        "repo-1",
    )
    assert record.writer_id == journaled.clock.writer_id
    [change] = record.changes
    assert (change.partition, change.key, change.op, change.value, change.kind) == (
        partition,
        b"branches/main",
        Change.PUT,
        stored,
        "branch",
    )
    # The journal row is invisible through the journaled store.
    assert [e.key for e in journaled.scan(partition)] == [b"branches/main"]


def test_deletes_are_journaled(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store)
    with journal_context("tag_delete", "bob", "repo"):
        journaled.set(partition, b"tags/v1", b"c1")
        journaled.delete(partition, b"tags/v1")
    assert [e.key for e in journaled.scan(partition)] == []
    put, delete = records(store, partition)
    assert put.changes[0].op == Change.PUT
    assert (delete.changes[0].op, delete.changes[0].key, delete.changes[0].value) == (Change.DELETE, b"tags/v1", b"")
    assert delete.logical_timestamp > put.logical_timestamp


def test_writes_outside_a_context_are_enveloped_but_not_journaled(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store)
    journaled.set(partition, b"k", b"v")
    assert envelope.unwrap(store.get(partition, b"k").value)[1] == b"v"
    assert records(store, partition) == []


def test_refused_conditions_leave_no_record(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store)
    with journal_context("commit", "alice", "repo"):
        journaled.set_if(partition, b"branches/main", b"v1", None)
        stale = journaled.get(partition, b"branches/main").predicate
        journaled.set_if(partition, b"branches/main", b"v2", stale)
        with pytest.raises(PredicateFailed):  # if_absent on an existing key
            journaled.set_if(partition, b"branches/main", b"v3", None)
        with pytest.raises(PredicateFailed):  # a lost compare-and-set
            journaled.set_if(partition, b"branches/main", b"v4", stale)
    assert journaled.get(partition, b"branches/main").value == b"v2"
    assert [envelope.unwrap(r.changes[0].value)[1] for r in records(store, partition)] == [b"v1", b"v2"]


def test_legacy_values_read_as_they_are_and_can_be_replaced(store: Store, partition: bytes) -> None:
    store.set(partition, b"branches/main", b"\x0a\x04main")  # written before the journal existed
    journaled = JournaledStore(store)
    found = journaled.get(partition, b"branches/main")
    assert found.value == b"\x0a\x04main"
    with journal_context("commit", "alice", "repo"):
        journaled.set_if(partition, b"branches/main", b"new", found.predicate)
    assert journaled.get(partition, b"branches/main").value == b"new"


def test_journal_keys_belong_to_the_journal(store: Store, partition: bytes) -> None:
    with pytest.raises(InvalidArgument):
        JournaledStore(store).set(partition, JOURNAL_PREFIX + b"x", b"v")


def test_disabled_journal_writes_as_before(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store, enabled=False)
    with journal_context("commit", "alice", "repo"):
        journaled.set(partition, b"k", b"plain")
    assert store.get(partition, b"k").value == b"plain"
    assert records(store, partition) == []


def test_a_compare_and_set_chain_is_ordered_whatever_the_writers_clocks(store: Store, partition: bytes) -> None:
    """Writers whose clocks are 10 s apart take turns updating a ref: each update's record is
    stamped after the one it replaced, because the writer observed that value's timestamp."""
    ahead = JournaledStore(store, HybridLogicalClock(SkewedWall(+10_000_000)))
    behind = JournaledStore(store, HybridLogicalClock(SkewedWall(-10_000_000)))
    writers = [ahead, behind]
    with journal_context("commit", "alice", "repo"):
        ahead.set_if(partition, b"branches/main", b"0", None)
    done = threading.Barrier(len(writers) * 2)
    errors: list[BaseException] = []

    def increment(journaled: JournaledStore, times: int) -> None:
        try:
            with journal_context("commit", "alice", "repo"):
                applied = 0
                while applied < times:
                    found = journaled.get(partition, b"branches/main")
                    try:
                        journaled.set_if(partition, b"branches/main", b"%d" % (int(found.value) + 1), found.predicate)
                        applied += 1
                    except PredicateFailed:
                        continue
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.wait(timeout=120)

    threads = [threading.Thread(target=increment, args=(w, 25)) for w in writers for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    replayed = [int(envelope.unwrap(r.changes[0].value)[1]) for r in records(store, partition)]
    # In logical-time order, the records replay the increments in the order they happened.
    assert replayed == list(range(101))
    assert ahead.get(partition, b"branches/main").value == b"100"


def test_blind_writes_keep_the_value_the_journal_orders_last(store: Store, partition: bytes) -> None:
    """A writer whose clock is behind writes after one whose clock is ahead: the later write is
    stamped after the earlier (it read the key's stamp first) and is the value kept, and the
    journal orders it last, so replaying the journal gives what KV shows."""
    ahead = JournaledStore(store, HybridLogicalClock(SkewedWall(+10_000_000)))
    behind = JournaledStore(store, HybridLogicalClock(SkewedWall(-10_000_000)))
    with journal_context("object_write", "alice", "repo"):
        ahead.set(partition, b"key/a", b"from-ahead")
        behind.set(partition, b"key/a", b"from-behind")
    last = records(store, partition)[-1]
    assert envelope.unwrap(last.changes[0].value)[1] == b"from-behind"
    assert ahead.get(partition, b"key/a").value == b"from-behind"


def test_concurrent_blind_writers_agree_with_the_journal(store: Store, partition: bytes) -> None:
    clocks = [HybridLogicalClock(SkewedWall(offset)) for offset in (-3_000_000, 0, +3_000_000)]
    writers = [JournaledStore(store, clock) for clock in clocks]
    keys = [b"key/%d" % i for i in range(5)]

    def write(n: int, journaled: JournaledStore) -> None:
        with journal_context("object_write", "alice", "repo"):
            for i in range(40):
                journaled.set(partition, keys[i % len(keys)], b"w%d-%d" % (n, i))

    threads = [threading.Thread(target=write, args=(n, w)) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    # Replayed in the journal's order, except that two writers may stamp one key alike (each one
    # past the same stamp it read, neither acknowledged before the other was sent): the store
    # keeps the larger stored value of such a tie, and so does rebuild (docs/design/journal.md,
    # "Ties"). With three skewed clocks writing the same five keys, ties do happen.
    replayed: dict[bytes, tuple[int, bytes]] = {}
    for record in records(store, partition):
        change = record.changes[0]
        previous = replayed.get(change.key)
        if previous is None or (record.logical_timestamp, change.value) > previous:
            replayed[change.key] = (record.logical_timestamp, change.value)
    assert len(records(store, partition)) == 120
    assert {k: envelope.unwrap(v)[1] for k, (_, v) in replayed.items()} == {
        e.key: e.value for e in writers[0].scan(partition)
    }


def test_raw_drop_removes_values_and_journal_rows(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store)
    with journal_context("object_write", "alice", "repo"):
        journaled.set(partition, b"key/a", b"1")
    raw = raw_store(journaled)
    assert raw is store
    for entry in raw.scan(partition):
        raw.delete(partition, entry.key)
    assert list(store.scan(partition)) == []


@pytest.fixture
def local_store(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    path = tmp_path / "metadata.db"
    opened = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(path))))
    yield opened, path
    opened.close()


def test_a_failed_journal_write_fails_the_mutation(local_store: tuple[Store, Path]) -> None:
    """The database refuses journal rows (as a full disk would refuse any row): the value
    written in the same apply must not land either."""
    store, path = local_store
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER refuse_journal BEFORE INSERT ON kv WHEN substr(NEW.key, 1, 8) = CAST('journal/' AS BLOB) "
            "BEGIN SELECT RAISE(ABORT, 'journal refused'); END"
        )
    journaled = JournaledStore(store)
    partition = b"p"
    journaled.set(partition, b"branches/main", b"before")  # outside a context: no journal row
    predicate = journaled.get(partition, b"branches/main").predicate
    with journal_context("commit", "alice", "repo"):
        with pytest.raises(Unavailable):
            journaled.set_if(partition, b"branches/main", b"after", predicate)
        with pytest.raises(Unavailable):
            journaled.set(partition, b"key/x", b"staged")
        with pytest.raises(Unavailable):
            journaled.delete(partition, b"branches/main")
    assert [(e.key, e.value) for e in journaled.scan(partition)] == [(b"branches/main", b"before")]


def test_scans_skip_the_journal_rows_and_keep_key_order(store: Store, partition: bytes) -> None:
    journaled = JournaledStore(store)
    with journal_context("commit", "alice", "repo"):
        for key in (b"commits/1", b"commits/2", b"jz", b"journ", b"pulls/1", b"tags/a"):
            journaled.set(partition, key, key.upper())
    assert len(records(store, partition)) == 6
    assert [(e.key, e.value) for e in journaled.scan(partition)] == [
        (b"commits/1", b"COMMITS/1"),
        (b"commits/2", b"COMMITS/2"),
        (b"journ", b"JOURN"),
        (b"jz", b"JZ"),
        (b"pulls/1", b"PULLS/1"),
        (b"tags/a", b"TAGS/A"),
    ]
    assert [e.key for e in journaled.scan(partition, b"journal/0")] == [b"jz", b"pulls/1", b"tags/a"]
    assert [e.key for e in journaled.scan(partition, b"pulls/")] == [b"pulls/1", b"tags/a"]

    # In lists of any size, the lists that reach into the journal rows included.
    expected = [(e.key, e.value) for e in journaled.scan(partition)]
    for size in (1, 2, 3, 4, 1000):
        chunks = list(journaled.scan_chunks(partition, b"", size))
        assert all(0 < len(chunk) <= size for chunk in chunks)
        assert [(key, value) for chunk in chunks for key, value in chunk] == expected


def test_a_scan_moves_the_clock_past_every_value_it_hands_out(store: Store, partition: bytes) -> None:
    ahead = JournaledStore(store, HybridLogicalClock(SkewedWall(10_000_000)))
    ahead.set(partition, b"branches/a", b"x")
    store.set(partition, b"branches/b", b"legacy")  # no envelope: timestamp 0
    stamp = envelope.unwrap(store.get(partition, b"branches/a").value)[0]
    reader = JournaledStore(store, HybridLogicalClock())
    assert [(e.key, e.value) for e in reader.scan(partition)] == [(b"branches/a", b"x"), (b"branches/b", b"legacy")]
    assert reader.clock.now() > stamp


def test_a_ref_deleted_after_a_compare_and_set_stays_deleted_whatever_the_writers_clock(
    store: Store, partition: bytes
) -> None:
    """On Cassandra a compare-and-set's write time is the coordinator's clock: a delete of the
    same key stamped by a writer whose clock is behind must still sort after it."""
    behind = JournaledStore(store, HybridLogicalClock(SkewedWall(-10_000_000)))
    with journal_context("delete_branch", "alice", "repo"):
        behind.set_if(partition, b"branches/dev", b"v1", None)
        found = behind.get(partition, b"branches/dev")
        behind.set_if(partition, b"branches/dev", b"v2", found.predicate)
        behind.delete(partition, b"branches/dev")
    assert [e.key for e in behind.scan(partition)] == []
    assert [c.op for r in records(store, partition) for c in r.changes] == [Change.PUT, Change.PUT, Change.DELETE]
