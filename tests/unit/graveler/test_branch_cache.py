"""The branch cache on an injected clock: the writer's first read may be that young, never older."""

from __future__ import annotations

from engine.core.refs import RefManager, RepoHandle, set_tokens
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _moved(refs: RefManager, repo: RepoHandle, token: str) -> None:
    current = refs.get_branch(repo, "main")
    moved = pb.Branch()
    moved.CopyFrom(current.branch)
    set_tokens(moved, token, [current.branch.staging_token])
    refs.set_branch_if(repo, moved, current.predicate)


def test_a_cached_record_serves_until_its_ttl_then_the_store_answers() -> None:
    clock = FakeClock()
    refs = RefManager(MemStore(), branch_cache_seconds=5.0, clock=clock)
    repo = RepoHandle(pb.Repository(name="cache", unique_id="u1", storage_namespace="local://cache"))
    refs.create_branch(repo, pb.Branch(name="main", commit_id="c1", staging_token="t1"))
    refs.fresh_branch(repo, "main")
    _moved(refs, repo, "t2")

    clock.now += 4.9
    assert refs.branch_for_io(repo, "main", use_cache=True).branch.staging_token == "t1"  # young enough
    clock.now += 0.2
    assert refs.branch_for_io(repo, "main", use_cache=True).branch.staging_token == "t2"  # too old: the store


def test_the_fresh_read_of_a_recheck_refreshes_the_cache() -> None:
    clock = FakeClock()
    refs = RefManager(MemStore(), branch_cache_seconds=5.0, clock=clock)
    repo = RepoHandle(pb.Repository(name="cache", unique_id="u1", storage_namespace="local://cache"))
    refs.create_branch(repo, pb.Branch(name="main", commit_id="c1", staging_token="t1"))
    refs.fresh_branch(repo, "main")
    _moved(refs, repo, "t2")
    assert refs.branch_for_io(repo, "main", use_cache=False).branch.staging_token == "t2"
    _moved(refs, repo, "t3")
    clock.now += 1
    assert refs.branch_for_io(repo, "main", use_cache=True).branch.staging_token == "t2"  # cached by the re-check


def test_without_a_ttl_nothing_is_cached() -> None:
    refs = RefManager(MemStore(), branch_cache_seconds=0.0, clock=FakeClock())
    repo = RepoHandle(pb.Repository(name="cache", unique_id="u1", storage_namespace="local://cache"))
    refs.create_branch(repo, pb.Branch(name="main", commit_id="c1", staging_token="t1"))
    refs.fresh_branch(repo, "main")
    _moved(refs, repo, "t2")
    assert refs.branch_for_io(repo, "main", use_cache=True).branch.staging_token == "t2"
