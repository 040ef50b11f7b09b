"""Destructive repository administration is not writing: GC rules and runs, refs dump and restore
need their own actions, which admins hold and writers do not; GC's own user holds a run only.

Through real auth and graveler servers; the probes (what each call needs, made ready as the
admin) are the matrix's.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from services.auth.setup import DEVELOPERS
from silt import iam_actions as a
from silt.graveler.v1 import graveler_pb2 as api
from silt.rpc.signing import Credentials
from tests.integration.auth.support import Stack, code_of, details_of
from tests.integration.auth.test_matrix import PROBES

METHODS = {
    "SetGCRules": a.SET_GC_RULES,
    "DeleteGCRules": a.DELETE_GC_RULES,
    "PrepareGC": a.PREPARE_GC,
    "DumpRefs": a.DUMP_REFS,
    "RestoreRefs": a.RESTORE_REFS,
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_developer_may_not_but_an_admin_may(stack: Stack, method: str) -> None:
    action = METHODS[method]
    _, developer = stack.new_user([DEVELOPERS], prefix="developer")
    assert code_of(PROBES[a.WRITE_REPO](stack, developer)) == grpc.StatusCode.OK  # a writer indeed
    denied = PROBES[action](stack, developer)
    assert code_of(denied) == grpc.StatusCode.PERMISSION_DENIED
    assert action in details_of(denied)
    assert code_of(PROBES[action](stack, stack.admin)) == grpc.StatusCode.OK


def test_gc_user_may_run_gc_and_nothing_else(stack: Stack) -> None:
    gc = stack.services["gc"]
    repo = stack.new_repo()
    assert code_of(lambda: stack.gv(gc).GetRepository(api.GetRepositoryRequest(name=repo))) == grpc.StatusCode.OK
    assert code_of(PROBES[a.PREPARE_GC](stack, gc)) == grpc.StatusCode.OK
    for action in (a.SET_GC_RULES, a.DELETE_GC_RULES, a.DUMP_REFS, a.RESTORE_REFS, a.WRITE_REPO, a.CREATE_USER):
        assert code_of(PROBES[action](stack, gc)) == grpc.StatusCode.PERMISSION_DENIED, action


def test_a_recorded_commit_needs_restore_refs_beside_write(stack: Stack) -> None:
    """A commit recorded as made elsewhere (its date, committer and parents: `silt migrate
    lakefs`) writes history, as a restore does: a writer may commit, not record."""
    repo = stack.new_repo()
    admin = stack.gv(stack.admin)
    base = admin.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="side", source_ref="main"))
    side = admin.Commit(api.CommitRequest(repository=repo, branch="side", message="side", allow_empty=True)).id
    _, developer = stack.new_user([DEVELOPERS], prefix="developer")
    recorded = api.RecordedCommit(creation_date=Timestamp(seconds=1_500_000_000), merge_parents=[side])

    def record(credentials: Credentials) -> api.CommitInfo:
        request = api.CommitRequest(
            repository=repo,
            branch="main",
            message="merged in 2017",
            committer="grace",
            allow_empty=True,
            recorded=recorded,
        )
        return stack.gv(credentials).Commit(request, timeout=30)

    denied = code_of(lambda: record(developer))
    assert denied == grpc.StatusCode.PERMISSION_DENIED
    assert a.RESTORE_REFS in details_of(lambda: record(developer))
    plain = api.CommitRequest(repository=repo, branch="main", message="now", committer="grace", allow_empty=True)
    mine = stack.gv(developer).Commit(plain, timeout=30)
    assert mine.committer != "grace"  # an ordinary commit is the caller's, whatever it names

    made = record(stack.admin)
    assert (made.committer, made.creation_date.seconds) == ("grace", 1_500_000_000)
    assert list(made.parents) == [mine.id, side] and base != made.id

    bad = api.RecordedCommit(creation_date=Timestamp(seconds=1), merge_parents=["not-a-commit-id"])
    request = api.CommitRequest(repository=repo, branch="main", message="m", committer="g", recorded=bad)
    assert code_of(lambda: admin.Commit(request)) == grpc.StatusCode.INVALID_ARGUMENT
    unknown = api.RecordedCommit(creation_date=Timestamp(seconds=1), merge_parents=["0" * 64])
    request = api.CommitRequest(repository=repo, branch="main", message="m", committer="g", recorded=unknown)
    assert code_of(lambda: admin.Commit(request)) == grpc.StatusCode.NOT_FOUND
    head = admin.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    assert head == made.id  # a refused recording leaves the branch as it was
