"""A deleted repository's journal leftovers under races: the sweep never judges a repository
gone from reads that may miss a write still being committed, a shipper racing the deletion
leaves no saved token behind, the deletion's clean-up drops the saved token list itself, and
the list's keys are deleted only by compare-and-set (they are written by it)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import journal_context, note_repository_partition
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.ship_deleted import SAFETY_SECONDS, DeletedRepositories
from silt.journal.ship_tokens import ShippedTokens
from silt.journal.shipper import Shipper
from silt.kv.forwarding import ForwardingStore
from silt.kv.mem import MemStore
from silt.kv.store import AllOf, Condition, Entry, Store, Timestamp, scan_prefix
from silt.namespaces import parse_recorded
from tests.integration.journal.test_ship_deleted_and_many_tokens import stale_row
from tests.integration.journal.workload import JOURNAL_KEY, InCalls, put, raw

CLAIMS = b"ns_claims/"


def shared_rows(kv: Store, partition: str) -> list[bytes]:
    return [
        entry.key
        for entry in scan_prefix(kv, b"graveler", JOURNAL_PREFIX)
        if decode_record(entry.value).repository_partition == partition
    ]


class ClaimsNotYetSeen(ForwardingStore):
    """A store whose scans of namespace claims miss them while `hiding`: on Cassandra, the scan of
    the claims reading replicas that a creation's compare-and-set batch (its claim and its journal
    row) has not reached yet, while the scan of the journal rows read one it has."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.hiding = False

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        for entry in self.inner.scan(partition, start):
            if self.hiding and partition == b"graveler" and entry.key.startswith(CLAIMS):
                continue
            yield entry


@pytest.fixture
def graveler_on(tmp_path: Path) -> Iterator[tuple[Graveler, ClaimsNotYetSeen, LocalAdapter]]:
    kv = ClaimsNotYetSeen(MemStore())
    adapter = LocalAdapter(tmp_path / "data")
    graveler = open_graveler(kv, adapter)
    yield graveler, kv, adapter
    graveler.close()


def test_a_creation_whose_claim_a_scan_misses_keeps_its_rows_and_claim(
    graveler_on: tuple[Graveler, ClaimsNotYetSeen, LocalAdapter],
) -> None:
    graveler, kv, _ = graveler_on
    name = f"new-{uuid.uuid4().hex[:6]}"
    record = pb.Repository(
        name=name, storage_namespace=f"local://{name}", default_branch="main", unique_id=uuid.uuid4().hex
    )
    partition = f"{name}-{record.unique_id}"
    with journal_context("create_repository", "tester", name):
        note_repository_partition(name, partition.encode())
        claim = graveler.lifecycle.claims.claim(parse_recorded(record.storage_namespace), record)
    assert len(shared_rows(kv, partition)) == 1

    # The sweep reads the claim's journal row, then the live state from replicas the claim has
    # not reached yet.
    kv.hiding = True
    swept = DeletedRepositories(kv).sweep()
    assert partition not in swept.partitions
    assert len(shared_rows(kv, partition)) == 1, "a creation in progress lost its journal row"

    # The same reads once the row is older than any write in flight can be: by then every read
    # sees the claim, and it keeps the rows...
    kv.hiding = False
    later = time.time() + SAFETY_SECONDS + 60
    assert partition not in DeletedRepositories(kv, lambda: later).sweep().partitions
    assert len(shared_rows(kv, partition)) == 1
    # ...while a repository that is really gone (its creation failed) is swept then.
    with journal_context("create_repository", "tester", name):
        note_repository_partition(name, partition.encode())
        graveler.lifecycle.claims.release(claim)
    assert partition not in DeletedRepositories(kv).sweep().partitions  # its newest row is new
    later = time.time() + SAFETY_SECONDS + 60
    assert partition in DeletedRepositories(kv, lambda: later).sweep().partitions
    assert shared_rows(kv, partition) == []


# --- the saved token list of a deleted repository ------------------------------------------


def saved_keys(kv: Store, partition: str) -> list[bytes]:
    return [entry.key for entry in kv.scan(partition.encode() + b"-journal-ship")]


class Doomed(NamedTuple):
    """A repository with one write (main/a), on a graveler over an in-memory store: the one a
    test deletes. kv is the store under the journaled one; partition, the repository's."""

    graveler: Graveler
    adapter: LocalAdapter
    kv: Store
    name: str
    partition: str


@pytest.fixture
def doomed(tmp_path: Path) -> Iterator[Doomed]:
    adapter = LocalAdapter(tmp_path / "data")
    graveler = open_graveler(MemStore(), adapter)
    try:
        name = f"gone-{uuid.uuid4().hex[:6]}"
        calls = InCalls(graveler, name)
        calls.lifecycle.create_repository(name, f"local://{name}", "main", False)
        put(calls, adapter, name, "main", "a")
        partition = f"{name}-{graveler.refs.get_repository(name).record.unique_id}"
        yield Doomed(graveler, adapter, raw(graveler), name, partition)
    finally:
        graveler.close()


def test_the_deletions_clean_up_drops_the_saved_token_list(doomed: Doomed) -> None:
    graveler, adapter, kv, name, partition = doomed
    dropped = graveler.refs.get_branch(graveler.refs.repository(name), "main").branch.staging_token
    InCalls(graveler, name).commit(name, "main", "drops the first token")
    graveler.cleaner.flush(30)
    Shipper(kv, adapter, hmac_key=JOURNAL_KEY).ship(name)
    assert saved_keys(kv, partition)
    # A stale writer's row in the dropped token, which only the saved list leads to.
    stale_row(kv, dropped, name, partition, time.time_ns() // 1000)

    with journal_context("delete_repository", "tester", name):
        graveler.lifecycle.delete_repository(name)
    graveler.cleaner.flush(30)
    # Gone with the partitions, before any sweep: no round may ever find the repository
    # again (a shipper racing the deletion may have shipped its shared rows).
    assert saved_keys(kv, partition) == []
    assert list(scan_prefix(kv, dropped.encode(), JOURNAL_PREFIX)) == []


def test_a_shipper_racing_the_deletion_leaves_no_saved_token(doomed: Doomed) -> None:
    graveler, adapter, kv, name, partition = doomed
    cleaner_may_run = threading.Event()
    batches = []

    def step(what: str) -> None:
        if what == "lease taken":
            # Deleted as the round starts; its clean-up held back behind another task...
            graveler.cleaner.submit(cleaner_may_run.wait, 30)
            with journal_context("delete_repository", "tester", name):
                graveler.lifecycle.delete_repository(name)
        elif what == "batch written":
            batches.append(what)
            if len(batches) == 2:
                # ...and run to its end once the round holds the repository partition's rows
                # (their branch values name tokens it saves next).
                cleaner_may_run.set()
                graveler.cleaner.flush(30)
                assert saved_keys(kv, partition) == []

    record = graveler.refs.get_repository(name).record
    Shipper(kv, adapter, hmac_key=JOURNAL_KEY, step=step).ship_repository(record)
    assert len(batches) >= 2
    # The round shipped the deletion's shared rows: no sweep will ever find the repository.
    assert shared_rows(kv, partition) == []
    assert saved_keys(kv, partition) == [], "tokens saved after the clean-up stay in KV for good"


# --- forgetting a token ----------------------------------------------------------------------


class PlainDeletes(ForwardingStore):
    """inner, noting the keys deleted by plain writes (a delete or an unconditional apply)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.plain: list[bytes] = []

    def delete(self, partition: bytes, key: bytes) -> None:
        self.plain.append(key)
        self.inner.delete(partition, key)

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        if condition is None:
            self.plain.extend(deletes)
        self.inner.apply(partition, puts, deletes, condition, timestamp)


def test_a_saved_token_is_forgotten_by_compare_and_set() -> None:
    kv = PlainDeletes(MemStore())
    tokens = ShippedTokens(kv, b"repo-" + b"u" * 32)
    tokens.save("t1", 1000.0)  # written by compare-and-set...
    tokens.forget("t1")
    assert list(tokens.entries()) == []
    # ...and so deleted only by one: on Cassandra a plain delete of a cell LWTs write is not
    # ordered against their ballots and may be shadowed by a racing save.
    assert kv.plain == []
