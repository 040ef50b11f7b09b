"""The hybrid logical clock, journal row keys and the value envelope."""

from __future__ import annotations

import logging
import threading

import pytest
from prometheus_client import REGISTRY

from silt.errors import InvalidArgument
from silt.journal import envelope
from silt.journal.clock import MAX_FORWARD_US, HybridLogicalClock
from silt.journal.record import (
    JOURNAL_PREFIX,
    decode_record,
    encode_record,
    key_kind,
    parse_record_key,
    record_key,
)
from silt.journal.v1.journal_pb2 import Change, Record


class FakeWall:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_clock_follows_the_wall_and_never_goes_back() -> None:
    wall = FakeWall(1_000)
    clock = HybridLogicalClock(wall)
    assert clock.now() == 1_000
    assert clock.now() == 1_001  # same wall reading: still strictly increasing
    wall.now = 500  # the wall clock stepped back
    assert clock.now() == 1_002
    wall.now = 5_000
    assert clock.now() == 5_000


def test_clock_moves_past_what_it_observes() -> None:
    clock = HybridLogicalClock(FakeWall(1_000))
    clock.observe(9_000)
    assert clock.now() == 9_001
    clock.observe(10)  # older than what it has: no effect
    assert clock.now() == 9_002


def far_ahead_count() -> float:
    return REGISTRY.get_sample_value("silt_journal_clock_far_ahead_total") or 0.0


def test_a_stamp_far_ahead_is_observed_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    """Refusing a stamp far ahead would stamp a later write before the value it read; it is
    observed (the order holds) and counted and logged (the clock it dragged forward shows)."""
    wall = 1_000_000_000
    clock = HybridLogicalClock(lambda: wall)
    before = far_ahead_count()
    clock.observe(wall + MAX_FORWARD_US // 2)
    assert far_ahead_count() == before
    far = wall + MAX_FORWARD_US + 1_000_000
    with caplog.at_level(logging.ERROR, logger="silt.journal.clock"):
        clock.observe(far)
    assert clock.now() > far
    assert far_ahead_count() == before + 1
    assert [record.levelno for record in caplog.records if record.name == "silt.journal.clock"] == [logging.ERROR]


def test_clock_hands_out_unique_timestamps_across_threads() -> None:
    clock = HybridLogicalClock(FakeWall(1))
    seen: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        mine = [clock.now() for _ in range(2_000)]
        with lock:
            seen.extend(mine)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(seen) == 8_000
    assert len(set(seen)) == 8_000


def test_writer_ids_differ_per_clock_and_sequences_count_up() -> None:
    a, b = HybridLogicalClock(), HybridLogicalClock()
    assert a.writer_id != b.writer_id
    assert [a.next_sequence() for _ in range(3)] == [0, 1, 2]


def test_record_keys_sort_by_time_then_writer_then_sequence() -> None:
    keys = [
        record_key(2, "aa", 0),
        record_key(1, "bb", 7),
        record_key(1, "aa", 10),
        record_key(1, "aa", 9),
        record_key(0x10, "aa", 0),
    ]
    assert sorted(keys) == [
        record_key(1, "aa", 9),
        record_key(1, "aa", 10),
        record_key(1, "bb", 7),
        record_key(2, "aa", 0),
        record_key(0x10, "aa", 0),
    ]
    assert record_key(0x1234, "w1", 5) == b"journal/0000000000001234/w1/0000000000000005"
    assert all(k.startswith(JOURNAL_PREFIX) for k in keys)
    assert parse_record_key(record_key(77, "writer", 3)) == (77, "writer", 3)


@pytest.mark.parametrize("bad", [b"journal/x/w/1", b"journal/1/w", b"other/1/w/1"])
def test_malformed_record_keys_are_refused(bad: bytes) -> None:
    with pytest.raises(InvalidArgument):
        parse_record_key(bad)


def test_writer_ids_with_a_slash_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        record_key(1, "a/b", 0)


def test_records_round_trip_and_corrupt_ones_are_typed_errors() -> None:
    record = Record(
        logical_timestamp=5,
        writer_id="w",
        sequence=1,
        client_id="alice",
        repository="r",
        repository_partition="r-1",
        event_type="commit",
        changes=[Change(partition=b"r-1", key=b"branches/main", op=Change.PUT, value=b"v", kind="branch")],
    )
    assert decode_record(encode_record(record)) == record
    with pytest.raises(InvalidArgument):
        decode_record(b"\xff\xff\xff")


def test_key_kinds() -> None:
    assert key_kind(b"branches/main") == "branch"
    assert key_kind(b"key/a/b.parquet") == "staged"
    assert key_kind(b"pull_comments/1/2") == "pull_comment"
    assert key_kind(b"pulls/1") == "pull"
    assert key_kind(b"gc/rules") == "gc_rules"
    assert key_kind(b"settings/branch_protection") == "settings"
    assert key_kind(b"repos/r") == "repository"
    assert key_kind(b"ns_claims/local://x/\x00id") == "ns_claim"
    assert key_kind(b"unknown") == "other"


def test_envelope_round_trips_and_legacy_values_have_timestamp_zero() -> None:
    assert envelope.unwrap(envelope.wrap(123, b"payload")) == (123, b"payload")
    assert envelope.unwrap(envelope.wrap(1, b"")) == (1, b"")
    legacy = b"\x0a\x04main"  # a protobuf message written before the journal existed
    assert envelope.unwrap(legacy) == (0, legacy)
    assert envelope.unwrap(b"") == (0, b"")
