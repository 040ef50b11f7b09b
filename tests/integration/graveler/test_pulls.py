"""Pull requests through graveler's gRPC API: the lifecycle, comments, reviews, merging under
branch protection, concurrency (merges racing merges and reviews), dump / restore, deletion."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

import grpc
import pytest

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of
from tests.integration.graveler.test_protection import PROTECTED, protect

APPROVE = pb.REVIEW_VERDICT_APPROVE
REQUEST_CHANGES = pb.REVIEW_VERDICT_REQUEST_CHANGES


def feature(env: GravelerEnv, repo: str, name: str = "feature", key: str = "f") -> None:
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=name, source_ref="main"))
    env.put(repo, name, key, "1")
    env.commit(repo, name, f"work on {name}")


def open_pull(env: GravelerEnv, repo: str, source: str = "feature", title: str = "Add f") -> pb.PullRequest:
    request = api.CreatePullRequestRequest(
        repository=repo,
        title=title,
        description="details",
        source_branch=source,
        destination_branch="main",
        author="alice",
    )
    return env.stub.CreatePullRequest(request).pull_request


def review(env: GravelerEnv, repo: str, pull_id: str, author: str, verdict: int, body: str = "") -> api.PullRequestInfo:
    return env.stub.SubmitPullRequestReview(
        api.SubmitPullRequestReviewRequest(repository=repo, id=pull_id, author=author, verdict=verdict, body=body)  # type: ignore[arg-type]
    )


def merge_pull(env: GravelerEnv, repo: str, pull_id: str, **kwargs: object) -> api.MergePullRequestResponse:
    return env.stub.MergePullRequest(api.MergePullRequestRequest(repository=repo, id=pull_id, **kwargs), timeout=60)  # type: ignore[arg-type]


def get(env: GravelerEnv, repo: str, pull_id: str) -> api.PullRequestInfo:
    return env.stub.GetPullRequest(api.GetPullRequestRequest(repository=repo, id=pull_id))


def test_create_get_update_close_reopen(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    pull = open_pull(env, repo)
    assert pull.status == pb.PULL_REQUEST_STATUS_OPEN
    assert (pull.title, pull.description, pull.source_branch, pull.destination_branch, pull.author) == (
        "Add f",
        "details",
        "feature",
        "main",
        "alice",
    )
    assert pull.creation_date.seconds > 0 and not pull.HasField("closed_date") and not pull.merged_commit_id
    assert get(env, repo, pull.id).pull_request == pull

    update = api.UpdatePullRequestRequest(repository=repo, id=pull.id, title="Add f, better")
    changed = env.stub.UpdatePullRequest(update).pull_request
    assert (changed.title, changed.description) == ("Add f, better", "details")
    closed = env.stub.UpdatePullRequest(
        api.UpdatePullRequestRequest(repository=repo, id=pull.id, status=pb.PULL_REQUEST_STATUS_CLOSED)
    ).pull_request
    assert closed.status == pb.PULL_REQUEST_STATUS_CLOSED and closed.HasField("closed_date")
    assert code_of(lambda: merge_pull(env, repo, pull.id)) == grpc.StatusCode.FAILED_PRECONDITION
    reopened = env.stub.UpdatePullRequest(
        api.UpdatePullRequestRequest(repository=repo, id=pull.id, status=pb.PULL_REQUEST_STATUS_OPEN, description="")
    ).pull_request
    assert reopened.status == pb.PULL_REQUEST_STATUS_OPEN and not reopened.HasField("closed_date")
    assert reopened.description == ""


@pytest.mark.parametrize(
    "change",
    [
        {"title": ""},
        {"title": "x" * 1025},
        {"description": "x" * (64 * 1024 + 1)},
        {"source_branch": "main"},
    ],
    ids=["no-title", "long-title", "long-description", "same-branches"],
)
def test_bad_pull_requests_are_refused(env: GravelerEnv, change: dict[str, str]) -> None:
    repo = env.new_repo()
    feature(env, repo)
    fields = {"title": "t", "source_branch": "feature", "destination_branch": "main", **change}
    request = api.CreatePullRequestRequest(repository=repo, **fields)
    assert code_of(lambda: env.stub.CreatePullRequest(request)) == grpc.StatusCode.INVALID_ARGUMENT
    assert not env.stub.ListPullRequests(api.ListPullRequestsRequest(repository=repo)).pull_requests


def test_unknown_pull_requests_and_branches(env: GravelerEnv) -> None:
    repo = env.new_repo()
    request = api.CreatePullRequestRequest(repository=repo, title="t", source_branch="nope", destination_branch="main")
    assert code_of(lambda: env.stub.CreatePullRequest(request)) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: get(env, repo, "0123abcd")) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: get(env, repo, "a/b")) == grpc.StatusCode.INVALID_ARGUMENT


def test_list_by_status_with_paging(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    ids = [open_pull(env, repo, title=f"pr {i}").id for i in range(5)]
    assert ids == sorted(ids)  # ids sort by creation
    for pull_id in ids[1:3]:
        env.stub.UpdatePullRequest(
            api.UpdatePullRequestRequest(repository=repo, id=pull_id, status=pb.PULL_REQUEST_STATUS_CLOSED)
        )

    def listed(status: int, amount: int) -> list[str]:
        out: list[str] = []
        after = ""
        while True:
            page = env.stub.ListPullRequests(
                api.ListPullRequestsRequest(repository=repo, status=status, after=after, amount=amount)  # type: ignore[arg-type]
            )
            assert len(page.pull_requests) <= amount
            out.extend(p.pull_request.id for p in page.pull_requests)
            if not page.has_more:
                return out
            after = page.next_after

    assert listed(0, 2) == ids
    assert listed(pb.PULL_REQUEST_STATUS_OPEN, 1) == [ids[0], ids[3], ids[4]]
    assert listed(pb.PULL_REQUEST_STATUS_CLOSED, 10) == ids[1:3]
    assert listed(pb.PULL_REQUEST_STATUS_MERGED, 10) == []
    page = env.stub.ListPullRequests(api.ListPullRequestsRequest(repository=repo, after=ids[3], amount=10**9))
    assert [p.pull_request.id for p in page.pull_requests] == [ids[4]] and not page.has_more
    negative = api.ListPullRequestsRequest(repository=repo, amount=-1)
    assert code_of(lambda: env.stub.ListPullRequests(negative)) == grpc.StatusCode.INVALID_ARGUMENT


def test_comments(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    pull = open_pull(env, repo)
    bodies = [f"comment {i}" for i in range(5)]
    made = [
        env.stub.AddPullRequestComment(
            api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body=body, author="bob")
        )
        for body in bodies
    ]
    assert all(c.author == "bob" and c.created.seconds > 0 for c in made)
    first = env.stub.ListPullRequestComments(api.ListPullRequestCommentsRequest(repository=repo, id=pull.id, amount=3))
    assert [c.body for c in first.comments] == bodies[:3] and first.has_more
    rest = env.stub.ListPullRequestComments(
        api.ListPullRequestCommentsRequest(repository=repo, id=pull.id, after=first.comments[-1].id, amount=3)
    )
    assert [c.body for c in rest.comments] == bodies[3:] and not rest.has_more
    for body in ("", "x" * (64 * 1024 + 1)):
        bad = api.AddPullRequestCommentRequest(repository=repo, id=pull.id, body=body)
        assert code_of(lambda bad=bad: env.stub.AddPullRequestComment(bad)) == grpc.StatusCode.INVALID_ARGUMENT
    missing = api.AddPullRequestCommentRequest(repository=repo, id="00aa", body="hi")
    assert code_of(lambda: env.stub.AddPullRequestComment(missing)) == grpc.StatusCode.NOT_FOUND


def test_reviews_one_verdict_per_reviewer(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    pull = open_pull(env, repo)
    review(env, repo, pull.id, "bob", REQUEST_CHANGES, "fix it")
    review(env, repo, pull.id, "carol", APPROVE)
    info = review(env, repo, pull.id, "bob", APPROVE, "fixed")
    assert info.approvals == 2
    reviews = env.stub.ListPullRequestReviews(api.ListPullRequestReviewsRequest(repository=repo, id=pull.id)).reviews
    assert [(r.author, r.verdict, r.body) for r in reviews] == [("bob", APPROVE, "fixed"), ("carol", APPROVE, "")]
    # The author cannot review their own pull request; a verdict is required; bodies are bounded.
    assert code_of(lambda: review(env, repo, pull.id, "alice", APPROVE)) == grpc.StatusCode.FAILED_PRECONDITION
    assert code_of(lambda: review(env, repo, pull.id, "dan", 0)) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(lambda: review(env, repo, pull.id, "dan", APPROVE, "x" * 4097)) == grpc.StatusCode.INVALID_ARGUMENT


def test_merge_unprotected(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    main_before = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    source = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="feature")).commit_id
    pull = open_pull(env, repo)
    # No deadline on this call: the merge claim's lease is capped, not centuries long.
    done = env.stub.MergePullRequest(api.MergePullRequestRequest(repository=repo, id=pull.id))
    merged = done.pull_request.pull_request
    assert merged.status == pb.PULL_REQUEST_STATUS_MERGED and merged.HasField("closed_date")
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    assert merged.merged_commit_id == head == done.merge.commit.id
    assert list(done.merge.commit.parents) == [main_before, source]
    assert done.merge.commit.message == f"Merge pull request {pull.id}: Add f"
    assert env.etag(repo, "main", "f") == "1"
    assert code_of(lambda: merge_pull(env, repo, pull.id)) == grpc.StatusCode.FAILED_PRECONDITION
    reopen = api.UpdatePullRequestRequest(repository=repo, id=pull.id, status=pb.PULL_REQUEST_STATUS_OPEN)
    assert code_of(lambda: env.stub.UpdatePullRequest(reopen)) == grpc.StatusCode.FAILED_PRECONDITION
    assert code_of(lambda: review(env, repo, pull.id, "bob", APPROVE)) == grpc.StatusCode.FAILED_PRECONDITION


def test_conflicts_leave_the_pull_request_open_and_strategies_resolve_them(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    env.put(repo, "feature", "k", "feature")
    env.commit(repo, "feature", "feature")
    env.put(repo, "main", "k", "main")
    env.commit(repo, "main", "main")
    pull = open_pull(env, repo)
    done = merge_pull(env, repo, pull.id)
    assert [c.key for c in done.merge.conflicts] == ["k"]
    assert done.pull_request.pull_request.status == pb.PULL_REQUEST_STATUS_OPEN
    unknown = api.MergePullRequestRequest(repository=repo, id=pull.id, strategy=42)  # type: ignore[arg-type]
    assert code_of(lambda: env.stub.MergePullRequest(unknown)) == grpc.StatusCode.INVALID_ARGUMENT
    done = merge_pull(env, repo, pull.id, strategy=api.MERGE_STRATEGY_SOURCE_WINS)
    assert done.pull_request.pull_request.status == pb.PULL_REQUEST_STATUS_MERGED
    assert env.etag(repo, "main", "k") == "feature"


def test_merge_needs_the_approvals_protection_requires(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=2))
    pull = open_pull(env, repo)
    info = get(env, repo, pull.id)
    assert (info.approvals, info.required_approvals) == (0, 2)
    assert PROTECTED in info.merge_blocked_reason and "0 of 2" in info.merge_blocked_reason

    def blocked() -> str:
        with pytest.raises(grpc.RpcError) as err:
            merge_pull(env, repo, pull.id)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        return err.value.details() or ""

    review(env, repo, pull.id, "bob", APPROVE)
    assert "1 of 2" in blocked()
    review(env, repo, pull.id, "carol", REQUEST_CHANGES, "no")
    review(env, repo, pull.id, "dan", APPROVE)
    assert "changes requested by carol" in blocked()
    assert "changes requested by carol" in get(env, repo, pull.id).merge_blocked_reason
    info = review(env, repo, pull.id, "carol", APPROVE)
    assert (info.approvals, info.merge_blocked_reason) == (3, "")
    done = merge_pull(env, repo, pull.id)
    assert done.pull_request.pull_request.status == pb.PULL_REQUEST_STATUS_MERGED
    assert env.etag(repo, "main", "f") == "1"


def _race(calls: list[Callable[[], object]]) -> list[grpc.StatusCode]:
    barrier = threading.Barrier(len(calls))
    codes: list[grpc.StatusCode | None] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            calls[index]()
            codes[index] = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            codes[index] = exc.code()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert all(code is not None for code in codes)
    return [code for code in codes if code is not None]


def _after(delay: float | None, call: Callable[..., object], *args: object) -> object:
    if delay is not None:  # the scenario's ordering: even sleep(0) lets the other thread run first
        time.sleep(delay)
    return call(*args)


def test_concurrent_merges_of_one_pull_request_one_wins(env: GravelerEnv) -> None:
    repo = env.new_repo()
    for round_ in range(5):
        name = f"feature-{round_}"
        feature(env, repo, name, key=f"k{round_}")
        pull = open_pull(env, repo, source=name)
        before = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
        codes = _race([functools.partial(merge_pull, env, repo, pull.id)] * 3)
        assert sorted(c.name for c in codes) == ["FAILED_PRECONDITION", "FAILED_PRECONDITION", "OK"]
        merged = get(env, repo, pull.id).pull_request
        head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
        assert merged.status == pb.PULL_REQUEST_STATUS_MERGED and merged.merged_commit_id == head
        # Exactly one merge commit on main.
        assert env.stub.GetCommit(api.GetCommitRequest(repository=repo, commit_id=head)).parents[0] == before


def test_reviews_racing_a_merge_never_both_count_and_lose(env: GravelerEnv) -> None:
    """A request for changes racing a merge either lands first (the merge is refused) or after the
    merge claimed the pull request (the review is refused): never accepted and then ignored."""
    repo = env.new_repo()
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=1))
    outcomes = set()
    for round_ in range(12):
        name = f"feature-{round_}"
        feature(env, repo, name, key=f"k{round_}")
        pull = open_pull(env, repo, source=name)
        review(env, repo, pull.id, "bob", APPROVE)
        # Started together the review tends to win; later starts land it inside the merge's
        # claim or after the merge, so every ordering is exercised.
        delay = (None, 0.0, 0.002, 0.005, 0.01, 0.05)[round_ % 6]
        merge_code, review_code = _race(
            [
                functools.partial(merge_pull, env, repo, pull.id),
                functools.partial(_after, delay, review, env, repo, pull.id, "carol", REQUEST_CHANGES, "wait"),
            ]
        )
        final = get(env, repo, pull.id).pull_request
        assert (merge_code, review_code) != (grpc.StatusCode.OK, grpc.StatusCode.OK)
        if merge_code == grpc.StatusCode.OK:
            assert review_code == grpc.StatusCode.FAILED_PRECONDITION
            assert final.status == pb.PULL_REQUEST_STATUS_MERGED
            assert [r.author for r in final.reviews] == ["bob"]
        else:
            assert (merge_code, review_code) == (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.OK)
            assert final.status == pb.PULL_REQUEST_STATUS_OPEN
            review(env, repo, pull.id, "carol", APPROVE)
            merge_pull(env, repo, pull.id)
        outcomes.add(merge_code)
    assert outcomes  # which side wins is up to the scheduler; the invariant holds either way


def test_dump_restore_and_deletion_carry_pull_requests_and_protection(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    rule = pb.BranchProtectionRule(pattern="main", required_approvals=1, block_direct_writes=True)
    protect(env, repo, rule)
    merged = open_pull(env, repo, title="merged one")
    review(env, repo, merged.id, "bob", APPROVE, "ok")
    merge_pull(env, repo, merged.id)
    feature(env, repo, "other", key="o")
    pending = open_pull(env, repo, source="other", title="pending one")
    env.stub.AddPullRequestComment(
        api.AddPullRequestCommentRequest(repository=repo, id=pending.id, body="hm", author="bob")
    )
    before = {p: get(env, repo, p).pull_request for p in (merged.id, pending.id)}

    dump = env.stub.DumpRefs(api.DumpRefsRequest(repository=repo))
    assert (dump.pull_requests, dump.branch_protection) == (2, True)
    info = env.stub.GetRepository(api.GetRepositoryRequest(name=repo))
    env.stub.DeleteRepository(api.DeleteRepositoryRequest(name=repo))
    restored = f"{repo}-r"
    env.stub.CreateRepository(
        api.CreateRepositoryRequest(name=restored, storage_namespace=info.storage_namespace, bare=True)
    )
    counts = env.stub.RestoreRefs(api.RestoreRefsRequest(repository=restored, location=dump.location))
    assert (counts.pull_requests, counts.branch_protection) == (2, True)
    assert {p: get(env, restored, p).pull_request for p in before} == before
    comments = env.stub.ListPullRequestComments(api.ListPullRequestCommentsRequest(repository=restored, id=pending.id))
    assert [c.body for c in comments.comments] == ["hm"]
    assert list(env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=restored)).rules) == [rule]
    assert PROTECTED in (get(env, restored, pending.id).merge_blocked_reason)

    # A repository created again under the deleted one's name has none of it.
    env.stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}-again"))
    assert not env.stub.ListPullRequests(api.ListPullRequestsRequest(repository=repo)).pull_requests
    assert not env.stub.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo)).rules


def head_of(env: GravelerEnv, repo: str, branch: str) -> str:
    return env.stub.GetBranch(api.GetBranchRequest(repository=repo, name=branch)).commit_id


def test_approvals_are_of_a_commit_and_a_push_makes_them_stale(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=1))
    pull = open_pull(env, repo)
    approved = head_of(env, repo, "feature")
    info = review(env, repo, pull.id, "bob", APPROVE)
    assert [(r.commit_id, r.submitted_by) for r in info.pull_request.reviews] == [(approved, "bob")]
    assert info.approvals == 1
    # A push to the (unprotected) source after the approval: the approval no longer counts.
    env.put(repo, "feature", "unreviewed", "x")
    env.commit(repo, "feature", "sneaked in")
    info = get(env, repo, pull.id)
    assert info.approvals == 0 and "0 of 1" in info.merge_blocked_reason
    assert code_of(lambda: merge_pull(env, repo, pull.id)) == grpc.StatusCode.PERMISSION_DENIED
    # An objection is of a commit too: one on an older head does not block the new one.
    review(env, repo, pull.id, "carol", REQUEST_CHANGES)
    env.put(repo, "feature", "fixed", "y")
    env.commit(repo, "feature", "addressed carol")
    reviewed = head_of(env, repo, "feature")
    assert review(env, repo, pull.id, "bob", APPROVE).merge_blocked_reason == ""
    done = merge_pull(env, repo, pull.id)
    assert done.pull_request.pull_request.status == pb.PULL_REQUEST_STATUS_MERGED
    assert list(done.merge.commit.parents)[1] == reviewed


def test_committers_of_what_the_merge_brings_in_cannot_approve_it(env: GravelerEnv) -> None:
    """Whoever committed between the merge base and the source head, in whatever order they pushed
    and reviewed, does not count as a reviewer; committers of the destination's history do."""
    repo = env.new_repo()
    env.put(repo, "main", "base", "0")
    env.commit(repo, "main", "on main, by dan", committer="dan")
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="other", source_ref="main"))
    env.put(repo, "other", "o", "1")
    env.commit(repo, "other", "on another branch, by erin", committer="erin")
    feature(env, repo)
    env.put(repo, "feature", "b", "2")
    env.commit(repo, "feature", "bob's change", committer="bob")
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=1))
    pull = open_pull(env, repo)
    info = review(env, repo, pull.id, "bob", APPROVE)
    assert info.approvals == 0 and "do not count (bob)" in info.merge_blocked_reason
    assert code_of(lambda: merge_pull(env, repo, pull.id)) == grpc.StatusCode.PERMISSION_DENIED
    # Buried under a later commit by someone else, bob's stays in what the merge brings in.
    env.put(repo, "feature", "c", "3")
    env.commit(repo, "feature", "carol's change", committer="carol")
    assert review(env, repo, pull.id, "bob", APPROVE).approvals == 0
    # A branch merged into the source brings its commits along; erin wrote one of them.
    merged_in = env.stub.Merge(
        api.MergeRequest(repository=repo, source_ref="other", destination_branch="feature", committer="frank")
    )
    assert merged_in.HasField("commit")
    for excluded in ("bob", "carol", "erin", "frank"):
        assert review(env, repo, pull.id, excluded, APPROVE).approvals == 0
    assert code_of(lambda: merge_pull(env, repo, pull.id)) == grpc.StatusCode.PERMISSION_DENIED
    # dan's commit is already in main: what the merge brings in is none of his.
    assert review(env, repo, pull.id, "dan", APPROVE).approvals == 1
    done = merge_pull(env, repo, pull.id, committer="bob")
    assert done.pull_request.pull_request.status == pb.PULL_REQUEST_STATUS_MERGED


def test_a_push_after_the_merge_claim_is_not_merged(env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = env.new_repo()
    feature(env, repo)
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=1))
    pull = open_pull(env, repo)
    reviewed = head_of(env, repo, "feature")
    review(env, repo, pull.id, "bob", APPROVE)
    branching = env.graveler.pulls._branching
    real_merge = branching.merge

    def push_then_merge(*args: object, **kwargs: object) -> object:
        # Runs after the claim decided on the reviewed head: a push that lands now must not be merged.
        env.put(repo, "feature", "late", "z")
        env.commit(repo, "feature", "pushed during the merge")
        return real_merge(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(branching, "merge", push_then_merge)
    done = merge_pull(env, repo, pull.id)
    assert list(done.merge.commit.parents)[1] == reviewed != head_of(env, repo, "feature")
    assert env.etag(repo, "main", "f") == "1"
    missing = api.StatEntryRequest(repository=repo, ref="main", key="late")
    assert code_of(lambda: env.stub.StatEntry(missing)) == grpc.StatusCode.NOT_FOUND


def test_reopening_drops_earlier_reviews(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    protect(env, repo, pb.BranchProtectionRule(pattern="main", required_approvals=1))
    pull = open_pull(env, repo)
    assert review(env, repo, pull.id, "bob", APPROVE).approvals == 1
    for status in (pb.PULL_REQUEST_STATUS_CLOSED, pb.PULL_REQUEST_STATUS_OPEN):
        env.stub.UpdatePullRequest(api.UpdatePullRequestRequest(repository=repo, id=pull.id, status=status))
    info = get(env, repo, pull.id)
    assert (list(info.pull_request.reviews), info.approvals) == ([], 0)
    assert code_of(lambda: merge_pull(env, repo, pull.id)) == grpc.StatusCode.PERMISSION_DENIED


def test_callers_cannot_supply_the_reserved_requested_committer(env: GravelerEnv) -> None:
    repo = env.new_repo()
    feature(env, repo)
    forged = {"silt.requested-committer": "mallory", "team": "data"}
    env.put(repo, "main", "m", "1")
    commit = env.commit(repo, "main", "forged", metadata=forged)
    assert dict(commit.metadata) == {"team": "data"}
    pull = open_pull(env, repo)
    merged = merge_pull(env, repo, pull.id, metadata=forged).merge.commit
    assert "silt.requested-committer" not in merged.metadata and merged.metadata["team"] == "data"


def test_a_status_filter_examines_a_bounded_number_of_records_per_call(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.features import pulls

    monkeypatch.setattr(pulls, "MAX_LIST_EXAMINED", 2)
    repo = env.new_repo()
    feature(env, repo)
    ids = [open_pull(env, repo, title=f"pr {i}").id for i in range(5)]
    env.stub.UpdatePullRequest(
        api.UpdatePullRequestRequest(repository=repo, id=ids[4], status=pb.PULL_REQUEST_STATUS_CLOSED)
    )
    request = api.ListPullRequestsRequest(repository=repo, status=pb.PULL_REQUEST_STATUS_CLOSED, amount=10)
    pages = []
    while True:
        page = env.stub.ListPullRequests(request)
        pages.append([p.pull_request.id for p in page.pull_requests])
        if not page.has_more:
            break
        request.after = page.next_after
    # Two records examined per call: short (empty) pages that say there is more, then the match.
    assert pages == [[], [], [ids[4]]]
