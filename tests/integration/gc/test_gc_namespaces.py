"""A GC run refuses, before Spark does anything, a repository whose storage namespace overlaps
another live repository's: listing its namespace would find the other's objects and metadata,
and the sweep would delete them. Through graveler's real gRPC API; no Spark session is needed,
which is the point: the refusal comes first. So does a run of a repository without GC rules
(`silt gc run` refuses it before it starts the job, tests/e2e/test_gc.py; the job's own refusal,
which the CronJob meets, is this one)."""

from __future__ import annotations

import uuid

import grpc
import pytest

from engine.core.placement import Placement
from engine.core.refs.manager import now
from jobs.gc.job import GCOptions, run_gc
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv


def _plant(env: GCEnv, namespace: str) -> str:
    """A repository record on namespace, as one created before overlaps were refused (or by a
    race of two creations) would be; graveler itself no longer creates such a repository."""
    name = f"gc-legacy-{uuid.uuid4().hex[:8]}"
    record = pb.Repository(
        name=name, storage_namespace=namespace, default_branch="main", creation_date=now(), unique_id=uuid.uuid4().hex
    )
    env.graveler.refs.create_repository(record)
    return name


def _refused(env: GCEnv, repo: str) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        env.stub.PrepareGC(api.PrepareGCRequest(repository=repo))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    return caught.value.details() or ""


@pytest.mark.parametrize("where", ["equal", "below", "the whole store"])
def test_gc_refuses_a_namespace_another_repository_overlaps(gc_env: GCEnv, where: str) -> None:
    repo = gc_env.new_repo()
    kept = gc_env.put(repo, "main", "k", b"the victim's bytes")
    gc_env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="one"))
    namespace = f"local://{repo}"
    other = _plant(gc_env, {"equal": namespace, "below": f"{namespace}/sub", "the whole store": "local://"}[where])
    # Both ways round: the outer one's run would sweep the inner one's objects and metadata,
    # the inner one's run those of the outer one it can see.
    for collected, sharer in ((repo, other), (other, repo)):
        details = _refused(gc_env, collected)
        assert "overlaps another repository's" in details
        assert sharer not in details and namespace not in details
    # run_gc stops at that first call: Spark is never touched (None would fail at first use).
    with pytest.raises(grpc.RpcError) as caught:
        run_gc(None, gc_env.stub, repo, gc_env.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # So does a sweep of an earlier run's report (before: it read the report with Spark first).
    with pytest.raises(grpc.RpcError) as caught:
        run_gc(None, gc_env.stub, repo, gc_env.blockstore, GCOptions(sweep_only="20990101T000000Z-00000000"))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert gc_env.exists(repo, kept)
    # Once the other is gone, the run may go ahead.
    gc_env.graveler.refs.delete_repository_record(other)
    assert gc_env.stub.PrepareGC(api.PrepareGCRequest(repository=repo)).run_id


def test_gc_refuses_a_namespace_outside_the_allowed_roots(gc_env: GCEnv) -> None:
    repo = gc_env.new_repo()
    gc_env.graveler.lifecycle.placement = Placement(("local://elsewhere/",))  # the operator moved the roots
    details = _refused(gc_env, repo)
    assert "outside the allowed namespace roots" in details


def test_gc_refuses_a_repository_without_rules(gc_env: GCEnv) -> None:
    repo = gc_env.new_repo(default_days=None)
    assert "has no GC rules" in _refused(gc_env, repo)
    with pytest.raises(grpc.RpcError) as caught:
        run_gc(None, gc_env.stub, repo, gc_env.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "has no GC rules" in (caught.value.details() or "")
