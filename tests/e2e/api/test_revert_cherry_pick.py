"""Revert and cherry-pick through lakefs-sdk's BranchesApi, the `lakefs` high-level client, and raw
requests for bad input; objects are written with boto3 on the same port."""

from __future__ import annotations

import json
import secrets
from typing import Any

import lakefs
import lakefs_sdk
import pytest
from botocore.exceptions import ClientError
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import model_pb2 as pb
from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api
from tests.e2e.api.conftest import error_message as _message
from tests.e2e.api.conftest import json_post as _post


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def _put(s3: Any, repo: str, branch: str, key: str, body: bytes) -> None:
    s3.put_object(Bucket=repo, Key=f"{branch}/{key}", Body=body)


def _read(s3: Any, repo: str, ref: str, key: str) -> bytes | None:
    try:
        data: bytes = s3.get_object(Bucket=repo, Key=f"{ref}/{key}")["Body"].read()
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "NoSuchKey"
        return None
    return data


def _commit(client: lakefs_sdk.ApiClient, repo: str, branch: str, message: str) -> lakefs_sdk.Commit:
    commit: lakefs_sdk.Commit = lakefs_sdk.CommitsApi(client).commit(
        repo, branch, lakefs_sdk.CommitCreation(message=message, metadata={"origin": message})
    )
    return commit


def _head(client: lakefs_sdk.ApiClient, repo: str, branch: str) -> lakefs_sdk.Commit:
    head: lakefs_sdk.Commit = lakefs_sdk.CommitsApi(client).get_commit(repo, branch)
    return head


def _make_history(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> str:
    """main: "one" adds a.txt; "two" changes a.txt and adds b.txt."""
    _put(s3, repo, "main", "a.txt", b"v1")
    _commit(client, repo, "main", "one")
    _put(s3, repo, "main", "a.txt", b"v2")
    _put(s3, repo, "main", "b.txt", b"b")
    _commit(client, repo, "main", "two")
    return repo


@pytest.fixture
def history(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> str:
    return _make_history(client, s3, repo)


@pytest.fixture(scope="module")
def unchanged_history(client: lakefs_sdk.ApiClient, s3: Any) -> str:
    """history's repository made once, for the tests of refusals: each of them checks that it
    changed nothing (a fresh one each cost those tests most of their time)."""
    name = f"r-{secrets.token_hex(5)}"
    creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
    lakefs_sdk.RepositoriesApi(client).create_repository(creation)
    return _make_history(client, s3, name)


def test_revert_undoes_a_commit(client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    repo = history
    branches = lakefs_sdk.BranchesApi(client)
    two = _head(client, repo, "main")
    assert branches.revert_branch(repo, "main", lakefs_sdk.RevertCreation(ref="main", parent_number=0)) is None
    reverted = _head(client, repo, "main")
    # lakeFS's message names the ref as given; no metadata but the caller's (none).
    assert reverted.message == "Revert main" and reverted.parents == [two.id]
    assert reverted.metadata == {} and reverted.committer == "admin"
    assert _read(s3, repo, "main", "a.txt") == b"v1" and _read(s3, repo, "main", "b.txt") is None

    # Reverting "two" again changes nothing now: lakeFS's "no changes", unless an empty commit
    # is asked for.
    with pytest.raises(ApiException) as nothing:
        branches.revert_branch(repo, "main", lakefs_sdk.RevertCreation(ref=two.id, parent_number=0))
    assert nothing.value.status == 400 and "no changes" in json.loads(nothing.value.body)["message"]
    assert _head(client, repo, "main").id == reverted.id
    branches.revert_branch(repo, "main", lakefs_sdk.RevertCreation(ref=two.id, parent_number=0, allow_empty=True))
    empty = _head(client, repo, "main")
    assert empty.message == f"Revert {two.id}" and empty.parents == [reverted.id]
    assert empty.meta_range_id == reverted.meta_range_id

    # Reverting the revert brings "two" back, with overrides.
    overrides = lakefs_sdk.CommitOverrides(message="redo two", metadata={"why": "oops"})
    branches.revert_branch(
        repo, "main", lakefs_sdk.RevertCreation(ref=reverted.id, parent_number=1, commit_overrides=overrides)
    )
    redone = _head(client, repo, "main")
    assert redone.message == "redo two" and redone.metadata == {"why": "oops"} and redone.parents == [empty.id]
    assert _read(s3, repo, "main", "a.txt") == b"v2" and _read(s3, repo, "main", "b.txt") == b"b"
    assert _head(client, repo, "main").id == redone.id


def test_revert_with_the_lakefs_client(api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    admin = api.stack.admin
    lake = lakefs.Client(
        host=api.base, username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )
    _put(s3, history, "main", "c.txt", b"c")
    three = _commit(client, history, "main", "three")
    commit = lakefs.Repository(history, client=lake).branch("main").revert("main~1")  # undo "two"
    assert commit.message == "Revert main~1" and commit.parents == [three.id]
    assert _read(s3, history, "main", "a.txt") == b"v1" and _read(s3, history, "main", "b.txt") is None
    assert _read(s3, history, "main", "c.txt") == b"c"


def test_reverting_a_merge_commit_needs_a_parent(api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    repo = history
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    _put(s3, repo, "dev", "dev.txt", b"d")
    _commit(client, repo, "dev", "dev work")
    merged = lakefs_sdk.RefsApi(client).merge_into_branch(repo, "dev", "main").reference
    path = f"/repositories/{repo}/branches/main/revert"
    assert "parent number" in _message(_post(api, path, {"ref": merged, "parent_number": 0}), 409)
    assert "parent number 3" in _message(_post(api, path, {"ref": merged, "parent_number": 3}), 400)
    assert _head(client, repo, "main").id == merged
    lakefs_sdk.BranchesApi(client).revert_branch(repo, "main", lakefs_sdk.RevertCreation(ref=merged, parent_number=1))
    assert _read(s3, repo, "main", "dev.txt") is None
    assert _head(client, repo, "main").parents == [merged]


def test_a_revert_conflict_is_409_and_changes_nothing(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str
) -> None:
    repo = history
    # "two" changed a.txt; a later commit changes it again, so undoing "two" conflicts.
    _put(s3, repo, "main", "a.txt", b"v3")
    three = _commit(client, repo, "main", "three")
    message = _message(
        _post(api, f"/repositories/{repo}/branches/main/revert", {"ref": "main~1", "parent_number": 0}), 409
    )
    assert message.startswith("conflict found") and "a.txt" in message
    assert _head(client, repo, "main").id == three.id and _read(s3, repo, "main", "a.txt") == b"v3"


def test_revert_and_cherry_pick_onto_a_dirty_branch_are_400(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str
) -> None:
    repo = history
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main~1"))
    before = _head(client, repo, "main").id
    _put(s3, repo, "main", "staged.txt", b"s")
    path = f"/repositories/{repo}/branches/main"
    assert "dirty branch" in _message(_post(api, path + "/revert", {"ref": "main", "parent_number": 0}), 400)
    _put(s3, repo, "dev", "x.txt", b"x")
    pick = _commit(client, repo, "dev", "x").id
    assert "dirty branch" in _message(_post(api, path + "/cherry-pick", {"ref": pick}), 400)
    assert _head(client, repo, "main").id == before


def test_cherry_pick_applies_a_commit(api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    repo = history
    branches = lakefs_sdk.BranchesApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main~1"))
    _put(s3, repo, "dev", "x.txt", b"x")
    picked = _commit(client, repo, "dev", "add x")
    _put(s3, repo, "dev", "y.txt", b"y")
    _commit(client, repo, "dev", "add y")
    main_head = _head(client, repo, "main").id
    # dev~1 (a ref expression) is "add x": only x.txt comes over.
    commit = branches.cherry_pick(repo, "main", lakefs_sdk.CherryPickCreation(ref="dev~1"))
    assert commit.message == "add x" and commit.parents == [main_head]
    # lakeFS's keys: where it came from, who made that commit.
    assert commit.metadata == {"origin": "add x", "cherry-pick-origin": picked.id, "cherry-pick-committer": "admin"}
    assert lakefs_sdk.CommitsApi(client).get_commit(repo, "main") == commit
    assert _read(s3, repo, "main", "x.txt") == b"x" and _read(s3, repo, "main", "y.txt") is None
    assert _read(s3, repo, "main", "a.txt") == b"v2"

    # The same change again changes nothing.
    with pytest.raises(ApiException) as again:
        branches.cherry_pick(repo, "main", lakefs_sdk.CherryPickCreation(ref=picked.id))
    assert again.value.status == 400 and "no changes" in json.loads(again.value.body)["message"]

    admin = api.stack.admin
    lake = lakefs.Client(
        host=api.base, username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )
    y = lakefs.Repository(repo, client=lake).branch("main").cherry_pick("dev")
    assert y.message == "add y" and y.parents == [commit.id] and _read(s3, repo, "main", "y.txt") == b"y"


def test_cherry_pick_conflicts_and_merge_commits(api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str) -> None:
    repo = history
    branches = lakefs_sdk.BranchesApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main~1"))
    _put(s3, repo, "dev", "a.txt", b"dev's")
    clash = _commit(client, repo, "dev", "dev changes a").id
    before = _head(client, repo, "main").id
    path = f"/repositories/{repo}/branches/main/cherry-pick"
    message = _message(_post(api, path, {"ref": clash}), 409)
    assert message.startswith("conflict found") and "a.txt" in message
    assert _head(client, repo, "main").id == before

    merged = (
        lakefs_sdk.RefsApi(client)
        .merge_into_branch(repo, "main", "dev", merge=lakefs_sdk.Merge(strategy="dest-wins"))
        .reference
    )
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="other", source="main~2"))
    other = f"/repositories/{repo}/branches/other/cherry-pick"
    assert "parent number" in _message(_post(api, other, {"ref": merged}), 400)
    assert "parent number 3" in _message(_post(api, other, {"ref": merged, "parent_number": 3}), 400)
    # Against its first parent (dev's head), the merge brought main's b.txt.
    commit = branches.cherry_pick(repo, "other", lakefs_sdk.CherryPickCreation(ref=merged, parent_number=1))
    assert _read(s3, repo, "other", "b.txt") == b"b" and commit.parents == [_head(client, repo, "other~1").id]


@pytest.mark.parametrize(
    ("what", "body", "status", "says"),
    [
        ("revert", {"ref": "main"}, 400, "parent_number"),
        ("revert", {"ref": "main", "parent_number": "1"}, 400, "parent_number"),
        ("revert", {"ref": "main", "parent_number": -1}, 400, "parent_number"),
        ("revert", {"ref": "no-such", "parent_number": 0}, 404, "no-such"),
        ("revert", {"ref": "main~9", "parent_number": 0}, 404, ""),
        ("revert", {"ref": 7, "parent_number": 0}, 400, "ref"),
        ("cherry-pick", {}, 400, "ref"),
        ("cherry-pick", {"ref": "main", "parent_number": 0}, 400, "parent_number"),
        ("cherry-pick", {"ref": "no-such"}, 404, "no-such"),
        ("cherry-pick", {"ref": "main", "commit_overrides": {"message": 5}}, 400, "message"),
        ("cherry-pick", {"ref": "main", "force": "yes"}, 400, "force"),
    ],
)
def test_bad_revert_and_cherry_pick_bodies_change_nothing(
    api: Api,
    client: lakefs_sdk.ApiClient,
    unchanged_history: str,
    what: str,
    body: dict[str, Any],
    status: int,
    says: str,
) -> None:
    history = unchanged_history
    before = _head(client, history, "main").id
    assert says in _message(_post(api, f"/repositories/{history}/branches/main/{what}", body), status)
    assert _head(client, history, "main").id == before


def test_unknown_branch_or_repository_is_404(api: Api, client: lakefs_sdk.ApiClient, unchanged_history: str) -> None:
    history = unchanged_history
    before = _head(client, history, "main").id
    _message(_post(api, f"/repositories/{history}/branches/nope/revert", {"ref": "main", "parent_number": 0}), 404)
    _message(_post(api, f"/repositories/{history}/branches/nope/cherry-pick", {"ref": "main~1"}), 404)
    _message(_post(api, "/repositories/no-such-repo/branches/main/revert", {"ref": "main", "parent_number": 0}), 404)
    assert _head(client, history, "main").id == before


def test_a_reader_cannot_revert_or_cherry_pick(api: Api, client: lakefs_sdk.ApiClient, unchanged_history: str) -> None:
    history = unchanged_history
    before = _head(client, history, "main").id
    reader = api.stack.reader
    path = f"/repositories/{history}/branches/main"
    _message(_post(api, path + "/revert", {"ref": "main", "parent_number": 0}, reader), 403)
    _message(_post(api, path + "/cherry-pick", {"ref": "main~1"}, reader), 403)
    assert _head(client, history, "main").id == before


def test_a_protected_branch_refuses_revert_and_cherry_pick(
    api: Api, client: lakefs_sdk.ApiClient, history: str
) -> None:
    repo = history
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main~1"))
    before = _head(client, repo, "main").id
    rule = pb.BranchProtectionRule(pattern="main", block_direct_writes=True)
    api.stack.graveler.SetBranchProtection(gapi.SetBranchProtectionRequest(repository=repo, rules=[rule]))
    try:
        path = f"/repositories/{repo}/branches/main"
        says = "cannot write to protected branch"
        assert says in _message(_post(api, path + "/revert", {"ref": "main", "parent_number": 0}), 403)
        assert says in _message(_post(api, path + "/cherry-pick", {"ref": "main~1"}), 403)
        assert _head(client, repo, "main").id == before
    finally:
        api.stack.graveler.SetBranchProtection(gapi.SetBranchProtectionRequest(repository=repo, rules=[]))


def test_a_cherry_pick_is_by_the_picker_with_overrides(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, history: str
) -> None:
    """The picked commit's author stays in its history; the new commit is by whoever picked it."""
    repo = history
    auth = lakefs_sdk.AuthApi(client)
    picker = f"picker-{repo}"
    auth.create_user(lakefs_sdk.UserCreation(id=picker))
    auth.add_group_membership("Developers", picker)
    key = auth.create_credentials(picker)
    as_picker = api.sdk(Credentials(key.access_key_id, SecretStr(key.secret_access_key)))
    branches = lakefs_sdk.BranchesApi(client)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main~1"))
    _put(s3, repo, "dev", "z.txt", b"z")
    picked = _commit(client, repo, "dev", "add z")
    overrides = lakefs_sdk.CommitOverrides(message="z, picked", metadata={"origin": "replaced", "extra": "1"})
    commit = lakefs_sdk.BranchesApi(as_picker).cherry_pick(
        repo, "main", lakefs_sdk.CherryPickCreation(ref=picked.id, commit_overrides=overrides)
    )
    assert commit.committer == picker and commit.message == "z, picked"
    assert commit.metadata == {
        "origin": "replaced",
        "extra": "1",
        "cherry-pick-origin": picked.id,
        # As lakeFS: who made the picked commit.
        "cherry-pick-committer": "admin",
    }
    assert lakefs_sdk.CommitsApi(client).get_commit(repo, picked.id).committer == "admin"
