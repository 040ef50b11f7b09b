"""What a shipped batch tells rebuild about staging tokens: which partitions hold staged rows."""

from __future__ import annotations

from silt.journal.batch import ShippedRecord, encode_batch, token_facts
from silt.journal.record import GUARD_KIND, STAGED_KIND, key_kind, record_key
from silt.journal.v1.journal_pb2 import Change, Record

T0 = 1_763_900_000_000_000


def _shipped(sequence: int, partition: bytes, key: bytes, repository: str = "repo1") -> ShippedRecord:
    record = Record(
        logical_timestamp=T0 + sequence,
        writer_id="w" * 32,
        sequence=sequence,
        repository=repository,
        repository_partition="repo1-u1",
        event_type="object_write",
        changes=[Change(partition=partition, key=key, op=Change.PUT, value=b"v", kind=key_kind(key))],
    )
    return ShippedRecord(partition, record_key(record.logical_timestamp, record.writer_id, sequence), record)


def test_a_token_holding_only_a_guard_is_a_staged_partition() -> None:
    """A conditional writer that died between its guard and its value leaves only the guard's
    record in its token: rebuild must still know the token, to skip it once it is dropped."""
    assert key_kind(b"guard/a") == GUARD_KIND and key_kind(b"key/a") == STAGED_KIND
    batch = encode_batch(
        [
            _shipped(1, b"repo1-u1_main_t1", b"key/a"),
            _shipped(2, b"repo1-u1_main_t2", b"guard/b"),
            _shipped(3, b"repo1-u1", b"commits/c"),
        ]
    )
    facts = token_facts(batch, "repo1")
    assert facts.staged == {("repo1", b"repo1-u1_main_t1"), ("repo1", b"repo1-u1_main_t2")}
