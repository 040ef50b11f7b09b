"""Repository deletion (with failures between its steps) and dump / restore of refs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.refs import GRAVELER_PARTITION
from engine.features.background_tasks import INTERRUPTED, STALE_SECONDS
from engine.features.lifecycle import ABORTED_BEFORE_ANSWER, TO_DELETE
from engine.features.refs_tasks import DUMP, RESTORE, RefsTasks
from silt import multipart_uploads as uploads
from silt.errors import NotFound, Unavailable
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.store import JournaledStore, raw_store
from silt.kv import Store
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import AllOf, Condition, scan_prefix
from silt.kv.store import Timestamp as KvTimestamp
from silt.repository_place import RepositoryPlace
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of
from tests.integration.graveler.test_branching import contents, merge


class FailingDeletes(ForwardingStore):
    """Wraps a store; while armed, every delete outside the `graveler` partition fails."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed = False

    def delete(self, partition: bytes, key: bytes) -> None:
        if self.armed and partition != GRAVELER_PARTITION:
            raise Unavailable("injected: KV went away mid-deletion")
        self.inner.delete(partition, key)

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: KvTimestamp | None = None,
    ) -> None:
        if self.armed and deletes and partition != GRAVELER_PARTITION:
            raise Unavailable("injected: KV went away mid-deletion")
        self.inner.apply(partition, puts, deletes, condition, timestamp)

    def close(self) -> None:
        pass


def repo_partition_keys(store: Store, env: GravelerEnv, name: str) -> list[bytes]:
    handle = env.graveler.refs.get_repository(name)
    return [e.key for e in store.scan(handle.partition)]


def test_deletion_interrupted_after_the_record_leaves_nothing_reachable(env: GravelerEnv) -> None:
    store = env.graveler.refs.kv
    repo = env.new_repo("del")
    env.put(repo, "main", "committed")
    env.commit(repo, "main")
    env.put(repo, "main", "staged")
    old = env.graveler.refs.get_repository(repo)
    staging_token = env.graveler.refs.get_branch(old, "main").branch.staging_token

    failing = FailingDeletes(raw_store(store))
    # Graveler reads and writes through the journal, whatever store is underneath.
    env.graveler.refs.kv = env.graveler.staging.kv = JournaledStore(failing)
    failing.armed = True
    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    env.graveler.cleaner.flush(30)  # the background cleaning ran, and failed

    # The record went first: the repository is gone although its partitions are not.
    request = api.GetRepositoryRequest(name=repo)
    assert code_of(lambda: env.stub.GetRepository(request)) == grpc.StatusCode.NOT_FOUND
    assert list(store.scan(old.partition)), "the injected failure should have left the partition"
    assert store.get(GRAVELER_PARTITION, TO_DELETE + old.partition)

    # A new repository of the same name never sees the leftovers.
    env.stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}-new"))
    assert env.list_all(repo, "main") == []

    # The cleaner finishes the job once the store works again.
    failing.armed = False
    assert env.graveler.lifecycle.clean_deleted_repositories() >= 1
    # Journal rows included: nothing of the deleted repository's partitions is left.
    assert list(raw_store(store).scan(old.partition)) == []
    assert list(raw_store(store).scan(staging_token.encode())) == []
    assert env.list_all(repo, "main") == []  # the new repository is untouched
    with pytest.raises(Exception, match="not found"):
        store.get(GRAVELER_PARTITION, TO_DELETE + old.partition)


def test_a_deletion_that_died_before_removing_the_record_leaves_the_repository_whole(env: GravelerEnv) -> None:
    """The deletion's first step (its to-delete entry) written, then the process died (or the
    record's removal failed): the repository stands, so the cleaner leaves its partitions alone,
    and a deletion made again finishes it."""
    store = env.graveler.refs.kv
    repo = env.new_repo("half-deleted")
    env.put(repo, "main", "committed")
    env.commit(repo, "main")
    env.put(repo, "main", "staged")
    handle = env.graveler.refs.get_repository(repo)
    store.set(GRAVELER_PARTITION, TO_DELETE + handle.partition, handle.record.SerializeToString())

    assert env.graveler.lifecycle.clean_deleted_repositories() == 0
    assert sorted(env.list_all(repo, "main")) == ["committed", "staged"]

    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    env.graveler.cleaner.flush(30)
    env.graveler.lifecycle.clean_deleted_repositories()
    assert list(raw_store(store).scan(handle.partition)) == []
    with pytest.raises(Exception, match="not found"):
        store.get(GRAVELER_PARTITION, TO_DELETE + handle.partition)


def test_dump_and_restore_preserve_every_commit_id(env: GravelerEnv) -> None:
    repo = env.new_repo("dump")
    env.put(repo, "main", "a", "1")
    env.commit(repo, "main", "one")
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    env.put(repo, "feature", "b", "2")
    env.commit(repo, "feature", "two")
    merge(env, repo, "feature", "main")
    env.stub.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref="main~1"))
    dump = env.stub.DumpRefs(api.DumpRefsRequest(repository=repo))
    assert (dump.commits, dump.branches, dump.tags) == (4, 2, 1)

    def log_ids(name: str, ref: str) -> list[str]:
        return [c.id for c in env.stub.Log(api.LogRequest(repository=name, ref=ref)).commits]

    refs = ("main", "feature", "v1")
    before = {ref: (log_ids(repo, ref), contents(env, repo, ref)) for ref in refs}
    # The repository is lost (its KV records gone); its storage namespace holds the dump. A
    # restore while it still lives is an administrator's (tests/integration/auth/test_namespace_sharing.py).
    info = env.stub.GetRepository(api.GetRepositoryRequest(name=repo))
    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    restored = f"{repo}-r"
    env.stub.CreateRepository(
        api.CreateRepositoryRequest(name=restored, storage_namespace=info.storage_namespace, bare=True)
    )
    counts = env.stub.RestoreRefs(api.RestoreRefsRequest(repository=restored, location=dump.location))
    assert (counts.commits, counts.branches, counts.tags) == (4, 2, 1)

    for ref in refs:
        assert (log_ids(restored, ref), contents(env, restored, ref)) == before[ref]

    again = api.RestoreRefsRequest(repository=restored, location=dump.location)
    assert code_of(lambda: env.stub.RestoreRefs(again)) == grpc.StatusCode.FAILED_PRECONDITION
    bad = api.RestoreRefsRequest(repository=restored, location="../../etc/passwd")
    assert code_of(lambda: env.stub.RestoreRefs(bad)) == grpc.StatusCode.INVALID_ARGUMENT


def test_deletion_aborts_a_bounded_number_of_uploads_before_answering_and_the_cleaner_the_rest(
    env: GravelerEnv,
) -> None:
    """However many uploads are open, the deletion's answer waits for a few aborts only; the
    others are aborted by the cleaner right after, and none of them belongs to a repository
    created again under the name meanwhile."""
    repo = env.new_repo("uploads")
    info = env.stub.GetRepository(api.GetRepositoryRequest(name=repo))
    raw = raw_store(env.graveler.refs.kv)
    ids = [f"{n:032x}" for n in range(ABORTED_BEFORE_ANSWER + 3)]
    for n, upload_id in enumerate(ids):
        record = {
            "path": f"main/k{n}",
            "initiated": "2026-01-01T00:00:00+00:00",
            "initiated_ns": time.time_ns(),
            "initiator": "alice",
            "namespace": info.storage_namespace,
            "repository_id": info.unique_id,
            "address": f"data/{n}",
            "block_id": f"block-{n}",
        }
        uploads.save(raw, repo, upload_id, record)
    # The cleaner (one worker, in order) is busy until released: what is gone when the deletion
    # answers was aborted by the request itself.
    release = threading.Event()
    env.graveler.cleaner.submit(lambda: release.wait(30))
    try:
        env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
        left = [
            i for i in ids if uploads.upload_key(repo, i) in {e.key for e in scan_prefix(raw, uploads.PARTITION, b"u/")}
        ]
        assert len(left) == 3
        # Not usable meanwhile: a repository created again under the name does not own them.
        env.stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}-new"))
        again = env.stub.GetRepository(api.GetRepositoryRequest(name=repo))
        successor = RepositoryPlace(again.storage_namespace, again.unique_id)
        for upload_id in left:
            record = json.loads(raw.get(uploads.PARTITION, uploads.upload_key(repo, upload_id)).value)
            assert not uploads.belongs(record, successor)
    finally:
        release.set()
    env.graveler.cleaner.flush(30)
    assert not [e.key for e in scan_prefix(raw, uploads.PARTITION, b"") if any(i in e.key.decode() for i in ids)]


def _task_done(read: Callable[[], api.RefsTaskInfo]) -> pb.RefsTaskRecord:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        task = read().task
        if task.done:
            return task
        time.sleep(0.05)
    raise AssertionError("the task did not end in time")


def test_dump_and_restore_tasks_are_records_any_replica_reads(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "a", "1")
    env.commit(repo, "main", "one")
    env.stub.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref="main"))
    started = env.stub.StartDump(api.StartDumpRequest(repository=repo)).task
    assert started.kind == pb.RefsTaskRecord.KIND_DUMP and not started.done
    dumped = _task_done(lambda: env.stub.GetDumpStatus(api.GetDumpStatusRequest(repository=repo, id=started.id)))
    assert (dumped.error, dumped.commits, dumped.branches, dumped.tags) == ("", 2, 1, 1)
    assert dumped.location.startswith("_silt/refs/") and dumped.location.endswith("/manifest.json")
    # Another replica (its own RefsTasks over the same KV) answers for the task.
    replica = RefsTasks(env.graveler.refs.kv, env.graveler.lifecycle)
    try:
        handle = env.graveler.refs.repository(repo)
        assert replica.status(handle, DUMP, started.id).location == dumped.location
        with pytest.raises(NotFound):
            replica.status(handle, RESTORE, started.id)  # a dump is no restore task
    finally:
        replica.close()

    info = env.stub.GetRepository(api.GetRepositoryRequest(name=repo))
    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    restored = f"{repo}-r"
    env.stub.CreateRepository(
        api.CreateRepositoryRequest(name=restored, storage_namespace=info.storage_namespace, bare=True)
    )
    start = api.StartRestoreRequest(repository=restored, location=dumped.location)
    task = env.stub.StartRestore(start).task
    done = _task_done(lambda: env.stub.GetRestoreStatus(api.GetRestoreStatusRequest(repository=restored, id=task.id)))
    assert (done.error, done.commits, done.branches, done.tags) == ("", 2, 1, 1)
    assert contents(env, restored, "v1") == contents(env, restored, "main") != {}
    # Not bare any more: refused at once, with no task.
    assert code_of(lambda: env.stub.StartRestore(start)) == grpc.StatusCode.FAILED_PRECONDITION
    missing = api.GetRestoreStatusRequest(repository=restored, id="0123456789abcdef0123")
    assert code_of(lambda: env.stub.GetRestoreStatus(missing)) == grpc.StatusCode.NOT_FOUND


def test_a_task_whose_runner_stopped_reads_as_interrupted(env: GravelerEnv) -> None:
    repo = env.new_repo()
    handle = env.graveler.refs.repository(repo)
    old = Timestamp()
    old.FromSeconds(int(time.time() - STALE_SECONDS - 5))
    record = pb.RefsTaskRecord(id="abc123", kind=pb.RefsTaskRecord.KIND_DUMP, created=old, update_time=old)
    env.graveler.refs.kv.set_if(handle.partition, b"refs_tasks/abc123", record.SerializeToString(), None)
    status = env.stub.GetDumpStatus(api.GetDumpStatusRequest(repository=repo, id="abc123")).task
    assert status.done and status.error == INTERRUPTED
