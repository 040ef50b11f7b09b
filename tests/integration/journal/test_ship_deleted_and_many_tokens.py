"""The shipper's saved token list never drops a token however many there are, and a deleted
repository's journal rows do not outlive it: neither its rows in the shared `graveler`
partition (creation, metadata, the deletion itself) nor those of tokens it dropped before it
was deleted, which only the shipper's list still leads to; and never while anything of it
(its record, its creation's claim, its pending deletion) is still there."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import decode_batch, position
from silt.journal.bucket import JournalBucket
from silt.journal.context import journal_context, note_repository_partition
from silt.journal.envelope import wrap
from silt.journal.record import (
    JOURNAL_PREFIX,
    STAGED_ADMISSION,
    STAGED_DELETED_AT,
    decode_record,
    record_key,
    staged_key_deleted_at,
)
from silt.journal.ship_deleted import SAFETY_SECONDS
from silt.journal.ship_tokens import REFRESH_SECONDS
from silt.journal.shipper import TOKEN_GRACE_SECONDS, Shipper, ShipResult
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv.mem import MemStore
from silt.kv.store import Store, scan_prefix
from silt.namespaces import parse_recorded
from tests.integration.journal.workload import JOURNAL_KEY, InCalls, put, raw

NOW = 1_790_000_000.0


def journal_rows(kv: Store, partition: bytes, of: str = "") -> list[Record]:
    """The journal rows of partition (only those naming repository partition `of`, if given:
    on Cassandra the shared partition holds other tests' rows too)."""
    rows = [decode_record(entry.value) for entry in scan_prefix(kv, partition, JOURNAL_PREFIX)]
    return [row for row in rows if not of or row.repository_partition == of]


def shipped_positions(adapter: LocalAdapter, namespace: str) -> set[tuple[int, str, int]]:
    bucket = JournalBucket(adapter, namespace)
    return {position(record) for key in bucket.batches() for record in decode_batch(bucket.read(key))}


# --- more than 10,000 saved tokens -------------------------------------------------------


def stale_row(kv: Store, token: str, repository: str, partition: str, ts: int) -> Record:
    """A staged write landing in token after the round that last saw it (a stale writer)."""
    record = Record(
        logical_timestamp=ts,
        writer_id="s" * 32,
        sequence=1,
        repository=repository,
        repository_partition=partition,
        event_type="object_write",
    )
    value = wrap(ts, pb.Entry(physical_address="data/late", size=1).SerializeToString())
    record.changes.append(Change(partition=token.encode(), key=b"key/late", op=Change.PUT, value=value, kind="staged"))
    kv.apply(token.encode(), [(b"key/late", value), (record_key(ts, record.writer_id, 1), record.SerializeToString())])
    return record


def test_a_token_beyond_ten_thousand_saved_ones_is_still_shipped(tmp_path: Path) -> None:
    kv = MemStore()
    adapter = LocalAdapter(tmp_path / "data")
    name, unique_id = "many", "u" * 32
    partition = f"{name}-{unique_id}"
    namespace = f"local://{name}"
    repository = pb.Repository(name=name, storage_namespace=namespace, default_branch="main", unique_id=unique_id)
    kv.set(b"graveler", b"repos/" + name.encode(), wrap(1, repository.SerializeToString()))
    # A list saved by earlier rounds: 10,000 tokens dropped within the grace period (their
    # partitions empty so far), the oldest of them a little older than the rest...
    remembered = {f"{partition}_b{i}_{i:032x}": NOW - 60 for i in range(10_000)}
    oldest = f"{partition}_b0_{0:032x}"
    remembered[oldest] = NOW - 120
    kv.set(partition.encode(), b"journal_ship/tokens", json.dumps(remembered).encode())
    # ...and a branch whose token is new.
    branch = pb.Branch(name="main", commit_id="c0", staging_token=f"{partition}_main_{1:032x}")
    kv.set(partition.encode(), b"branches/main", wrap(2, branch.SerializeToString()))

    clock = [NOW]
    shipper = Shipper(kv, adapter, hmac_key=JOURNAL_KEY, clock=lambda: clock[0])
    assert shipper.ship(name).records == 0

    # A stale writer's row lands in the oldest remembered token, within the grace period.
    late = stale_row(kv, oldest, name, partition, int(NOW * 1_000_000))
    clock[0] = NOW + 60
    assert clock[0] - remembered[oldest] < TOKEN_GRACE_SECONDS
    shipped = Shipper(kv, adapter, hmac_key=JOURNAL_KEY, clock=lambda: clock[0]).ship(name)
    assert shipped.records == 1, "a token the saved list dropped was never scanned again"
    assert journal_rows(kv, oldest.encode()) == []
    assert shipped_positions(adapter, namespace) == {position(late)}


def test_a_dropped_tokens_closed_admission_row_goes_once_no_stale_writer_can_reach_it(tmp_path: Path) -> None:
    """A dropped token keeps its admission row, closed, so that a stale conditional writer
    cannot land in it, and its guards as fences (engine/core/staging.py); the shipper deletes
    them when it forgets the token, after the grace that outlasts any writer's deadline, and
    not before."""
    kv = MemStore()
    adapter = LocalAdapter(tmp_path / "data")
    name, unique_id = "closed", "c" * 32
    partition = f"{name}-{unique_id}"
    repository = pb.Repository(
        name=name, storage_namespace=f"local://{name}", default_branch="main", unique_id=unique_id
    )
    kv.set(b"graveler", b"repos/" + name.encode(), wrap(1, repository.SerializeToString()))
    branch = pb.Branch(name="main", commit_id="c0", staging_token=f"{partition}_main_{1:032x}")
    kv.set(partition.encode(), b"branches/main", wrap(2, branch.SerializeToString()))
    dropped = f"{partition}_main_{2:032x}"
    kv.set(partition.encode(), b"journal_ship/tokens", json.dumps({dropped: NOW - 60}).encode())
    kv.set(dropped.encode(), STAGED_ADMISSION, b"2 closed")
    # Its guards, fences since the drop: what a writer whose outcome was lost reads its key's line in.
    fences = [STAGED_ADMISSION + b"obj/a", STAGED_ADMISSION + b"obj/b"]
    for fence in fences:
        kv.set(dropped.encode(), fence, b"a fence")
    # And its deletion marks, stamped (logical microseconds) ahead of any clock that deletes them.
    ahead = int((NOW + 3600) * 1e6)
    marks = [STAGED_DELETED_AT, staged_key_deleted_at(b"key/obj/a")]
    for mark in marks:
        kv.apply(dropped.encode(), [(mark, wrap(ahead, b""))], timestamp=ahead)

    clock = [NOW]
    Shipper(kv, adapter, hmac_key=JOURNAL_KEY, clock=lambda: clock[0]).ship(name)
    assert [entry.key for entry in kv.scan(dropped.encode())] == [*marks, STAGED_ADMISSION, *fences]
    clock[0] = NOW + TOKEN_GRACE_SECONDS + REFRESH_SECONDS
    Shipper(kv, adapter, hmac_key=JOURNAL_KEY, clock=lambda: clock[0]).ship(name)
    assert list(kv.scan(dropped.encode())) == []


# --- deleted repositories ----------------------------------------------------------------


def every_repository(shipper: Shipper, kv: Store, *repositories: str) -> list[ShipResult]:
    """A round over every repository (ship_all), and then what it dropped of deleted ones. On
    Cassandra, whose keyspace other tests share, the same round over these repositories only:
    others' are not this test's to ship."""
    if type(kv).__name__ != "CassandraStore":
        return shipper.ship_all()
    results = [shipper.ship(name) for name in repositories]
    shipper.swept = shipper.sweep_deleted()
    return results


Env = tuple[Graveler, LocalAdapter]


def settled_clock() -> float:
    """Now, past the sweep's safety age: every row written so far is old enough to judge."""
    return time.time() + SAFETY_SECONDS + 60


@pytest.fixture
def graveler_env(store: Store, tmp_path: Path) -> Iterator[Env]:
    adapter = LocalAdapter(tmp_path / "data")
    graveler = open_graveler(store, adapter)
    yield graveler, adapter
    graveler.close()


def test_a_deleted_repositorys_rows_are_dropped_with_it_and_not_read_again(graveler_env: Env) -> None:
    graveler, adapter = graveler_env
    kv = raw(graveler)
    gone, kept = f"gone-{uuid.uuid4().hex[:6]}", f"kept-{uuid.uuid4().hex[:6]}"
    for repo in (gone, kept):
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        put(calls, adapter, repo, "main", "a")
    record = graveler.refs.get_repository(gone).record
    partition = f"{record.name}-{record.unique_id}"
    dropped = graveler.refs.get_branch(graveler.refs.repository(gone), "main").branch.staging_token
    InCalls(graveler, gone).commit(gone, "main", "drops the first token")
    graveler.cleaner.flush(30)
    every_repository(Shipper(kv, adapter, hmac_key=JOURNAL_KEY), kv, gone, kept)
    assert journal_rows(kv, b"graveler", partition) == []  # everything shipped so far

    # A stale writer's row lands in the dropped token; the repository's metadata changes; then
    # it is deleted (and its partitions cleaned).
    stale_row(kv, dropped, gone, partition, time.time_ns() // 1000)
    InCalls(graveler, gone).repo_metadata.update(gone, {"stage": "last"}, [], NO_DEADLINE)
    with journal_context("delete_repository", "tester", gone):
        graveler.lifecycle.delete_repository(gone)
    graveler.cleaner.flush(30)
    assert len(journal_rows(kv, b"graveler", partition)) >= 3  # metadata, record deleted, claim released...
    # The deletion's clean-up dropped the saved list, and with it the stale row.
    assert journal_rows(kv, dropped.encode()) == []
    assert list(kv.scan(partition.encode() + b"-journal-ship")) == []
    put(InCalls(graveler, kept), adapter, kept, "main", "b")

    # A round once the deletion's rows are older than any write in flight can be.
    shipper = Shipper(kv, adapter, hmac_key=JOURNAL_KEY, clock=settled_clock)
    results = {result.repository: result for result in every_repository(shipper, kv, kept)}
    assert gone not in results and results[kept].records > 0
    # Nothing of the deleted repository is left to be read by the next rounds.
    assert journal_rows(kv, b"graveler", partition) == []
    assert journal_rows(kv, dropped.encode()) == []
    assert list(kv.scan(partition.encode() + b"-journal-ship")) == []
    assert partition in shipper.swept.partitions
    # The live repository is untouched and keeps shipping.
    kept_record = graveler.refs.get_repository(kept).record
    assert journal_rows(kv, b"graveler", f"{kept}-{kept_record.unique_id}") == []
    assert Shipper(kv, adapter, hmac_key=JOURNAL_KEY).ship(kept).records == 0


def test_rows_of_a_creation_in_progress_or_a_deletion_being_cleaned_stay(graveler_env: Env) -> None:
    graveler, adapter = graveler_env
    kv = raw(graveler)
    name = f"new-{uuid.uuid4().hex[:6]}"
    record = pb.Repository(
        name=name, storage_namespace=f"local://{name}", default_branch="main", unique_id=uuid.uuid4().hex
    )
    partition = f"{name}-{record.unique_id}"
    claims = graveler.lifecycle.claims
    # Every round past the safety age of every row: only the live state keeps them.
    with journal_context("create_repository", "tester", name):
        # A creation that has claimed its namespace and not yet written its record.
        note_repository_partition(name, partition.encode())
        claim = claims.claim(parse_recorded(record.storage_namespace), record)
    shipper = Shipper(kv, adapter, hmac_key=JOURNAL_KEY, clock=settled_clock)
    every_repository(shipper, kv)
    assert len(journal_rows(kv, b"graveler", partition)) == 1

    # A deletion whose partitions are not cleaned yet: its to_delete entry is there.
    with journal_context("delete_repository", "tester", name):
        note_repository_partition(name, partition.encode())
        graveler.refs.kv.set(b"graveler", b"to_delete/" + partition.encode(), record.SerializeToString())
        claims.release(claim)
    every_repository(shipper, kv)
    assert len(journal_rows(kv, b"graveler", partition)) == 3 and partition not in shipper.swept.partitions

    with journal_context("repository_cleanup", "system", name):
        note_repository_partition(name, partition.encode())
        graveler.refs.kv.delete(b"graveler", b"to_delete/" + partition.encode())
    every_repository(shipper, kv)
    assert journal_rows(kv, b"graveler", partition) == []
    assert partition in shipper.swept.partitions
