"""Staged values read as columns are the values scan reads, one by one."""

from __future__ import annotations

import pytest

from engine.core.model import StagingToken
from engine.core.staging import KEY_PREFIX, StagingStore
from engine.core.values import TOMBSTONE, Value
from silt.config import DatabaseConfig
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.clock import HybridLogicalClock
from silt.journal.context import journal_context
from silt.journal.record import AFTER_JOURNAL
from silt.journal.store import JournaledStore
from silt.kv import open_store

TOKEN = StagingToken("token")


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_columns_are_the_scan_from_any_start(size: int) -> None:
    staging = StagingStore(open_store(DatabaseConfig(type="mem")))
    with journal_context("stage", "test", "repo"):
        for i in range(20):
            staging.set(TOKEN, f"k{i:03d}".encode(), TOMBSTONE if i % 5 == 0 else Value(b"id%d" % i, b"d%d" % i))
        # A conditional writer's guard and journal rows (before key/ in the partition), a row
        # after key/ and another token's value: none of them is a staged value of the token.
        staging.set_if(TOKEN, b"k100", Value(b"g", b"g"), staging.read_for_write(TOKEN, b"k100"))
        staging.set(StagingToken("other"), b"k005", Value(b"x", b"x"))
    staging.kv.raw.set(TOKEN.encode(), b"later", b"not a staged value")
    for start in (b"", b"k007", b"k0191", b"k100", b"z"):
        columns = list(staging.scan_columns(TOKEN, start, size))
        assert all(c.keys and len(c.keys) <= size for c in columns)
        assert [kv for c in columns for kv in c.values()] == list(staging.scan(TOKEN, start))


def _five_journaled(rewrite: bytes | None = None) -> tuple[StagingStore, int]:
    """A reader, on a clock at 0, of five values staged by a writer (then rewrite, if given,
    staged again), and the newest of their timestamps."""
    kv = open_store(DatabaseConfig(type="mem"))
    writer = StagingStore(JournaledStore(kv, clock=HybridLogicalClock()))
    with journal_context("stage", "test", "repo"):
        for i in range(5):
            writer.set(TOKEN, f"k{i}".encode(), Value(b"id", b"d"))
        if rewrite is not None:
            writer.set(TOKEN, rewrite, Value(b"id", b"again"))
    newest = max(writer.kv.get_stamped(TOKEN.encode(), f"key/k{i}".encode())[1] for i in range(5))
    return StagingStore(JournaledStore(kv, clock=HybridLogicalClock(wall=lambda: 0))), newest


def test_columns_move_the_clock_past_every_value_they_hand_out() -> None:
    """As the journaled store's reads do: a value read is never newer than the clock."""
    reader, newest = _five_journaled()
    assert [len(c.keys) for c in reader.scan_columns(TOKEN, b"", 2)] == [2, 2, 1]
    assert reader.kv.clock.now() > newest


def test_staged_keys_sort_after_every_journal_row() -> None:
    # scan_columns scans the store under the journal from a staged key on, meeting none of them.
    assert AFTER_JOURNAL <= KEY_PREFIX


def test_columns_read_values_written_before_journaling_beside_journaled_ones() -> None:
    """A chunk holding a value stored without its journal envelope is read value by value."""
    kv = open_store(DatabaseConfig(type="mem"))
    staging = StagingStore(JournaledStore(kv, clock=HybridLogicalClock()))
    with journal_context("stage", "test", "repo"):
        for i in range(6):
            staging.set(TOKEN, f"k{i}".encode(), Value(b"id%d" % i, b"d%d" % i))
    legacy = pb.StagedValue(identity=b"old", data=b"legacy").SerializeToString()
    kv.set(TOKEN.encode(), KEY_PREFIX + b"k3", legacy)
    kv.set(TOKEN.encode(), KEY_PREFIX + b"k9", pb.StagedValue(tombstone=True).SerializeToString())
    expected = list(staging.scan(TOKEN))
    assert expected[3].value == Value(b"old", b"legacy") and expected[-1].value.tombstone
    for size in (2, 3, 100):
        columns = list(staging.scan_columns(TOKEN, b"", size))
        assert [kv for c in columns for kv in c.values()] == expected


@pytest.mark.parametrize("size", [2, 100])
def test_columns_without_identities_leave_them_empty(size: int) -> None:
    staging = StagingStore(open_store(DatabaseConfig(type="mem")))
    with journal_context("stage", "test", "repo"):
        for i in range(7):
            staging.set(TOKEN, f"k{i}".encode(), TOMBSTONE if i == 4 else Value(b"id%d" % i, b"d%d" % i))
    full = list(staging.scan_columns(TOKEN, b"", size))
    bare = list(staging.scan_columns(TOKEN, b"", size, identities=False))
    assert [(c.keys, c.data, c.tombstones) for c in bare] == [(c.keys, c.data, c.tombstones) for c in full]
    assert all(identity == b"" for c in bare for identity in c.identities)
    assert [len(c.identities) for c in bare] == [len(c.keys) for c in bare]


def test_columns_move_the_clock_past_the_newest_value_wherever_it_sorts() -> None:
    reader, newest = _five_journaled(rewrite=b"k1")  # the newest, not the last key
    assert newest == reader.kv.get_stamped(TOKEN.encode(), b"key/k1")[1]
    assert len(next(reader.scan_columns(TOKEN, b"", 100)).keys) == 5
    assert reader.kv.clock.now() > newest
