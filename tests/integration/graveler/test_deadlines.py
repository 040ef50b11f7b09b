"""A commit whose client gave up stops building and leaves the branch as it was."""

from __future__ import annotations

import threading

import grpc
import pytest

from engine.core.builder import Build, MetaRangeBuilder
from engine.core.committed.model import ApplyResult
from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.model import StagingToken
from silt.errors import DeadlineExceeded
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.graveler.conftest import GravelerEnv


class _SlowBuilder:
    """Holds every build until released or until its caller's deadline has passed, then builds."""

    def __init__(self, inner: MetaRangeBuilder) -> None:
        self.inner = inner
        self.release = threading.Event()
        self.building = threading.Event()
        self.finished = threading.Event()
        self.error: BaseException | None = None

    def apply_tokens(self, build: Build, deadline: Deadline = NO_DEADLINE) -> ApplyResult:
        self.building.set()
        try:
            remaining = deadline.remaining()
            # Outlast the deadline: the build is still running when the client gives up.
            self.release.wait(30 if remaining is None else remaining + 0.05)
            return self.inner.apply_tokens(build, deadline)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.finished.set()

    def drop_token(self, token: StagingToken) -> None:
        self.inner.drop_token(token)

    def close(self) -> None:
        self.inner.close()


def test_commit_past_its_deadline_stops_and_leaves_the_branch_consistent(env: GravelerEnv) -> None:
    repo = env.new_repo("deadline")
    for i in range(50):
        env.put(repo, "main", f"k/{i:03d}", f"v{i}")
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    slow = _SlowBuilder(env.graveler.builder)
    env.graveler.builder = slow
    try:
        with pytest.raises(grpc.RpcError) as failed:
            env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="late"), timeout=1.0)
        assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert slow.building.is_set()
        # The server side stopped on its own: the build gave up at the deadline.
        assert slow.finished.wait(30), "the abandoned build never ended"
        assert isinstance(slow.error, DeadlineExceeded), slow.error
    finally:
        slow.release.set()
        env.graveler.builder = slow.inner

    # Nothing moved; the staged values stay visible (in the token the commit sealed).
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == head
    assert env.etag(repo, "main", "k/007") == "v7"
    assert len(env.list_all(repo, "main")) == 50

    # The next commit takes them, on top of the old head: the late one left no commit behind.
    commit = env.commit(repo, "main", "on time")
    assert list(commit.parents) == [head]
    assert env.etag(repo, "main@", "k/049") == "v49"
    log = env.stub.Log(api.LogRequest(repository=repo, ref="main"))
    assert [c.message for c in log.commits] == ["on time", "Repository created"]
    assert env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main")).items == []
