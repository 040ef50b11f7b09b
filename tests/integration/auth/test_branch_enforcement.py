"""Branch-scoped policies enforced by graveler itself (real auth and graveler servers): its calls
on one branch ask the branch action of the caller, and a commit, merge, revert, cherry-pick or
pull request merge the REST API's service user makes for a user asks it of that user too, so
that no route around a branch's Deny exists."""

from __future__ import annotations

import grpc

from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as auth_pb
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as gpb
from silt.graveler.v1.graveler_pb2_grpc import GravelerServiceStub
from tests.integration.auth.support import Stack, code_of, details_of, unique

DENIED = grpc.StatusCode.PERMISSION_DENIED


def _writer_denied_on_main(stack: Stack, repo: str) -> str:
    """A user with WriteRepo on repo and a Deny of WriteBranch on its main."""
    user_id, _ = stack.new_user(prefix="branch")
    policy_id = unique("branch-policy")
    statements = [
        auth_pb.Statement(effect=auth_pb.EFFECT_ALLOW, actions=[a.READ_REPO, a.WRITE_REPO], resources=[repo]),
        auth_pb.Statement(effect=auth_pb.EFFECT_DENY, actions=[a.WRITE_BRANCH], resources=[f"{repo}@main"]),
    ]
    admin = stack.auth(stack.admin)
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=statements))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    return user_id


def _stage(graveler: GravelerServiceStub, repo: str, branch: str, key: str) -> None:
    entry = gpb.Entry(etag=key, physical_address=f"data/{key}")
    graveler.StageEntry(api.StageEntryRequest(repository=repo, branch=branch, key=key, entry=entry))


def test_the_api_cannot_commit_for_a_user_denied_the_branch(stack: Stack) -> None:
    repo = stack.new_repo("branchscope")
    user = _writer_denied_on_main(stack, repo)
    service, admin = stack.gv(stack.services["api"]), stack.gv(stack.admin)
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="dev", source_ref="main"))
    _stage(admin, repo, "dev", "on-dev")
    picked = admin.Commit(api.CommitRequest(repository=repo, branch="dev", message="on dev")).id
    _stage(admin, repo, "main", "on-main")

    made_for_user = [
        lambda: service.Commit(api.CommitRequest(repository=repo, branch="main", message="m", committer=user)),
        lambda: service.Merge(
            api.MergeRequest(repository=repo, source_ref="dev", destination_branch="main", committer=user)
        ),
        lambda: service.CherryPick(api.CherryPickRequest(repository=repo, branch="main", ref=picked, committer=user)),
        lambda: service.Revert(
            api.RevertRequest(repository=repo, branch="main", ref="main", committer=user, allow_empty=True)
        ),
    ]
    for call in made_for_user:
        assert code_of(call) == DENIED
        assert f"{repo}@main" in details_of(call) and user in details_of(call)
    # The same calls for the user on another branch, and for someone not denied, go through.
    on_dev = api.CommitRequest(repository=repo, branch="dev", message="d", committer=user, allow_empty=True)
    assert service.Commit(on_dev).committer == user
    made = service.Commit(api.CommitRequest(repository=repo, branch="main", message="m", committer="admin"))
    assert made.committer == "admin"


def test_a_pull_request_merge_asks_for_its_destination(stack: Stack) -> None:
    repo = stack.new_repo("branchscope-pr")
    user = _writer_denied_on_main(stack, repo)
    creds = stack.new_key(user)
    admin = stack.gv(stack.admin)
    admin.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    _stage(admin, repo, "feature", "f")
    admin.Commit(api.CommitRequest(repository=repo, branch="feature", message="f"))
    pull = admin.CreatePullRequest(
        api.CreatePullRequestRequest(repository=repo, title="t", source_branch="feature", destination_branch="main")
    ).pull_request.id
    merge = api.MergePullRequestRequest(repository=repo, id=pull)
    # The user itself, over gRPC: WriteRepo is not enough with a Deny on the destination.
    assert code_of(lambda: stack.gv(creds).MergePullRequest(merge)) == DENIED
    assert a.COMMIT_BRANCH in details_of(lambda: stack.gv(creds).MergePullRequest(merge))
    # The REST API's service user, merging for the user: refused too.
    for_user = api.MergePullRequestRequest(repository=repo, id=pull, committer=user)
    assert code_of(lambda: stack.gv(stack.services["api"]).MergePullRequest(for_user)) == DENIED
    merged = admin.MergePullRequest(merge)
    assert merged.pull_request.pull_request.status == gpb.PULL_REQUEST_STATUS_MERGED
