"""Branch protection rules through graveler's gRPC API: storage with an etag, and enforcement
on every way a branch changes (staging writes and deletes, commit, reset, revert, cherry-pick,
deletion, direct merge)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
import pytest

from silt.errors import PROTECTED_BRANCH_COMMIT, is_protection_refusal, lakefs_refusal
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of

PROTECTED = "cannot write to protected branch"


def protect(
    env: GravelerEnv, repo: str, *rules: pb.BranchProtectionRule, if_match: str = ""
) -> api.BranchProtectionInfo:
    return env.stub.SetBranchProtection(
        api.SetBranchProtectionRequest(repository=repo, rules=list(rules), if_match=if_match)
    )


def refused(call: Callable[[], object]) -> str:
    """The details of a call refused by protection."""
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, err.value.details()
    details = err.value.details() or ""
    assert is_protection_refusal(details), details
    return details


def test_rules_round_trip_with_an_etag(env: GravelerEnv) -> None:
    repo = env.new_repo()
    empty = env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo))
    assert list(empty.rules) == [] and empty.etag
    rule = pb.BranchProtectionRule(pattern="main", block_direct_writes=True)
    first = protect(env, repo, rule, if_match=empty.etag)
    assert list(first.rules) == [rule] and first.etag != empty.etag
    got = env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo))
    assert (list(got.rules), got.etag) == ([rule], first.etag)
    # A stale etag is refused and changes nothing; setting the same rules again changes the etag.
    stale = api.SetBranchProtectionRequest(repository=repo, rules=[], if_match=empty.etag)
    assert code_of(lambda: env.stub.SetBranchProtection(stale)) == grpc.StatusCode.FAILED_PRECONDITION
    assert list(env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo)).rules) == [rule]
    assert protect(env, repo, rule).etag != first.etag


def test_concurrent_sets_with_one_etag_one_wins(env: GravelerEnv) -> None:
    repo = env.new_repo()
    etag = env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo)).etag
    barrier = threading.Barrier(4)
    codes: list[grpc.StatusCode] = []

    def attempt(i: int) -> None:
        barrier.wait(timeout=10)
        rule = pb.BranchProtectionRule(pattern=f"b{i}", block_direct_writes=True)
        request = api.SetBranchProtectionRequest(repository=repo, rules=[rule], if_match=etag)
        try:
            env.stub.SetBranchProtection(request, timeout=30)
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as exc:
            codes.append(exc.code())

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(c.name for c in codes) == ["FAILED_PRECONDITION"] * 3 + ["OK"]


@pytest.mark.parametrize(
    "rules",
    [
        [pb.BranchProtectionRule(pattern="", block_direct_writes=True)],
        [pb.BranchProtectionRule(pattern="x" * 257, block_direct_writes=True)],
        [pb.BranchProtectionRule(pattern="*a" * 33, block_direct_writes=True)],
        [pb.BranchProtectionRule(pattern="main", required_approvals=-1)],
        [pb.BranchProtectionRule(pattern="main", required_approvals=101)],
        [pb.BranchProtectionRule(pattern="main"), pb.BranchProtectionRule(pattern="main")],
        [pb.BranchProtectionRule(pattern=f"b{i}") for i in range(101)],
    ],
    ids=["empty", "long", "wildcards", "negative", "too-many-approvals", "duplicate", "too-many-rules"],
)
def test_bad_rules_are_refused(env: GravelerEnv, rules: list[pb.BranchProtectionRule]) -> None:
    repo = env.new_repo()
    request = api.SetBranchProtectionRequest(repository=repo, rules=rules)
    assert code_of(lambda: env.stub.SetBranchProtection(request)) == grpc.StatusCode.INVALID_ARGUMENT
    assert list(env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo)).rules) == []


def test_patterns_match_in_linear_time(env: GravelerEnv) -> None:
    repo = env.new_repo()
    # A backtracking matcher takes exponential time on this pattern against this name.
    protect(env, repo, pb.BranchProtectionRule(pattern="*a" * 32 + "b", block_direct_writes=True))
    name = "a" * 250
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=name, source_ref="main"))
    started = time.monotonic()
    env.put(repo, name, "k")  # no match: written
    assert time.monotonic() - started < 2


def test_direct_writes_are_refused_on_every_path(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "base", "0")
    first = env.commit(repo, "main", "first")
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="release-1", source_ref="main"))
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    env.put(repo, "release-1", "staged", "1")
    env.put(repo, "feature", "f", "1")
    feature_commit = env.commit(repo, "feature", "feature work")
    protect(env, repo, pb.BranchProtectionRule(pattern="release-*", block_direct_writes=True))

    entry = pb.Entry(physical_address="data/x", size=1, etag="x")
    calls: dict[str, Callable[[], object]] = {
        "stage": lambda: env.stub.StageEntry(
            api.StageEntryRequest(repository=repo, branch="release-1", key="k", entry=entry)
        ),
        "delete": lambda: env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="release-1", key="base")),
        "commit": lambda: env.commit(repo, "release-1", "direct"),
        "reset": lambda: env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="release-1", all=True)),
        "reset-hard": lambda: env.stub.ResetBranch(
            api.ResetBranchRequest(repository=repo, branch="release-1", hard_ref=first.id)
        ),
        "revert": lambda: env.stub.Revert(api.RevertRequest(repository=repo, branch="release-1", ref=first.id)),
        "cherry-pick": lambda: env.stub.CherryPick(
            api.CherryPickRequest(repository=repo, branch="release-1", ref=feature_commit.id)
        ),
        "delete-branch": lambda: env.stub.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="release-1")),
    }
    for name, call in calls.items():
        details = refused(call)
        assert "release-1" in details, name
        # lakeFS's own sentence first, which the REST API answers alone: a commit has its own.
        assert lakefs_refusal(details) == (PROTECTED_BRANCH_COMMIT if name == "commit" else PROTECTED), name
    # Nothing changed: the staged write is still there, the branch still at the same commit.
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="release-1")).commit_id == first.id
    assert env.list_all(repo, "release-1") == ["base", "staged"]
    # Other branches are not protected; a merge into a branch that only blocks direct writes is
    # allowed (lakeFS's protected branches change by merges).
    env.put(repo, "feature", "g", "2")
    env.stub.Merge(api.MergeRequest(repository=repo, source_ref="feature", destination_branch="main"))
    # (release-1 has staged changes: a merge into it would be refused as dirty; reset needs the
    # protection lifted.) Lifting the rules lets writes through again.
    protect(env, repo)
    env.put(repo, "release-1", "k", "3")
    env.commit(repo, "release-1", "now allowed")


def test_required_approvals_refuse_direct_merges_too(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    env.put(repo, "feature", "f", "1")
    env.commit(repo, "feature", "feature work")
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=1))
    details = refused(
        lambda: env.stub.Merge(api.MergeRequest(repository=repo, source_ref="feature", destination_branch="main"))
    )
    assert "pull request" in details
    refused(lambda: env.put(repo, "main", "k"))
    # The most demanding of several matching rules applies.
    protect(
        env,
        repo,
        pb.BranchProtectionRule(pattern="ma*", block_direct_writes=True),
        pb.BranchProtectionRule(pattern="*", required_approvals=0),
    )
    env.stub.Merge(api.MergeRequest(repository=repo, source_ref="feature", destination_branch="main"))
    refused(lambda: env.put(repo, "main", "k"))
    env.put(repo, "feature", "k")  # `*` alone with no requirement protects nothing
