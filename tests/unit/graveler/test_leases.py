"""The lease that keeps a repository's restores one at a time (engine/features/leases.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from engine.features.leases import Lease
from engine.features.lifecycle import RESTORE_LEASE
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig
from silt.errors import Aborted, AlreadyExists
from silt.kv import open_store
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


def test_check_held_stops_work_once_the_lease_is_lost_or_past_its_term() -> None:
    kv = MemStore()
    now = [1000.0]
    with Lease.take(kv, PARTITION, KEY, "a restore", seconds=30, clock=lambda: now[0]) as lease:
        lease.check_held()  # held, within its term
        now[0] += 31  # paused past the term without a renewal: another may take it any moment
        with pytest.raises(Aborted, match="a restore lost its lease"):
            lease.check_held()
    with Lease.take(kv, PARTITION, KEY, "a restore") as taken:
        taken.lost = True  # what the renewal says when another holder took it over
        with pytest.raises(Aborted):
            taken.check_held()


def test_a_restore_that_lost_its_lease_stops_before_writing(tmp_path: Path) -> None:
    graveler = open_graveler(open_store(DatabaseConfig(type="mem")), LocalAdapter(tmp_path / "data"))
    try:
        lifecycle = graveler.lifecycle
        lifecycle.create_repository("repo", f"local://{tmp_path}/data/ns", "main", False)
        graveler.create_branch("repo", "dev", "main")
        graveler.create_tag("repo", "v1", "main")
        dumped = lifecycle.dump_refs(graveler.refs.repository("repo"))
        lifecycle.delete_repository("repo")
        lifecycle.clean_deleted_repositories()
        lifecycle.create_repository("copy", f"local://{tmp_path}/data/ns", "", True)
        copy = graveler.refs.repository("copy")
        # A holder paused past its term: by its own clock the lease ran out before any write.
        now = [time.time()]
        with Lease.take(graveler.refs.kv, copy.partition, RESTORE_LEASE, "a restore", clock=lambda: now[0]) as lease:
            now[0] += 60
            with pytest.raises(Aborted, match="lost its lease"):
                lifecycle.restore_refs(copy, dumped.location, lease)
        assert list(graveler.refs.list_branches(copy)) == [] and list(graveler.refs.list_tags(copy)) == []
        # With the lease held, the same restore writes everything.
        restored = lifecycle.restore_refs(copy, dumped.location)
        assert (restored.branches, restored.tags) == (2, 1)
    finally:
        graveler.close()
