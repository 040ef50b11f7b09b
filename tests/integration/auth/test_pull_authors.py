"""Who opens, reviews and comments on a pull request is the authenticated caller; only the REST
API's service user (auth:ActForUser on users/<id>, granted literally by setup) may name the user
it acts for, and the real caller is recorded beside that name. Through real, authenticated gRPC."""

from __future__ import annotations

import io

import grpc

from services.auth.setup import ANALYSTS, DEVELOPERS, SERVICES
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as auth_pb
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as gpb
from tests.integration.auth.support import Stack, code_of, unique


def test_authors_are_callers_unless_a_trusted_service_names_them(stack: Stack) -> None:
    repo = stack.new_repo()
    admin = stack.gv(stack.admin)
    for branch in ("feature", "second"):
        admin.CreateBranch(api.CreateBranchRequest(repository=repo, name=branch, source_ref="main"))
        entry = gpb.Entry(physical_address=f"data/{branch}", size=1, etag=branch)
        admin.StageEntry(api.StageEntryRequest(repository=repo, branch=branch, key=branch, entry=entry))
        admin.Commit(api.CommitRequest(repository=repo, branch=branch, message=branch))
    dev_id, dev = stack.new_user([DEVELOPERS], prefix="dev")
    other_id, other = stack.new_user([DEVELOPERS], prefix="other")
    _, other_service = stack.new_user([SERVICES], prefix="svc")
    service = stack.services["api"]
    _, analyst = stack.new_user([ANALYSTS], prefix="analyst")

    # A developer naming someone else is still the author.
    created = stack.gv(dev).CreatePullRequest(
        api.CreatePullRequestRequest(
            repository=repo, title="t", source_branch="feature", destination_branch="main", author=other_id
        )
    )
    pull = created.pull_request
    assert pull.author == dev_id
    # So the developer cannot approve their own pull request by naming another reviewer.
    own = api.SubmitPullRequestReviewRequest(
        repository=repo, id=pull.id, verdict=gpb.REVIEW_VERDICT_APPROVE, author=other_id
    )
    assert code_of(lambda: stack.gv(dev).SubmitPullRequestReview(own)) == grpc.StatusCode.FAILED_PRECONDITION
    # Neither another service (auth:Authorize) nor an admin (`*`) may name reviewers: one
    # caller must not approve under many names.
    for caller in (other_service, stack.admin):
        info = stack.gv(caller).SubmitPullRequestReview(own)
        assert other_id not in [r.author for r in info.pull_request.reviews]
    # The REST API's own user acts for the user it authenticated; the real caller is kept.
    info = stack.gv(service).SubmitPullRequestReview(own)
    mine = [(r.author, r.verdict, r.submitted_by) for r in info.pull_request.reviews if r.author == other_id]
    assert mine == [(other_id, gpb.REVIEW_VERDICT_APPROVE, "svc-api")]
    assert pull.submitted_by == dev_id
    comment = stack.gv(other).AddPullRequestComment(
        api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body="hi", author=dev_id)
    )
    assert (comment.author, comment.submitted_by) == (other_id, other_id)
    named = stack.gv(service).AddPullRequestComment(
        api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body="via api", author=dev_id)
    )
    assert (named.author, named.submitted_by) == (dev_id, "svc-api")

    # Reading is ReadRepo; taking part is WriteRepo.
    reader = stack.gv(analyst)
    assert reader.GetPullRequest(api.GetPullRequestRequest(repository=repo, id=pull.id)).pull_request.id == pull.id
    comment_request = api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body="no")
    assert code_of(lambda: reader.AddPullRequestComment(comment_request)) == grpc.StatusCode.PERMISSION_DENIED
    merge_request = api.MergePullRequestRequest(repository=repo, id=pull.id)
    assert code_of(lambda: reader.MergePullRequest(merge_request)) == grpc.StatusCode.PERMISSION_DENIED
    # The merge commit is by the user the service names, or else by the caller.
    merged = stack.gv(service).MergePullRequest(
        api.MergePullRequestRequest(repository=repo, id=pull.id, committer=dev_id)
    )
    assert merged.merge.commit.committer == dev_id
    assert merged.pull_request.pull_request.status == gpb.PULL_REQUEST_STATUS_MERGED
    second = stack.gv(dev).CreatePullRequest(
        api.CreatePullRequestRequest(repository=repo, title="t2", source_branch="second", destination_branch="main")
    )
    by_dev = stack.gv(dev).MergePullRequest(
        api.MergePullRequestRequest(repository=repo, id=second.pull_request.id, committer=other_id)
    )
    assert by_dev.merge.commit.committer == dev_id
    assert "silt.requested-committer" not in by_dev.merge.commit.metadata

    # Writers may not set protection rules that bind them.
    rule = gpb.BranchProtectionRule(pattern="main", block_direct_writes=True)
    protect = api.SetBranchProtectionRequest(repository=repo, rules=[rule])
    assert code_of(lambda: stack.gv(dev).SetBranchProtection(protect)) == grpc.StatusCode.PERMISSION_DENIED


# Refuses the branch or tag change when its hook could read secret.txt: whose reads the hook
# made shows in whether the change went through.
SECRET_READER_HOOK = b"""name: secret-reader
on:
  pre-create-branch:
  pre-create-tag:
  pre-delete-tag:
hooks:
  - id: read
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local status, _ = lakefs.get_object(action.repository_id, "main", "secret.txt")
        if status == 200 then error("read secret.txt") end
"""


def _commit_files(stack: Stack, repo: str, files: dict[str, bytes]) -> None:
    admin = stack.gv(stack.admin)
    namespace = stack.graveler.refs.repository(repo).namespace
    for key, data in files.items():
        address = unique("data/hook")
        stack.graveler.committed.adapter.put(namespace, address, io.BytesIO(data), len(data))
        entry = gpb.Entry(physical_address=address, size=len(data), etag=address)
        admin.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry))
    admin.Commit(api.CommitRequest(repository=repo, branch="main", message="files"))


def test_hooks_read_as_the_named_user_only_when_a_trusted_service_names_them(stack: Stack) -> None:
    """CreateBranch, CreateTag and DeleteTag name the user their hooks read as (`user`); a caller
    without auth:ActForUser naming someone who may read more still has its hooks read as itself."""
    repo = stack.new_repo()
    _commit_files(stack, repo, {"secret.txt": b"s", "_lakefs_actions/reader.yaml": SECRET_READER_HOOK})
    reader_id, _ = stack.new_user([DEVELOPERS], prefix="reader")
    narrowed_id, narrowed = stack.new_user([DEVELOPERS], prefix="narrowed")
    deny = auth_pb.Statement(
        effect=auth_pb.EFFECT_DENY, actions=[a.READ_OBJECT], resources=[a.object_resource(repo, "secret.txt")]
    )
    policy_id = unique("no-secret")
    admin_auth = stack.auth(stack.admin)
    admin_auth.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[deny]))
    admin_auth.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=narrowed_id))
    narrowed_gv, service = stack.gv(narrowed), stack.gv(stack.services["api"])
    refused = grpc.StatusCode.FAILED_PRECONDITION

    # The narrowed user naming the reader: its hooks still read as itself, and cannot read the secret.
    narrowed_gv.CreateBranch(api.CreateBranchRequest(repository=repo, name="b1", source_ref="main", user=reader_id))
    narrowed_gv.CreateTag(api.CreateTagRequest(repository=repo, id="t1", ref="main", user=reader_id))
    narrowed_gv.DeleteTag(api.DeleteTagRequest(repository=repo, id="t1", user=reader_id))
    # The REST API's user naming the narrowed user: read as that user, refused the secret too.
    service.CreateTag(api.CreateTagRequest(repository=repo, id="t2", ref="main", user=narrowed_id))
    # The REST API's user naming the reader: its hooks read the secret, and refuse each change.
    by_reader = api.CreateBranchRequest(repository=repo, name="b2", source_ref="main", user=reader_id)
    assert code_of(lambda: service.CreateBranch(by_reader)) == refused
    tag_by_reader = api.CreateTagRequest(repository=repo, id="t3", ref="main", user=reader_id)
    assert code_of(lambda: service.CreateTag(tag_by_reader)) == refused
    untag_by_reader = api.DeleteTagRequest(repository=repo, id="t2", user=reader_id)
    assert code_of(lambda: service.DeleteTag(untag_by_reader)) == refused
