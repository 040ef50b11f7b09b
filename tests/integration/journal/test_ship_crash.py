"""The shipper interrupted at every step of a round, on every KV driver: a fault injected at
each step boundary in turn (the process dies there: nothing after it runs), then a later
shipper's rounds. Afterwards no journal row of the repository is left in KV — in its
partition, the shared `graveler` partition, and every staging token it ever had, dropped ones
included — every record written is in the bucket, and a rebuild from the bucket alone equals
the original repository.

The workload leaves the states a crash can strand: tokens sealed and dropped since the last
round (named only by unshipped branch records), a token remembered from an earlier round, and
a recovery that comes after the remembered tokens' grace period (a compactor down for hours)."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.journal.batch import decode_batch, position
from silt.journal.bucket import JournalBucket
from silt.journal.rebuild import Rebuild
from silt.journal.shipper import TOKEN_GRACE_SECONDS, Shipper
from silt.kv.store import Store
from tests.integration.journal.workload import (
    JOURNAL_KEY,
    InCalls,
    api_dump,
    journal_positions,
    live_tokens,
    put,
    raw,
    raw_dump,
    repository_partitions,
    tokens_ever_named,
)

LEASE_SECONDS = 300.0
# Small batches: a partition takes several, so a fault lands between two batches of one partition.
BATCH_RECORDS = 4


class Killed(BaseException):
    """The shipper's process dying at a step boundary: no handler of the shipper's catches it."""


class FaultAt:
    """A step hook that kills the round at the k-th boundary named name (k counts from 1)."""

    def __init__(self, name: str = "", k: int = 0) -> None:
        self.name = name
        self.k = k
        self.steps: list[str] = []

    def __call__(self, name: str) -> None:
        self.steps.append(name)
        if self.fired:
            raise Killed(f"{name} #{self.k}")

    @property
    def fired(self) -> bool:
        return bool(self.name) and self.steps.count(self.name) >= self.k


def before_the_round(calls: InCalls, adapter: LocalAdapter, repo: str) -> None:
    for i in range(5):
        put(calls, adapter, repo, "main", f"a/{i}")
    calls.commit(repo, "main", "first")
    put(calls, adapter, repo, "main", "b/remembered")  # main's token now: the complete round remembers it


def between_rounds(calls: InCalls, adapter: LocalAdapter, repo: str) -> None:
    for i in range(4):
        put(calls, adapter, repo, "main", f"b/{i}")
    calls.commit(repo, "main", "second")  # drops the token the first round remembered
    calls.create_branch(repo, "dev", "main")
    for i in range(5):
        put(calls, adapter, repo, "dev", f"dev/{i}")
    calls.commit(repo, "dev", "on dev")  # drops a token no round ever saw
    put(calls, adapter, repo, "dev", "dev/gone")
    calls.delete_branch(repo, "dev")  # and another
    put(calls, adapter, repo, "main", "c/uncommitted")
    calls.repo_metadata.update(repo, {"stage": "crash"}, [], NO_DEADLINE)  # a row in the shared partition


def scenario(store: Store, rebuilt: Store, tmp_path: Path, fault: FaultAt, recovery_delay: float) -> None:
    """The workload, a round killed by fault (or complete, if it has fewer steps), recovery
    rounds recovery_delay seconds later, then the checks."""
    adapter = LocalAdapter(tmp_path / "data")
    repo = f"shipcrash-{uuid.uuid4().hex[:10]}"
    namespace = f"local://{repo}"
    graveler = open_graveler(store, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, namespace, "main", False)
        kv = raw(graveler)
        before_the_round(calls, adapter, repo)
        graveler.cleaner.flush(30)
        tokens = tokens_ever_named(kv, graveler, repo)
        written = journal_positions(kv, repo, repository_partitions(graveler, repo, tokens))
        first = Shipper(kv, adapter, LEASE_SECONDS, hmac_key=JOURNAL_KEY).ship(repo)
        assert first.records == len(written) and not first.skipped

        between_rounds(calls, adapter, repo)
        graveler.cleaner.flush(30)  # the dropped tokens' staged values are gone, their journal rows not
        tokens |= tokens_ever_named(kv, graveler, repo)
        partitions = repository_partitions(graveler, repo, tokens)
        written |= journal_positions(kv, repo, partitions)
        before_rows = raw_dump(kv, graveler, repo)
        before_api = api_dump(graveler, adapter, repo)
        dropped = tokens - live_tokens(kv, graveler, repo)
        assert len(dropped) >= 3

        started = time.time()
        with contextlib.suppress(Killed):
            Shipper(kv, adapter, LEASE_SECONDS, batch_records=BATCH_RECORDS, step=fault, hmac_key=JOURNAL_KEY).ship(
                repo
            )

        later = started + recovery_delay
        for _ in range(3):
            again = Shipper(
                kv, adapter, LEASE_SECONDS, clock=lambda: later, batch_records=BATCH_RECORDS, hmac_key=JOURNAL_KEY
            ).ship(repo)
            assert not again.skipped
            if again.records == 0:
                break
        else:
            pytest.fail("three recovery rounds still found records to ship")

        stranded = journal_positions(kv, repo, partitions)
        where = f"at {fault.name!r} #{fault.k}" if fault.fired else "after a complete round"
        assert not stranded, f"{len(stranded)} records stranded in KV, the shipper killed {where}"
    finally:
        graveler.close()

    bucket = JournalBucket(adapter, namespace)
    shipped = {position(record) for key in bucket.batches() for record in decode_batch(bucket.read(key))}
    assert shipped == written
    Rebuild(rebuilt, adapter, namespace, repo, hmac_key=JOURNAL_KEY).run()
    again_opened = open_graveler(rebuilt, adapter)
    try:
        assert raw_dump(rebuilt, again_opened, repo) == before_rows
        assert api_dump(again_opened, adapter, repo) == before_api
        # Rebuild writes no staged value of a token no branch names any more.
        assert {token: rows for token in dropped if (rows := list(rebuilt.scan(token.encode())))} == {}
    finally:
        again_opened.close()


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block store's writes without their fsyncs, most of a scenario's time on a fast KV.

    A fault here ends a round inside this process (Killed), never the machine: the operating
    system loses no write that was not synced, so the syncs decide nothing these tests check."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def boundaries(count: int, recovery: int, every: bool, ends_only: bool = False) -> list[int]:
    """Which of a step's count boundaries (1..count) a test faults at. Every one (`every`, the
    nightly variant), or, in `make test`, the first and the last under each recovery and the
    ones between shared out between the two recoveries (recovery 0 the odd ones, 1 the even
    ones): each boundary is still faulted once per run of both tests. On Cassandra (ends_only)
    `make test` faults only the first and the last of each step under each recovery, and
    leaves the ones between to the other drivers: a boundary between two batches or two
    partitions makes the same KV calls as the first one (which already falls between two
    batches of a partition), and mem and SQLite fault every one of them in each run."""
    return [k for k in range(1, count + 1) if every or k in (1, count) or (not ends_only and k % 2 != recovery)]


@pytest.mark.usefixtures("no_fsync")
@pytest.mark.parametrize(
    "every_boundary",
    [pytest.param(False, id="shared-boundaries"), pytest.param(True, id="every-boundary", marks=pytest.mark.nightly)],
)
@pytest.mark.parametrize(
    ("recovery", "recovery_delay"),
    [
        pytest.param(0, LEASE_SECONDS + 1, id="after-the-lease"),
        pytest.param(1, TOKEN_GRACE_SECONDS + LEASE_SECONDS, id="after-the-token-grace"),
    ],
)
def test_a_shipper_killed_at_any_step_strands_nothing(
    store: Store,
    empty_store: Store,
    tmp_path: Path,
    recovery: int,
    recovery_delay: float,
    every_boundary: bool,
    request: pytest.FixtureRequest,
) -> None:
    ends_only = request.node.callspec.params["store"] == "cassandra"  # each scenario: a second or two there
    complete = FaultAt()  # never fires: learns the steps of a round of this workload
    scenario(store, empty_store, tmp_path, complete, recovery_delay)
    every = {"lease taken", "batch written", "batch tokens saved", "rows deleted", "partition shipped", "tokens saved"}
    assert set(complete.steps) == every, complete.steps
    faulted: set[str] = set()
    for name in sorted(every):
        for k in boundaries(complete.steps.count(name), recovery, every_boundary, ends_only):
            fault = FaultAt(name, k)
            scenario(store, empty_store, tmp_path, fault, recovery_delay)
            if fault.fired:
                faulted.add(name)
            else:
                # Token names are random, so their partitions' order and sizes vary a little
                # from one workload to the next: this one's round may hold one batch fewer.
                assert fault.steps.count(name) < k, fault.steps
    assert faulted == every
