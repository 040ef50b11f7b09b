"""Diff between refs, merge and merge base through lakefs-sdk's RefsApi, the `lakefs` high-level
client's `merge_into` and `diff`, and raw requests for bad input; objects are written with boto3
on the same port."""

from __future__ import annotations

import json
from typing import Any

import lakefs
import lakefs_sdk
import pytest
import urllib3
from lakefs.exceptions import ConflictException
from lakefs_sdk.exceptions import ApiException

from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import model_pb2 as pb
from tests.e2e.api.conftest import Api
from tests.e2e.api.conftest import error_message as _message


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def _put(s3: Any, repo: str, branch: str, key: str, body: bytes) -> None:
    s3.put_object(Bucket=repo, Key=f"{branch}/{key}", Body=body)


def _read(s3: Any, repo: str, ref: str, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=repo, Key=f"{ref}/{key}")["Body"].read()
    return data


def _commit(client: lakefs_sdk.ApiClient, repo: str, branch: str, message: str) -> lakefs_sdk.Commit:
    commit: lakefs_sdk.Commit = lakefs_sdk.CommitsApi(client).commit(
        repo, branch, lakefs_sdk.CommitCreation(message=message)
    )
    return commit


def _branch(client: lakefs_sdk.ApiClient, repo: str, name: str, source: str = "main") -> None:
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name=name, source=source))


def _head(client: lakefs_sdk.ApiClient, repo: str, branch: str) -> str:
    head: str = lakefs_sdk.BranchesApi(client).get_branch(repo, branch).commit_id
    return head


def _post(api: Api, path: str, body: bytes, content_type: str | None = "application/json", creds: Any = None) -> Any:
    creds = creds or api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")
    if content_type:
        headers["Content-Type"] = content_type
    return api.request("POST", path, body=body, headers=headers)


@pytest.fixture
def forked(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> str:
    """main with a.txt and b.txt committed; dev from it changing a.txt, removing b.txt, adding c/1 and c/2."""
    _put(s3, repo, "main", "a.txt", b"aaa")
    _put(s3, repo, "main", "b.txt", b"bbbb")
    _commit(client, repo, "main", "base data")
    _branch(client, repo, "dev")
    _put(s3, repo, "dev", "a.txt", b"changed")
    s3.delete_object(Bucket=repo, Key="dev/b.txt")
    _put(s3, repo, "dev", "c/1.txt", b"1")
    _put(s3, repo, "dev", "c/2.txt", b"22")
    _commit(client, repo, "dev", "dev work")
    return repo


def test_diff_between_refs(client: lakefs_sdk.ApiClient, s3: Any, forked: str) -> None:
    refs = lakefs_sdk.RefsApi(client)
    repo = forked
    diff = refs.diff_refs(repo, "main", "dev")
    assert [(d.type, d.path, d.path_type, d.size_bytes) for d in diff.results] == [
        ("changed", "a.txt", "object", 7),
        ("removed", "b.txt", "object", 4),
        ("added", "c/1.txt", "object", 1),
        ("added", "c/2.txt", "object", 2),
    ]
    assert diff.pagination.has_more is False and diff.pagination.next_offset == ""
    assert all(d.right is None for d in diff.results)
    by_dir = refs.diff_refs(repo, "main", "dev", delimiter="/")
    assert [(d.path, d.path_type, d.type) for d in by_dir.results] == [
        ("a.txt", "object", "changed"),
        ("b.txt", "object", "removed"),
        ("c/", "common_prefix", "prefix_changed"),
    ]
    page = refs.diff_refs(repo, "main", "dev", amount=2)
    assert [d.path for d in page.results] == ["a.txt", "b.txt"]
    assert page.pagination.has_more and page.pagination.next_offset == "b.txt" and page.pagination.max_per_page == 2
    rest = refs.diff_refs(repo, "main", "dev", after="b.txt", amount=2)
    assert [d.path for d in rest.results] == ["c/1.txt", "c/2.txt"] and not rest.pagination.has_more
    assert [d.path for d in refs.diff_refs(repo, "main", "dev", prefix="c/").results] == ["c/1.txt", "c/2.txt"]
    # Ref expressions on either side: dev's parent is main's head.
    assert refs.diff_refs(repo, "dev~1", "dev").results == diff.results
    backwards = refs.diff_refs(repo, "dev", "dev^", type="two_dot").results
    assert [(d.type, d.path) for d in backwards] == [
        ("changed", "a.txt"),
        ("added", "b.txt"),
        ("removed", "c/1.txt"),
        ("removed", "c/2.txt"),
    ]
    # Three dots: what dev^ has that their merge base (dev^ itself) has not: nothing.
    assert refs.diff_refs(repo, "dev", "dev^").results == []
    stats = refs.diff_refs(repo, "main", "dev", include_right_stats=True).results
    assert stats[0].right is not None and len(stats[0].right.checksum) == 32 and stats[0].right.mtime > 0
    assert stats[1].right is None  # removed: nothing on the right

    # main moves on: a three-dot diff (the default) shows only dev's side, a two-dot one both.
    _put(s3, repo, "main", "d.txt", b"d")
    _commit(client, repo, "main", "main work")
    three = refs.diff_refs(repo, "main", "dev")
    assert [d.path for d in three.results] == ["a.txt", "b.txt", "c/1.txt", "c/2.txt"]
    two = refs.diff_refs(repo, "main", "dev", type="two_dot")
    assert [(d.path, d.type) for d in two.results][-1] == ("d.txt", "removed")


def test_diff_with_the_lakefs_client(api: Api, forked: str) -> None:
    lake = _lakefs_client(api)
    changes = list(lakefs.Repository(forked, client=lake).ref("main").diff("dev", max_amount=3))
    assert [(c.type, c.path) for c in changes] == [("changed", "a.txt"), ("removed", "b.txt"), ("added", "c/1.txt")]
    everything = list(lakefs.Repository(forked, client=lake).ref("main").diff("dev", amount=1))
    assert [c.path for c in everything] == ["a.txt", "b.txt", "c/1.txt", "c/2.txt"]


def _lakefs_client(api: Api) -> lakefs.Client:
    admin = api.stack.admin
    return lakefs.Client(
        host=api.base, username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )


def test_merge_never_fast_forwards_and_records_both_parents(client: lakefs_sdk.ApiClient, s3: Any, forked: str) -> None:
    refs = lakefs_sdk.RefsApi(client)
    commits = lakefs_sdk.CommitsApi(client)
    repo = forked
    main_before, dev_head = _head(client, repo, "main"), _head(client, repo, "dev")
    merged = refs.merge_into_branch(repo, "dev", "main", merge=lakefs_sdk.Merge(metadata={"ticket": "42"}))
    assert merged.reference not in (main_before, dev_head)
    assert _head(client, repo, "main") == merged.reference
    commit = commits.get_commit(repo, merged.reference)
    assert commit.parents == [main_before, dev_head]
    assert commit.message == "Merge 'dev' into 'main'"
    assert commit.metadata == {"ticket": "42", ".lakefs.merge.strategy": "default"}
    assert commit.committer == "admin"
    assert _read(s3, repo, "main", "a.txt") == b"changed" and _read(s3, repo, "main", "c/2.txt") == b"22"
    assert refs.diff_refs(repo, "main", "dev").results == []

    # Nothing new on dev: "no changes", unless an empty merge is asked for.
    with pytest.raises(ApiException) as again:
        refs.merge_into_branch(repo, "dev", "main")
    assert again.value.status == 400 and "no changes" in json.loads(again.value.body)["message"]
    assert _head(client, repo, "main") == merged.reference
    empty = refs.merge_into_branch(repo, "dev", "main", merge=lakefs_sdk.Merge(allow_empty=True, message="again"))
    assert commits.get_commit(repo, empty.reference).parents == [merged.reference, dev_head]
    forced = refs.merge_into_branch(repo, "dev", "main", merge=lakefs_sdk.Merge(force=True))
    assert commits.get_commit(repo, forced.reference).parents == [empty.reference, dev_head]


def test_squash_merge_has_one_parent(client: lakefs_sdk.ApiClient, forked: str) -> None:
    repo = forked
    main_before = _head(client, repo, "main")
    merged = lakefs_sdk.RefsApi(client).merge_into_branch(
        repo, "dev", "main", merge=lakefs_sdk.Merge(squash_merge=True, message="squashed")
    )
    commit = lakefs_sdk.CommitsApi(client).get_commit(repo, merged.reference)
    assert commit.parents == [main_before] and commit.message == "squashed"


def test_merge_from_a_ref_expression_and_the_merge_base(client: lakefs_sdk.ApiClient, s3: Any, forked: str) -> None:
    refs = lakefs_sdk.RefsApi(client)
    repo = forked
    fork_point = _head(client, repo, "main")
    dev_first = _head(client, repo, "dev")
    _put(s3, repo, "dev", "later.txt", b"later")
    dev_second = _commit(client, repo, "dev", "later work").id
    base = refs.find_merge_base(repo, "dev", "main")
    assert base == lakefs_sdk.FindMergeBaseResult(
        source_commit_id=dev_second, destination_commit_id=fork_point, base_commit_id=fork_point
    )
    # dev~1 is the first dev commit: merging it leaves later.txt out.
    merged = refs.merge_into_branch(repo, "dev~1", "main")
    commit = lakefs_sdk.CommitsApi(client).get_commit(repo, merged.reference)
    assert commit.parents == [fork_point, dev_first] and commit.message == "Merge 'dev~1' into 'main'"
    assert [d.path for d in refs.diff_refs(repo, "main", "dev").results] == ["later.txt"]
    assert refs.find_merge_base(repo, "dev", "main").base_commit_id == dev_first
    assert refs.find_merge_base(repo, "main@", "dev^1").base_commit_id == dev_first


def _conflicting(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    _put(s3, repo, "main", "a.txt", b"main's")
    _commit(client, repo, "main", "main changes a")


def test_a_conflict_is_409_naming_the_paths_and_changes_nothing(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, forked: str
) -> None:
    repo = forked
    _conflicting(client, s3, repo)
    before = _head(client, repo, "main")
    response = _post(api, f"/repositories/{repo}/refs/dev/merge/main", b"{}")
    assert response.status == 409 and response.headers["content-type"].startswith("application/json")
    body = json.loads(response.data)
    assert body["message"].startswith("conflict found") and "a.txt" in body["message"]
    # The schema names MergeResult for a 409; lakeFS's plan is Error: the body is both.
    assert lakefs_sdk.MergeResult.from_dict(body).reference == ""
    assert lakefs_sdk.Error.from_dict(body).message == body["message"]
    assert _head(client, repo, "main") == before and _read(s3, repo, "main", "a.txt") == b"main's"

    with pytest.raises(ConflictException):
        lakefs.Repository(repo, client=_lakefs_client(api)).branch("dev").merge_into("main")
    assert _head(client, repo, "main") == before


def test_a_conflict_message_names_at_most_ten_paths(api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    keys = [f"k{i:02}.txt" for i in range(12)]
    for key in keys:
        _put(s3, repo, "main", key, b"base")
    _commit(client, repo, "main", "base")
    _branch(client, repo, "dev")
    for branch in ("main", "dev"):
        for key in keys:
            _put(s3, repo, branch, key, branch.encode())
        _commit(client, repo, branch, f"{branch} changes everything")
    message = _message(_post(api, f"/repositories/{repo}/refs/dev/merge/main", b"{}"), 409)
    assert all(key in message for key in keys[:10]) and not any(key in message for key in keys[10:])
    assert message.endswith(", ...")
    # The structured list is not cut to the message's ten.
    response = _post(api, f"/repositories/{repo}/refs/dev/merge/main", b"{}")
    assert [c["path"] for c in json.loads(response.data)["conflicts"]] == keys


def test_a_conflict_lists_every_path_with_what_each_side_did(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, forked: str
) -> None:
    repo = forked
    # dev changed a.txt, removed b.txt and added c/1.txt; main does otherwise with each of them,
    # and both add a path whose name holds the message's separator.
    _put(s3, repo, "main", "a.txt", b"main's")
    _put(s3, repo, "main", "b.txt", b"main's")
    _put(s3, repo, "main", "c/1.txt", b"main's")
    _put(s3, repo, "main", "d, e.txt", b"main's")
    _commit(client, repo, "main", "main changes")
    _put(s3, repo, "dev", "d, e.txt", b"dev's")
    _commit(client, repo, "dev", "dev adds d, e")
    response = _post(api, f"/repositories/{repo}/refs/dev/merge/main", b"{}")
    assert response.status == 409
    body = json.loads(response.data)
    assert body["conflicts"] == [
        {"path": "a.txt", "source": "changed", "destination": "changed"},
        {"path": "b.txt", "source": "removed", "destination": "changed"},
        {"path": "c/1.txt", "source": "added", "destination": "added"},
        {"path": "d, e.txt", "source": "added", "destination": "added"},
    ]
    assert body["conflicts_truncated"] is False
    # The additions leave the body what lakeFS's clients read.
    assert lakefs_sdk.MergeResult.from_dict(body).reference == ""
    assert lakefs_sdk.Error.from_dict(body).message.startswith("conflict found")


@pytest.mark.parametrize(("strategy", "wins"), [("source-wins", b"changed"), ("dest-wins", b"main's")])
def test_a_strategy_resolves_conflicts(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, forked: str, strategy: str, wins: bytes
) -> None:
    repo = forked
    _conflicting(client, s3, repo)
    branch = lakefs.Repository(repo, client=_lakefs_client(api)).branch("dev")
    reference = branch.merge_into("main", strategy=strategy, message=f"merged with {strategy}")
    assert _head(client, repo, "main") == reference
    commit = lakefs_sdk.CommitsApi(client).get_commit(repo, reference)
    assert commit.message == f"merged with {strategy}" and commit.metadata == {".lakefs.merge.strategy": strategy}
    assert _read(s3, repo, "main", "a.txt") == wins
    assert _read(s3, repo, "main", "c/1.txt") == b"1"


def test_merge_into_a_dirty_branch_is_400(client: lakefs_sdk.ApiClient, s3: Any, forked: str) -> None:
    repo = forked
    before = _head(client, repo, "main")
    _put(s3, repo, "main", "uncommitted.txt", b"u")
    with pytest.raises(ApiException) as dirty:
        lakefs_sdk.RefsApi(client).merge_into_branch(repo, "dev", "main")
    assert dirty.value.status == 400 and "dirty branch" in json.loads(dirty.value.body)["message"]
    assert _head(client, repo, "main") == before
    assert [d.path for d in lakefs_sdk.BranchesApi(client).diff_branch(repo, "main").results] == ["uncommitted.txt"]


def test_merge_into_a_branch_needing_approvals_is_403(api: Api, client: lakefs_sdk.ApiClient, forked: str) -> None:
    repo = forked
    before = _head(client, repo, "main")
    rule = pb.BranchProtectionRule(pattern="main", required_approvals=1)
    api.stack.graveler.SetBranchProtection(gapi.SetBranchProtectionRequest(repository=repo, rules=[rule]))
    try:
        message = _message(_post(api, f"/repositories/{repo}/refs/dev/merge/main", b"{}"), 403)
        assert "cannot write to protected branch" in message
        assert _head(client, repo, "main") == before
    finally:
        api.stack.graveler.SetBranchProtection(gapi.SetBranchProtectionRequest(repository=repo, rules=[]))


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/refs/no-such/merge/main", 404),
        ("/refs/dev/merge/no-such", 404),
        ("/refs/dev~9/merge/main", 404),
        ("/refs/dev/merge/main~1", 404),
    ],
    ids=["unknown-source", "unknown-destination", "expression-past-history", "destination-not-a-branch"],
)
def test_merge_with_unknown_refs(api: Api, client: lakefs_sdk.ApiClient, forked: str, path: str, status: int) -> None:
    before = _head(client, forked, "main")
    response = _post(api, f"/repositories/{forked}{path}", b"{}")
    _message(response, status)
    assert _head(client, forked, "main") == before


@pytest.mark.parametrize(
    ("body", "content_type", "status", "says"),
    [
        (b'{"strategy": "theirs"}', "application/json", 400, "strategy"),
        (b'{"strategy": 5}', "application/json", 400, "strategy"),
        (b'{"metadata": {"k": 1}}', "application/json", 400, "metadata"),
        (b'{"squash_merge": "yes"}', "application/json", 400, "squash_merge"),
        (b"{not json", "application/json", 400, "JSON"),
        (b"[]", "application/json", 400, "object"),
        (b"", "application/x-www-form-urlencoded", 415, "application/json"),
        (b'{"message": "m"}', "text/plain", 415, "application/json"),
    ],
    ids=["unknown-strategy", "strategy-type", "metadata-type", "flag-type", "malformed", "array", "form", "text"],
)
def test_bad_merge_bodies_change_nothing(
    api: Api, client: lakefs_sdk.ApiClient, forked: str, body: bytes, content_type: str, status: int, says: str
) -> None:
    before = _head(client, forked, "main")
    assert says in _message(_post(api, f"/repositories/{forked}/refs/dev/merge/main", body, content_type), status)
    assert _head(client, forked, "main") == before


def test_merge_without_a_body_uses_the_defaults(api: Api, client: lakefs_sdk.ApiClient, forked: str) -> None:
    response = _post(api, f"/repositories/{forked}/refs/dev/merge/main", b"", content_type=None)
    assert response.status == 200, response.data
    reference = lakefs_sdk.MergeResult.from_json(response.data.decode()).reference
    assert _head(client, forked, "main") == reference


@pytest.mark.parametrize(
    ("query", "status"),
    [("type=one_dot", 400), ("amount=1001", 400), ("amount=1000000000", 400), ("delimiter=" + "/" * 2000, 400)],
)
def test_bad_diff_parameters_are_400(api: Api, forked: str, query: str, status: int) -> None:
    assert "invalid parameters" in _message(
        api.request("GET", f"/repositories/{forked}/refs/main/diff/dev?{query}"), status
    )


def test_unknown_refs_in_diff_and_merge_base_are_404(api: Api, forked: str) -> None:
    _message(api.request("GET", f"/repositories/{forked}/refs/main/diff/no-such"), 404)
    _message(api.request("GET", f"/repositories/{forked}/refs/no-such/diff/dev"), 404)
    _message(api.request("GET", f"/repositories/{forked}/refs/main~7/diff/dev"), 404)
    _message(api.request("GET", f"/repositories/{forked}/refs/no-such/merge/main"), 404)
    _message(api.request("GET", "/repositories/no-such-repo/refs/main/diff/dev"), 404)
    assert "invalid parameters" in _message(
        api.request("GET", f"/repositories/{forked}/refs/{'m' * 2000}/diff/dev"), 400
    )


def test_a_reader_diffs_but_cannot_merge(api: Api, client: lakefs_sdk.ApiClient, forked: str) -> None:
    reader = lakefs_sdk.RefsApi(api.sdk(api.stack.reader))
    assert len(reader.diff_refs(forked, "main", "dev").results) == 4
    assert reader.find_merge_base(forked, "dev", "main").base_commit_id == _head(client, forked, "main")
    before = _head(client, forked, "main")
    with pytest.raises(ApiException) as refused:
        reader.merge_into_branch(forked, "dev", "main")
    assert refused.value.status == 403
    assert _head(client, forked, "main") == before
    assert api.request("GET", f"/repositories/{forked}/refs/main/diff/dev", headers={}).status == 401
