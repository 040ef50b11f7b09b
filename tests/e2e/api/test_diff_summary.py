"""Silt's diff summaries (a diff as a tree of folders with counts and sizes) and the log filtered
by object, on the real API: objects written over S3 on the same port, commits through lakefs-sdk."""

from __future__ import annotations

import json
from typing import Any

import lakefs_sdk
import pytest

from tests.e2e.api.conftest import Api, error_message


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def _commit(client: lakefs_sdk.ApiClient, repo: str, branch: str, message: str) -> str:
    commit = lakefs_sdk.CommitsApi(client).commit(repo, branch, lakefs_sdk.CommitCreation(message=message))
    return str(commit.id)


def _get(api: Api, path: str, **query: Any) -> Any:
    response = api.request("GET", path, fields=query)
    assert response.status == 200, (response.status, response.data)
    return json.loads(response.data)


Pair = tuple[int, int]


def _stats(added: Pair = (0, 0), removed: Pair = (0, 0), changed: Pair = (0, 0)) -> Any:
    return {
        name: {"count": count, "size_bytes": size}
        for name, (count, size) in (("added", added), ("removed", removed), ("changed", changed))
    }


@pytest.fixture
def diffed(api: Api, client: lakefs_sdk.ApiClient, repo: str, s3: Any) -> str:
    """main with a/x (1 B), a/b/y (2 B), keep (3 B); branch `dev` then adds a/b/new (4 B) and
    a/c/z (5 B), rewrites a/x to 10 B and removes keep."""
    for key, size in (("a/x", 1), ("a/b/y", 2), ("keep", 3)):
        s3.put_object(Bucket=repo, Key=f"main/{key}", Body=b"m" * size)
    _commit(client, repo, "main", "base")
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    for key, size in (("a/b/new", 4), ("a/c/z", 5), ("a/x", 10)):
        s3.put_object(Bucket=repo, Key=f"dev/{key}", Body=b"d" * size)
    s3.delete_object(Bucket=repo, Key="dev/keep")
    return repo


def test_folders_count_and_size_each_change_type(api: Api, client: lakefs_sdk.ApiClient, diffed: str) -> None:
    repo = diffed
    # Uncommitted first: the branch's staged changes.
    staged = _get(api, f"/repositories/{repo}/branches/dev/diff/summary")
    assert staged["totals"]["count"] == 4
    assert [r["path"] for r in staged["results"]] == ["a/", "keep"]

    _commit(client, repo, "dev", "changes")
    root = _get(api, f"/repositories/{repo}/refs/main/diff/dev/summary")
    assert root["totals"] == {"count": 4, "stats": _stats(added=(2, 9), removed=(1, 3), changed=(1, 10))}
    assert root["prefix_totals"] == root["totals"]
    assert root["truncated"] is False
    folder, keep = root["results"]
    stats = _stats(added=(2, 9), changed=(1, 10))
    assert folder == {"path": "a/", "path_type": "common_prefix", "count": 3, "stats": stats}
    assert keep == {"path": "keep", "path_type": "object", "type": "removed", "size_bytes": 3}

    inner = _get(api, f"/repositories/{repo}/refs/main/diff/dev/summary", prefix="a/")
    assert [(r["path"], r["path_type"]) for r in inner["results"]] == [
        ("a/b/", "common_prefix"),
        ("a/c/", "common_prefix"),
        ("a/x", "object"),
    ]
    assert inner["prefix_totals"]["count"] == 3
    assert inner["results"][0]["stats"] == _stats(added=(1, 4))


def test_pages_by_prefix_and_filters(api: Api, client: lakefs_sdk.ApiClient, diffed: str) -> None:
    repo = diffed
    _commit(client, repo, "dev", "changes")
    path = f"/repositories/{repo}/refs/main/diff/dev/summary"
    first = _get(api, path, prefix="a/", amount=2)
    assert [r["path"] for r in first["results"]] == ["a/b/", "a/c/"]
    assert first["pagination"]["has_more"] is True
    rest = _get(api, path, prefix="a/", amount=2, after=first["pagination"]["next_offset"])
    assert [r["path"] for r in rest["results"]] == ["a/x"]
    assert rest["pagination"]["has_more"] is False

    filtered = _get(api, path, filter="new")
    assert filtered["totals"] == {"count": 1, "stats": _stats(added=(1, 4))}
    assert [r["path"] for r in filtered["results"]] == ["a/"]
    assert _get(api, path, prefix="nothing/")["results"] == []


def test_a_new_commit_on_a_compared_branch_is_seen(
    api: Api, client: lakefs_sdk.ApiClient, diffed: str, s3: Any
) -> None:
    repo = diffed
    first = _commit(client, repo, "dev", "changes")
    path = f"/repositories/{repo}/refs/main/diff/dev/summary"
    before = _get(api, path)
    assert before["right_commit"] == first
    assert _get(api, path)["totals"] == before["totals"]  # cached: the same answer
    s3.put_object(Bucket=repo, Key="dev/later/one", Body=b"12345678")
    second = _commit(client, repo, "dev", "later")
    after = _get(api, path)
    assert after["right_commit"] == second
    assert after["totals"]["count"] == before["totals"]["count"] + 1
    assert [r["path"] for r in after["results"]] == ["a/", "keep", "later/"]
    # The commit-to-commit diff of the first commit is unchanged.
    again = _get(api, f"/repositories/{repo}/refs/main/diff/{first}/summary")
    assert again["totals"] == before["totals"]


def test_bad_input_is_refused_as_lakefs_does(api: Api, diffed: str) -> None:
    base = f"/repositories/{diffed}/refs/main/diff/dev/summary"
    assert "prefix" in error_message(api.request("GET", base, fields={"prefix": "a"}), 400)
    assert "amount" in error_message(api.request("GET", base, fields={"amount": "5000"}), 400)
    assert "filter" in error_message(api.request("GET", base, fields={"filter": "x" * 300}), 400)
    assert error_message(api.request("GET", f"/repositories/{diffed}/refs/main/diff/nope/summary"), 404)
    assert error_message(api.request("GET", f"/repositories/{diffed}/branches/nope/diff/summary"), 404)


def test_log_filtered_by_object(api: Api, client: lakefs_sdk.ApiClient, repo: str, s3: Any) -> None:
    s3.put_object(Bucket=repo, Key="main/t/one", Body=b"1")
    first = _commit(client, repo, "main", "one")
    s3.put_object(Bucket=repo, Key="main/other", Body=b"2")
    _commit(client, repo, "main", "other")
    s3.put_object(Bucket=repo, Key="main/t/one", Body=b"11")
    third = _commit(client, repo, "main", "one again")
    log = _get(api, f"/repositories/{repo}/refs/main/commits", objects="t/one")
    assert [c["id"] for c in log["results"]] == [third, first]
    by_prefix = _get(api, f"/repositories/{repo}/refs/main/commits", prefixes="t/", amount=1, limit="true")
    assert [c["id"] for c in by_prefix["results"]] == [third]
