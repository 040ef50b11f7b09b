"""The lease that keeps a repository's restores one at a time (engine/features/leases.py)."""

from __future__ import annotations

import json
import time

import pytest

from engine.features.leases import Lease
from silt.errors import AlreadyExists
from silt.kv.mem import MemStore

PARTITION, KEY = b"repo-u1", b"refs_restore/lease"


def _held(kv: MemStore) -> dict[str, object]:
    held: dict[str, object] = json.loads(kv.get(PARTITION, KEY).value)
    return held


def test_one_holder_at_a_time_and_release_frees_it() -> None:
    kv = MemStore()
    first = Lease.take(kv, PARTITION, KEY, "a restore")
    with pytest.raises(AlreadyExists, match="a restore is already running"):
        Lease.take(kv, PARTITION, KEY, "a restore")
    first.release()
    assert list(kv.scan(PARTITION)) == []  # nothing left behind
    with Lease.take(kv, PARTITION, KEY, "a restore"):
        pass
    assert list(kv.scan(PARTITION)) == []


def test_a_dead_holders_lease_expires_and_is_taken_over() -> None:
    kv = MemStore()
    # What a holder that died leaves: a record no one renews, its term passed.
    kv.set(PARTITION, KEY, json.dumps({"holder": "dead", "until": time.time() - 1}).encode())
    with Lease.take(kv, PARTITION, KEY, "a restore") as taken:
        assert _held(kv)["holder"] != "dead" and not taken.lost
    # An unreadable record counts as expired too.
    kv.set(PARTITION, KEY, b"not json")
    Lease.take(kv, PARTITION, KEY, "a restore").release()


def test_a_held_lease_is_renewed_past_its_term() -> None:
    kv = MemStore()
    with Lease.take(kv, PARTITION, KEY, "a restore", seconds=0.3):
        time.sleep(0.6)  # twice its term: renewed meanwhile
        with pytest.raises(AlreadyExists):
            Lease.take(kv, PARTITION, KEY, "a restore", seconds=0.3)


def test_a_lease_taken_over_is_lost_and_never_written_over() -> None:
    kv = MemStore()
    stale = Lease.take(kv, PARTITION, KEY, "a restore", seconds=0.3, clock=lambda: time.time() - 10)
    # Its record says it expired ten seconds ago: another holder takes it over.
    newer = Lease.take(kv, PARTITION, KEY, "a restore")
    deadline = time.monotonic() + 5
    while not stale.lost:
        assert time.monotonic() < deadline, "the stale holder did not notice"
        time.sleep(0.02)
    stale.release()
    assert kv.get(PARTITION, KEY)  # the new holder's record stays
    newer.release()
    assert list(kv.scan(PARTITION)) == []
