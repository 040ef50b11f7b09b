"""A drop of unreachable staging tokens survives the graveler that was asked for it: it is
recorded in the repository's KV partition, in the batch of the branch update that made the
tokens unreachable, until done, and the next graveler to start on that KV finishes it; so does
every graveler's periodic look over the repositories, and the clean-up of a deleted repository.
Records that earlier versions kept in graveler's shared partition are still finished."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core import cleanup
from engine.core.builder import MetaRangeBuilder
from engine.core.cleanup import Cleaner, RetryPacing
from engine.core.drop_records import LEGACY_PARTITION, PENDING_PREFIX, record_key
from engine.core.model import StagingToken
from engine.core.refs import set_tokens
from engine.core.updater import modify_branch, set_branch_if
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.errors import PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.kv.conditional import delete_current
from silt.kv.mem import MemStore
from silt.kv.store import Store, scan_prefix


class NeverDrops:
    """The builder of a graveler killed before its cleaner got to the drops: they never run."""

    def __init__(self, inner: MetaRangeBuilder) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def drop_token(self, token: StagingToken) -> None:
        raise ConnectionError("killed")


class Kv:
    """One KV that gravelers open one after the other: a SQLite file, one memory store, or the
    run's Cassandra keyspace (shared by the run's tests: repository names are this test's own)."""

    def __init__(self, kind: str, tmp_path: Path, shared: Store | None = None) -> None:
        self.kind = kind
        self.config = DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "kv.db")))
        self.memory = shared or MemStore()
        self.repo = f"repo-{uuid.uuid4().hex[:12]}"

    def open(self) -> Store:
        return open_store(self.config) if self.kind == "local" else self.memory

    def release(self, store: Store) -> None:
        if self.kind == "local":
            store.close()


@pytest.fixture(params=["local", "mem", pytest.param("cassandra", marks=pytest.mark.cassandra)])
def kv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kv]:
    shared = request.getfixturevalue("cassandra_store") if request.param == "cassandra" else None
    yield Kv(request.param, tmp_path, shared)


@pytest.fixture
def adapter(tmp_path: Path) -> LocalAdapter:
    return LocalAdapter(tmp_path / "data")


def recorded(store: Store, partition: bytes) -> list[bytes]:
    return [e.key for e in scan_prefix(store, partition, PENDING_PREFIX)]


def killed(store: Store, adapter: LocalAdapter) -> Graveler:
    """A graveler whose drops never run (no second try before the "kill")."""
    graveler: Graveler = open_graveler(store, adapter)
    graveler.cleaner.pacing = RetryPacing(first=60.0, longest=60.0)
    graveler.builder = NeverDrops(graveler.builder)  # type: ignore[assignment]
    return graveler


def stage(graveler: Graveler, repository: str, branch: str, key: str) -> None:
    graveler.stage_entry(repository, branch, key, pb.Entry(physical_address=f"data/{key}", size=1, etag="e"))


def tokens_of(graveler: Graveler, repository: str, branch: str) -> list[StagingToken]:
    return graveler.refs.fresh_branch(graveler.refs.repository(repository), branch).tokens


def partition_of(graveler: Graveler, repository: str) -> bytes:
    return graveler.refs.repository(repository).partition


# The operations that leave tokens unreachable, each by a compare-and-set of the branch record
# (the deletion by a conditional delete of it).
OPERATIONS: dict[str, Callable[[Graveler, str], object]] = {
    "commit": lambda g, repo: g.commit(repo, "feature", "seal and drop the token"),
    "reset": lambda g, repo: g.reset_branch(repo, "feature"),
    "delete_branch": lambda g, repo: g.delete_branch(repo, "feature"),
    "compact": lambda g, repo: g.compact(repo, "feature"),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_drop_left_by_a_killed_graveler_is_done_by_the_next_one(
    kv: Kv, adapter: LocalAdapter, operation: str
) -> None:
    store = kv.open()
    first = killed(store, adapter)
    first.lifecycle.create_repository(kv.repo, f"local://{kv.repo}", "main", False)
    first.create_branch(kv.repo, "feature", "main")
    stage(first, kv.repo, "feature", "k")
    unreachable = tokens_of(first, kv.repo, "feature")
    OPERATIONS[operation](first, kv.repo)
    first.cleaner.flush(30)
    assert not first.staging.is_empty(unreachable[0])
    # In the repository's own partition, none in graveler's shared one.
    partition = partition_of(first, kv.repo)
    assert recorded(store, partition) == sorted(record_key(t) for t in unreachable)
    assert recorded(store, LEGACY_PARTITION) == []
    first.close()  # killed: nothing of it runs again
    kv.release(store)

    store = kv.open()
    second = open_graveler(store, adapter)
    try:
        second.cleaner.flush(30)
        assert all(second.staging.is_empty(t) for t in unreachable)
        assert recorded(store, partition) == []
    finally:
        second.close()
        kv.release(store)


def test_a_branch_update_that_loses_its_compare_and_set_records_no_drop(kv: Kv, adapter: LocalAdapter) -> None:
    store = kv.open()
    graveler = killed(store, adapter)
    try:
        graveler.lifecycle.create_repository(kv.repo, f"local://{kv.repo}", "main", False)
        stage(graveler, kv.repo, "main", "k")
        repo = graveler.refs.repository(kv.repo)
        stale = graveler.refs.get_branch(repo, "main")
        token = stale.tokens[0]

        def stamp(branch: pb.Branch) -> None:
            branch.compaction_start_time.CopyFrom(Timestamp(seconds=1))

        # Another writer changes the record (a compaction claim: it keeps every token).
        set_branch_if(graveler.refs, repo, stale, modify_branch(stale, stamp), "claim", None)
        assert recorded(store, repo.partition) == []

        def reset(branch: pb.Branch) -> None:
            set_tokens(branch, "fresh-token", [])

        # A reset over the record as read before: refused, and no drop recorded for its token,
        # which the branch still holds.
        with pytest.raises(PredicateFailed):
            set_branch_if(graveler.refs, repo, stale, modify_branch(stale, reset), "reset", None)
        with pytest.raises(PredicateFailed):
            graveler.refs.delete_branch_if(repo, stale)
        assert recorded(store, repo.partition) == []
        assert graveler.refs.get_branch(repo, "main").tokens == [token]
        assert not graveler.staging.is_empty(token)

        # Over the record as it is now, the same reset applies, and its drop is recorded with it.
        current = graveler.refs.get_branch(repo, "main")
        set_branch_if(graveler.refs, repo, current, modify_branch(current, reset), "reset", None)
        assert recorded(store, repo.partition) == [record_key(token)]
    finally:
        graveler.close()
        kv.release(store)


def test_a_drop_recorded_by_an_earlier_version_is_still_done(kv: Kv, adapter: LocalAdapter) -> None:
    store = kv.open()
    first = killed(store, adapter)
    first.lifecycle.create_repository(kv.repo, f"local://{kv.repo}", "main", False)
    stage(first, kv.repo, "main", "k")
    (token,) = tokens_of(first, kv.repo, "main")
    first.reset_branch(kv.repo, "main")
    first.cleaner.flush(30)
    partition = partition_of(first, kv.repo)
    first.close()
    # Where, and how, the previous version recorded it: graveler's shared partition, plainly.
    assert delete_current(store, partition, record_key(token))
    store.set(LEGACY_PARTITION, record_key(token), b"")
    kv.release(store)

    store = kv.open()
    second = open_graveler(store, adapter)
    try:
        second.cleaner.flush(30)
        assert second.staging.is_empty(token)
        assert recorded(store, LEGACY_PARTITION) == []
    finally:
        second.close()
        kv.release(store)


def test_resume_reads_repositories_and_records_a_batch_at_a_time(
    kv: Kv, adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cleanup, "RESUME_BATCH", 2)
    store = kv.open()
    first = killed(store, adapter)
    unreachable: list[StagingToken] = []
    repositories = [f"{kv.repo}-{n}" for n in range(3)]
    for repository in repositories:
        first.lifecycle.create_repository(repository, f"local://{repository}", "main", False)
        for branch in ("a", "b", "c"):
            first.create_branch(repository, branch, "main")
            stage(first, repository, branch, "k")
            unreachable += tokens_of(first, repository, branch)
            first.reset_branch(repository, branch)
    first.cleaner.flush(30)
    first.close()
    kv.release(store)

    store = kv.open()
    second = open_graveler(store, adapter)
    try:
        second.cleaner.flush(30)
        assert [t for t in unreachable if not second.staging.is_empty(t)] == []
        for repository in repositories:
            assert recorded(store, partition_of(second, repository)) == []
    finally:
        second.close()
        kv.release(store)


def test_deleting_a_repository_does_the_drops_recorded_in_it(kv: Kv, adapter: LocalAdapter) -> None:
    store = kv.open()
    graveler = killed(store, adapter)
    try:
        graveler.lifecycle.create_repository(kv.repo, f"local://{kv.repo}", "main", False)
        stage(graveler, kv.repo, "main", "k")
        (token,) = tokens_of(graveler, kv.repo, "main")
        graveler.reset_branch(kv.repo, "main")
        graveler.cleaner.flush(30)
        partition = partition_of(graveler, kv.repo)
        assert recorded(store, partition) == [record_key(token)]
        graveler.builder = graveler.builder.inner  # type: ignore[attr-defined]  # alive again
        # The record goes with the partition: the drop it names is done first.
        graveler.lifecycle.delete_repository(kv.repo)
        graveler.cleaner.flush(30)
        assert graveler.staging.is_empty(token)
        assert recorded(store, partition) == []
    finally:
        graveler.close()
        kv.release(store)


class Dropped:
    def __init__(self) -> None:
        self.tokens: list[StagingToken] = []

    def drop_token(self, token: StagingToken) -> None:
        self.tokens.append(token)


def test_resume_runs_again_once_its_interval_has_passed() -> None:
    store = MemStore()
    now = [0.0]
    builder = Dropped()
    cleaner = Cleaner(
        builder,  # type: ignore[arg-type]
        pending=store,
        repositories=lambda after: [] if after else [("repo", b"repo-1")],
        clock=lambda: now[0],
    )
    try:
        assert cleaner.resume_if_due()
        cleaner.flush(30)
        # Left meanwhile by a graveler that died while this one runs on.
        store.set_if(b"repo-1", record_key("t1"), b"", None)
        now[0] += cleanup.RESUME_INTERVAL_SECONDS - 1
        assert not cleaner.resume_if_due()
        cleaner.flush(30)
        assert builder.tokens == []
        now[0] += 1
        assert cleaner.resume_if_due()
        cleaner.flush(30)
        assert builder.tokens == [StagingToken("t1")]
        assert recorded(store, b"repo-1") == []
    finally:
        cleaner.close()
