"""GC runs end to end: real graveler over gRPC, real Spark, real files on a local blockstore."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from jobs.gc.job import GCOptions, run_gc
from silt.errors import InvalidArgument
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv


def _gc(spark: Any, env: GCEnv, repo: str, **options: Any) -> Any:
    return run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True, **options))


def test_rules_round_trip(gc_env: GCEnv) -> None:
    repo = gc_env.new_repo(default_days=None)
    shown = gc_env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo))
    assert not shown.is_set
    rules = pb.GCRules(default_retention_days=7, branch_retention_days={"main": 30})
    gc_env.stub.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=rules))
    shown = gc_env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo))
    assert shown.is_set and shown.rules == rules
    with pytest.raises(grpc.RpcError) as bad:
        gc_env.stub.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=pb.GCRules(default_retention_days=-1)))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    gc_env.stub.DeleteGCRules(api.DeleteGCRulesRequest(repository=repo))
    assert not gc_env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo)).is_set
    with pytest.raises(grpc.RpcError) as unset:
        gc_env.stub.PrepareGC(api.PrepareGCRequest(repository=repo))
    assert unset.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_gc_keeps_what_only_a_compaction_holds(spark: Any, gc_env: GCEnv) -> None:
    """Compacted but uncommitted entries live only in the compacted metarange (docs/design/compaction.md)."""
    env = gc_env
    repo = env.new_repo(default_days=0)
    committed = env.put(repo, "main", "a", b"a1")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="1"))
    compacted = env.put(repo, "main", "b", b"b1")
    overwritten = env.put(repo, "main", "c", b"c1")
    kept_c = env.put(repo, "main", "c", b"c2")
    env.graveler.compact(repo, "main")
    branch = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch.compacted_metarange_id and not branch.sealed_tokens
    env.graveler.cleaner.flush(30)  # the folded tokens' staged values are gone

    summary = _gc(spark, env, repo)
    assert summary.objects == {"expired-commit": 0, "unreferenced": 1}
    assert not env.exists(repo, overwritten)
    for address, content in [(committed, b"a1"), (compacted, b"b1"), (kept_c, b"c2")]:
        assert env.read(repo, address) == content


def test_gc_frees_exactly_the_garbage(spark: Any, gc_env: GCEnv) -> None:
    env = gc_env
    repo = env.new_repo(default_days=0)
    kept_old = env.put(repo, "main", "a", b"a1")  # overwritten below, but tagged
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="1"))
    tagged = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    env.stub.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref=tagged))
    expired = env.put(repo, "main", "b", b"b1")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="2"))
    head_a = env.put(repo, "main", "a", b"a2")
    head_b = env.put(repo, "main", "b", b"b2")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="3"))
    staged = env.put(repo, "main", "c", b"c1")
    overwritten_staged = env.put(repo, "main", "d", b"d1")
    staged_d = env.put(repo, "main", "d", b"d2")
    orphan = env.upload(repo, b"never staged")
    fresh = env.upload(repo, b"written after the cutoff", backdate=False)

    dry = run_gc(
        spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=600, unsafe_short_grace=True, dry_run=True)
    )
    assert dry.objects == {"expired-commit": 1, "unreferenced": 2}
    assert dry.bytes == {"expired-commit": 2, "unreferenced": len(b"never staged") + 2}
    assert env.exists(repo, expired) and env.exists(repo, orphan)  # a dry run deletes nothing

    summary = run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=600, unsafe_short_grace=True))
    assert summary.deleted == 3
    for gone in (expired, orphan, overwritten_staged):
        assert not env.exists(repo, gone)
    for address, content in [
        (kept_old, b"a1"),
        (head_a, b"a2"),
        (head_b, b"b2"),
        (staged, b"c1"),
        (staged_d, b"d2"),
        (fresh, b"written after the cutoff"),
    ]:
        assert env.read(repo, address) == content

    # Sweeping the same report again is harmless and deletes nothing more.
    again = run_gc(spark, env.stub, repo, env.blockstore, GCOptions(sweep_only=summary.run_id))
    assert again.objects == summary.objects
    assert env.read(repo, head_a) == b"a2"
    # A new run finds nothing left to collect.
    after = run_gc(
        spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=600, unsafe_short_grace=True, dry_run=True)
    )
    assert after.objects == {"expired-commit": 0, "unreferenced": 0}


def test_sweep_only_finishes_a_dry_runs_report(spark: Any, gc_env: GCEnv) -> None:
    env = gc_env
    repo = env.new_repo(default_days=0)
    kept = env.put(repo, "main", "k", b"kept")
    orphans = [env.upload(repo, f"orphan {i}".encode()) for i in range(5)]
    dry = _gc(spark, env, repo, dry_run=True)
    assert dry.objects["unreferenced"] == 5 and all(env.exists(repo, o) for o in orphans)
    # As if an earlier sweep had stopped after two deletes.
    for address in orphans[:2]:
        env.adapter.delete(f"local://{repo}", address)
    resumed = _gc(spark, env, repo, sweep_only=dry.run_id)
    assert resumed.deleted == 5  # deletes of already missing objects are no-ops
    assert not any(env.exists(repo, o) for o in orphans)
    assert env.read(repo, kept) == b"kept"
    with pytest.raises(InvalidArgument):
        _gc(spark, env, repo, sweep_only="20990101T000000Z-00000000")


def test_sweep_spares_what_became_referenced_after_the_mark(spark: Any, gc_env: GCEnv) -> None:
    env = gc_env
    repo = env.new_repo(default_days=0)
    copied = env.put(repo, "main", "a", b"old a")
    revived = env.put(repo, "main", "b", b"old b")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="1"))
    first = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="a"))
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="b"))
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="2"))
    dry = _gc(spark, env, repo, dry_run=True)
    assert dry.objects["expired-commit"] == 2

    # After the mark: a copy stages an entry at an expiring address, and a branch revives
    # the expired commit itself.
    entry = pb.Entry(physical_address=copied, size=5)
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="copy-of-a", entry=entry))
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="revived", source_ref=first))

    swept = _gc(spark, env, repo, sweep_only=dry.run_id)
    assert swept.spared == 2 and swept.deleted == 0
    assert env.read(repo, copied) == b"old a" and env.read(repo, revived) == b"old b"
