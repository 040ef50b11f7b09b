"""Branches, commits, uncommitted changes, reset and the log through lakefs-sdk; objects are
written with boto3 on the same port (the REST object routes come later)."""

from __future__ import annotations

from typing import Any

import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.e2e.api.conftest import Api


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def test_branch_create_list_get_delete(client: lakefs_sdk.ApiClient, repo: str) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    head = branches.get_branch(repo, "main").commit_id
    assert branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main")) == head
    assert branches.create_branch(repo, lakefs_sdk.BranchCreation(name="feature-1", source="dev")) == head
    listed = branches.list_branches(repo)
    assert [(r.id, r.commit_id) for r in listed.results] == [("dev", head), ("feature-1", head), ("main", head)]
    assert listed.pagination.has_more is False
    first = branches.list_branches(repo, amount=2)
    assert [r.id for r in first.results] == ["dev", "feature-1"] and first.pagination.has_more
    rest = branches.list_branches(repo, after=first.pagination.next_offset, amount=2)
    assert [r.id for r in rest.results] == ["main"] and not rest.pagination.has_more
    assert [r.id for r in branches.list_branches(repo, prefix="fea").results] == ["feature-1"]
    assert branches.get_branch(repo, "dev") == lakefs_sdk.Ref(id="dev", commit_id=head)
    with pytest.raises(ApiException) as exists:
        branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    assert exists.value.status == 409
    branches.delete_branch(repo, "feature-1")
    with pytest.raises(ApiException) as gone:
        branches.get_branch(repo, "feature-1")
    assert gone.value.status == 404


def test_hidden_branches_are_listed_only_when_asked_for(client: lakefs_sdk.ApiClient, repo: str, s3: Any) -> None:
    """lakeFS's hidden branches (the `lakefs` client's transactions use them): usable by name,
    left out of listings unless `show_hidden`."""
    branches = lakefs_sdk.BranchesApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="tx-1", source="main", hidden=True))
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="visible", source="main"))
    assert [r.id for r in branches.list_branches(repo).results] == ["main", "visible"]
    assert [r.id for r in branches.list_branches(repo, show_hidden=True).results] == ["main", "tx-1", "visible"]
    # A page that holds only hidden names still moves the cursor past them.
    first = branches.list_branches(repo, amount=1, after="main")
    assert [r.id for r in first.results] == ["visible"]
    s3.put_object(Bucket=repo, Key="tx-1/a", Body=b"x")
    commit = lakefs_sdk.CommitsApi(client).commit(repo, "tx-1", lakefs_sdk.CommitCreation(message="in tx"))
    assert branches.get_branch(repo, "tx-1").commit_id == commit.id
    with pytest.raises(ApiException) as unknown_source:
        branches.create_branch(repo, lakefs_sdk.BranchCreation(name="x1", source="no-such-ref"))
    assert unknown_source.value.status == 404


def test_diff_commit_log_and_get_commit(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    commits = lakefs_sdk.CommitsApi(client)
    for key in ("a/1.csv", "a/2.csv", "b.txt"):
        s3.put_object(Bucket=repo, Key=f"main/{key}", Body=b"hello")
    diff = branches.diff_branch(repo, "main")
    assert [(d.type, d.path, d.path_type, d.size_bytes) for d in diff.results] == [
        ("added", "a/1.csv", "object", 5),
        ("added", "a/2.csv", "object", 5),
        ("added", "b.txt", "object", 5),
    ]
    by_dir = branches.diff_branch(repo, "main", delimiter="/")
    assert [(d.path, d.path_type) for d in by_dir.results] == [("a/", "common_prefix"), ("b.txt", "object")]
    paged = branches.diff_branch(repo, "main", amount=2)
    assert paged.pagination.has_more and paged.pagination.next_offset == "a/2.csv"
    assert [d.path for d in branches.diff_branch(repo, "main", after="a/2.csv").results] == ["b.txt"]

    created = commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="first data", metadata={"k": "v"}))
    assert created.message == "first data" and created.metadata == {"k": "v"} and created.committer == "admin"
    assert branches.diff_branch(repo, "main").results == []
    assert branches.get_branch(repo, "main").commit_id == created.id
    # A commit by id, by branch, and by a ref expression.
    assert commits.get_commit(repo, created.id) == created
    assert commits.get_commit(repo, "main") == created
    assert commits.get_commit(repo, "main~1").message == "Repository created"
    with pytest.raises(ApiException) as no_changes:
        commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="empty"))
    assert no_changes.value.status == 400 and "no changes" in str(no_changes.value.body)
    empty = commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="empty", allow_empty=True))
    # An uncommitted deletion is a marker of size 0 (lakeFS's client tests check it).
    s3.delete_object(Bucket=repo, Key="main/b.txt")
    removed = branches.diff_branch(repo, "main").results
    assert [(d.type, d.path, d.size_bytes) for d in removed] == [("removed", "b.txt", 0)]
    branches.reset_branch(repo, "main", lakefs_sdk.ResetCreation(type="object", path="b.txt"))

    log = lakefs_sdk.RefsApi(client).log_commits(repo, "main")
    assert [c.message for c in log.results] == ["empty", "first data", "Repository created"]
    assert log.results[0].id == empty.id and log.results[1].parents == [log.results[2].id]
    first = lakefs_sdk.RefsApi(client).log_commits(repo, "main", amount=1)
    assert [c.id for c in first.results] == [empty.id] and first.pagination.has_more
    rest = lakefs_sdk.RefsApi(client).log_commits(repo, "main", after=first.pagination.next_offset, amount=10)
    assert [c.message for c in rest.results] == ["first data", "Repository created"]
    limited = lakefs_sdk.RefsApi(client).log_commits(repo, "main", amount=1, limit=True)
    assert len(limited.results) == 1 and not limited.pagination.has_more
    with pytest.raises(ApiException) as unknown:
        commits.get_commit(repo, "0" * 64)
    assert unknown.value.status == 404


def test_reset_drops_uncommitted_changes(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    for key in ("keep.txt", "dir/x", "dir/y", "one.txt"):
        s3.put_object(Bucket=repo, Key=f"main/{key}", Body=b"data")
    branches.reset_branch(repo, "main", lakefs_sdk.ResetCreation(type="object", path="one.txt"))
    assert [d.path for d in branches.diff_branch(repo, "main").results] == ["dir/x", "dir/y", "keep.txt"]
    branches.reset_branch(repo, "main", lakefs_sdk.ResetCreation(type="common_prefix", path="dir/"))
    assert [d.path for d in branches.diff_branch(repo, "main").results] == ["keep.txt"]
    branches.reset_branch(repo, "main", lakefs_sdk.ResetCreation(type="reset"))
    assert branches.diff_branch(repo, "main").results == []
