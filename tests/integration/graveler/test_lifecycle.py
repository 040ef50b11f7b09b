"""Repository deletion (with failures between its steps) and dump / restore of refs."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import pytest

from services.graveler.lifecycle import TO_DELETE
from services.graveler.refs import GRAVELER_PARTITION
from silt.errors import Unavailable
from silt.graveler.v1 import graveler_pb2 as api
from silt.journal.store import JournaledStore, raw_store
from silt.kv import Store
from silt.kv.store import Condition
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of
from tests.integration.graveler.test_branching import contents, merge
from tests.support.stores import ForwardingStore


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
        condition: Condition | None = None,
        timestamp: int | None = None,
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
