"""Dropping a staging token, at full speed and paced."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from engine.core import staging as staging_module
from engine.core.model import StagingToken
from engine.core.staging import StagingStore
from engine.core.values import Value
from silt.config import DatabaseConfig
from silt.kv import open_store
from silt.kv.store import AllOf, Condition, Timestamp

DOOMED = StagingToken("doomed")
KEPT = StagingToken("kept")


def filled() -> StagingStore:
    staging = StagingStore(open_store(DatabaseConfig(type="mem")))
    for i in range(2000):
        staging.set(DOOMED, f"k{i:05d}".encode(), Value(b"id", b"data", False))
    staging.set(KEPT, b"k", Value(b"id", b"data", False))
    return staging


def test_drop_deletes_every_staged_value_of_the_token_only() -> None:
    staging = filled()
    staging.drop(DOOMED)
    assert staging.is_empty(DOOMED)
    assert [kv.key for kv in staging.scan(KEPT)] == [b"k"]


def test_a_paced_drop_rests_as_long_as_each_burst_worked(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    rests: list[float] = []

    def perf_counter() -> float:
        clock[0] += 0.0001  # every reading of the clock: 0.1 ms of work
        return clock[0]

    # The module's own view of time, not the time module: other threads of the run (a KV
    # driver's event loop) read the clock and sleep too, and must neither tick nor rest here.
    monkeypatch.setattr(staging_module, "time", SimpleNamespace(perf_counter=perf_counter, sleep=rests.append))
    staging = filled()
    staging.drop(DOOMED, pace=0.001)
    assert staging.is_empty(DOOMED)
    assert [kv.key for kv in staging.scan(KEPT)] == [b"k"]
    # 2,000 deletes at 0.1 ms each, in bursts of about 1 ms, each followed by an equal rest.
    assert 150 <= len(rests) <= 250
    assert all(0.001 <= rest < 0.0015 for rest in rests)


def test_a_prefix_reset_deletes_long_keys_in_writes_of_bounded_bytes() -> None:
    """Each deleted key is carried four times by its write (the delete, its own deletion mark,
    both again in the journal row): long keys go fewer to a write, under Cassandra's batch limit."""
    inner = open_store(DatabaseConfig(type="mem"))
    deleted_bytes: list[int] = []
    apply = inner.apply

    def recording(
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        deleted_bytes.append(sum(len(key) for key in deletes))
        apply(partition, puts, deletes, condition, timestamp)

    inner.apply = recording  # type: ignore[method-assign]
    staging = StagingStore(inner)
    keys = [b"p/" + bytes([65 + i % 26]) * 1000 + b"%02d" % i for i in range(40)]
    staging.set_many(DOOMED, [(key, Value(b"id", b"data", False)) for key in keys])
    deleted_bytes.clear()
    staging.drop_under(DOOMED, b"p/")
    assert staging.is_empty(DOOMED)
    assert 0 < max(deleted_bytes) <= staging_module._DELETE_KEY_BYTES
