"""Operations that change many keys at once honour object-scoped policies, through real servers
and lakefs-sdk: a merge, a revert, a cherry-pick, a branch reset (all of it, one object, a
prefix; a hard reset) and an import by a WriteRepo holder with an object Deny (`Deny WriteObject
and DeleteObject on <repo>/secret/*`) are refused whole, 403 lakeFS JSON, when a key they
change is denied, and nothing changes on the branch; the same operations touching only allowed
keys go through. A refusal names the denied key only when the user may read it. Object-scoped
WriteObject alone (no WriteRepo) merges nothing, as in lakeFS, which asks fs:CreateCommit on
the branch."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api


def _user(api: Api, statements: list[dict[str, Any]]) -> lakefs_sdk.ApiClient:
    """A new user whose only policy is statements (Silt's vocabulary), and its lakefs-sdk client."""
    auth = lakefs_sdk.AuthApi(api.sdk())
    user_id, policy_id = f"u-{secrets.token_hex(4)}", f"p-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    auth.create_policy(lakefs_sdk.Policy.from_dict({"id": policy_id, "statement": statements}))
    auth.attach_policy_to_user(user_id, policy_id)
    issued = auth.create_credentials(user_id)
    return api.sdk(Credentials(issued.access_key_id, SecretStr(issued.secret_access_key)))


def _writer_denied_secret(api: Api, repo: str) -> lakefs_sdk.ApiClient:
    """WriteRepo and ReadRepo on repo, but no write or delete under secret/, and hidden/ neither
    writable nor readable."""
    return _user(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": repo},
            {"effect": "deny", "action": ["WriteObject", "DeleteObject"], "resource": f"{repo}/secret/*"},
            {"effect": "deny", "action": ["WriteObject", "DeleteObject", "ReadObject"], "resource": f"{repo}/hidden/*"},
        ],
    )


def _denied(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value
    message: str = json.loads(caught.value.body)["message"]
    return message


def _put(api: Api, repo: str, branch: str, files: dict[str, bytes]) -> None:
    s3 = api.stack.client()
    for key, data in files.items():
        s3.put_object(Bucket=repo, Key=f"{branch}/{key}", Body=data)


def _commit(api: Api, repo: str, branch: str, message: str) -> str:
    commit = lakefs_sdk.CommitsApi(api.sdk()).commit(repo, branch, lakefs_sdk.CommitCreation(message=message))
    return str(commit.id)


def _branch(api: Api, repo: str, name: str, source: str = "main") -> None:
    lakefs_sdk.BranchesApi(api.sdk()).create_branch(repo, lakefs_sdk.BranchCreation(name=name, source=source))


def _head(api: Api, repo: str, branch: str = "main") -> str:
    return str(lakefs_sdk.BranchesApi(api.sdk()).get_branch(repo, branch).commit_id)


def _uncommitted(api: Api, repo: str, branch: str = "main") -> list[str]:
    return [d.path for d in lakefs_sdk.BranchesApi(api.sdk()).diff_branch(repo, branch).results]


@pytest.fixture
def seeded(api: Api, repo: str) -> str:
    """repo with open/a, secret/s and hidden/h committed on main."""
    _put(api, repo, "main", {"open/a": b"a", "secret/s": b"s", "hidden/h": b"h"})
    _commit(api, repo, "main", "seed")
    return repo


def test_merge_of_a_denied_key_is_refused_whole(api: Api, seeded: str) -> None:
    user = _writer_denied_secret(api, seeded)
    _branch(api, seeded, "dev")
    _put(api, seeded, "dev", {"open/b": b"b", "secret/s": b"changed"})
    _commit(api, seeded, "dev", "dev work")
    head = _head(api, seeded)
    refs = lakefs_sdk.RefsApi(user)
    message = _denied(lambda: refs.merge_into_branch(seeded, "dev", "main"))
    assert message == f"user {_id(api, user)} may not WriteObject on {seeded}/secret/s, which merging would change"
    assert _head(api, seeded) == head  # nothing merged, open/b neither

    # A removal needs DeleteObject: merging a branch that deleted a hidden key is refused too,
    # without naming it (the user may not read it).
    _branch(api, seeded, "drop")
    lakefs_sdk.ObjectsApi(api.sdk()).delete_object(seeded, "drop", "hidden/h")
    _commit(api, seeded, "drop", "drop hidden")
    message = _denied(lambda: refs.merge_into_branch(seeded, "drop", "main"))
    assert "hidden/h" not in message and "DeleteObject on every key merging would change in" in message
    assert _head(api, seeded) == head

    # Changes to allowed keys only merge, by the same user.
    _branch(api, seeded, "fine")
    _put(api, seeded, "fine", {"open/c": b"c"})
    _commit(api, seeded, "fine", "fine work")
    merged = refs.merge_into_branch(seeded, "fine", "main")
    assert _head(api, seeded) == merged.reference != head


def test_revert_of_a_commit_touching_a_denied_key_is_refused(api: Api, seeded: str) -> None:
    user = _writer_denied_secret(api, seeded)
    _put(api, seeded, "main", {"secret/s": b"v2"})
    touching = _commit(api, seeded, "main", "secret v2")
    _put(api, seeded, "main", {"open/a": b"a2"})
    allowed = _commit(api, seeded, "main", "open v2")
    branches = lakefs_sdk.BranchesApi(user)
    message = _denied(
        lambda: branches.revert_branch(seeded, "main", lakefs_sdk.RevertCreation(ref=touching, parent_number=0))
    )
    assert f"WriteObject on {seeded}/secret/s, which reverting would change" in message
    assert _head(api, seeded) == allowed
    branches.revert_branch(seeded, "main", lakefs_sdk.RevertCreation(ref=allowed, parent_number=0))
    assert _head(api, seeded) != allowed
    assert lakefs_sdk.ObjectsApi(api.sdk()).get_object(seeded, "main", "open/a") == b"a"


def test_cherry_pick_of_a_denied_key_is_refused(api: Api, seeded: str) -> None:
    user = _writer_denied_secret(api, seeded)
    _branch(api, seeded, "dev")
    _put(api, seeded, "dev", {"secret/new": b"n"})
    touching = _commit(api, seeded, "dev", "secret new")
    _put(api, seeded, "dev", {"open/new": b"n"})
    allowed = _commit(api, seeded, "dev", "open new")
    head = _head(api, seeded)
    branches = lakefs_sdk.BranchesApi(user)
    message = _denied(lambda: branches.cherry_pick(seeded, "main", lakefs_sdk.CherryPickCreation(ref=touching)))
    assert f"WriteObject on {seeded}/secret/new, which cherry-picking would change" in message
    assert _head(api, seeded) == head
    picked = branches.cherry_pick(seeded, "main", lakefs_sdk.CherryPickCreation(ref=allowed))
    assert _head(api, seeded) == picked.id != head


def test_branch_reset_dropping_a_denied_key_is_refused(api: Api, seeded: str) -> None:
    user = _writer_denied_secret(api, seeded)
    _put(api, seeded, "main", {"open/a": b"dirty", "secret/s": b"dirty"})
    branches = lakefs_sdk.BranchesApi(user)
    message = _denied(lambda: branches.reset_branch(seeded, "main", lakefs_sdk.ResetCreation(type="reset")))
    assert f"WriteObject on {seeded}/secret/s, which the reset would change" in message
    assert _uncommitted(api, seeded) == ["open/a", "secret/s"]  # nothing dropped

    # A hard reset to an older commit changes the denied key back: refused as well.
    base = _head(api, seeded)
    lakefs_sdk.BranchesApi(api.sdk()).reset_branch(seeded, "main", lakefs_sdk.ResetCreation(type="reset"))
    _put(api, seeded, "main", {"secret/s": b"v2"})
    _commit(api, seeded, "main", "secret v2")
    head = _head(api, seeded)
    hard = api.request("PUT", f"/repositories/{seeded}/branches/main/hard_reset?ref={base}", headers=_basic(api, user))
    assert hard.status == 403 and "secret/s" in json.loads(hard.data)["message"]
    assert _head(api, seeded) == head

    # With only allowed keys uncommitted, the same user resets the branch.
    _put(api, seeded, "main", {"open/a": b"dirty"})
    branches.reset_branch(seeded, "main", lakefs_sdk.ResetCreation(type="reset"))
    assert _uncommitted(api, seeded) == []


def test_deleting_a_branch_holding_denied_keys_is_refused(api: Api, seeded: str) -> None:
    """Deleting a branch and creating it again from another ref is a hard reset: the deletion
    removes the branch's keys, so a denied key on it (committed or uncommitted) refuses it."""
    user = _writer_denied_secret(api, seeded)
    _branch(api, seeded, "prod")
    _put(api, seeded, "main", {"secret/s": b"v2"})
    _commit(api, seeded, "main", "secret v2")
    head = _head(api, seeded, "prod")
    branches = lakefs_sdk.BranchesApi(user)
    # hidden/h comes first, unnamed: the user may not read it.
    message = _denied(lambda: branches.delete_branch(seeded, "prod"))
    assert (
        message
        == f"user {_id(api, user)} may not DeleteObject on every key deleting the branch would change in {seeded}"
    )
    assert _head(api, seeded, "prod") == head
    lakefs_sdk.ObjectsApi(api.sdk()).delete_object(seeded, "prod", "hidden/h")
    _commit(api, seeded, "prod", "drop hidden")
    message = _denied(lambda: branches.delete_branch(seeded, "prod"))
    assert f"DeleteObject on {seeded}/secret/s, which deleting the branch would change" in message
    assert lakefs_sdk.ObjectsApi(api.sdk()).get_object(seeded, "prod", "secret/s") == b"s"

    # A denied key only staged on a branch refuses its deletion too.
    _branch(api, seeded, "scratch", source="main")
    lakefs_sdk.ObjectsApi(api.sdk()).delete_object(seeded, "scratch", "secret/s")
    lakefs_sdk.ObjectsApi(api.sdk()).delete_object(seeded, "scratch", "hidden/h")
    _commit(api, seeded, "scratch", "no secrets")
    _put(api, seeded, "scratch", {"hidden/new": b"x"})
    message = _denied(lambda: branches.delete_branch(seeded, "scratch"))
    assert "hidden/new" not in message and "DeleteObject on every key deleting the branch would change" in message

    # A branch without denied keys goes, by the same user.
    lakefs_sdk.BranchesApi(api.sdk()).reset_branch(seeded, "scratch", lakefs_sdk.ResetCreation(type="reset"))
    branches.delete_branch(seeded, "scratch")
    names = [b.id for b in lakefs_sdk.BranchesApi(api.sdk()).list_branches(seeded).results]
    assert "scratch" not in names and "prod" in names


def test_a_user_without_object_rules_deletes_branches(api: Api, seeded: str) -> None:
    user = _user(api, [{"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": seeded}])
    _branch(api, seeded, "prod")
    lakefs_sdk.BranchesApi(user).delete_branch(seeded, "prod")
    lakefs_sdk.BranchesApi(user).create_branch(seeded, lakefs_sdk.BranchCreation(name="prod", source="main"))
    assert _head(api, seeded, "prod") == _head(api, seeded)


def test_object_and_prefix_reset_of_denied_keys_are_refused(api: Api, seeded: str) -> None:
    user = _writer_denied_secret(api, seeded)
    _put(api, seeded, "main", {"open/a": b"dirty", "secret/s": b"dirty", "secret/t": b"new"})
    branches = lakefs_sdk.BranchesApi(user)
    reset = lakefs_sdk.ResetCreation
    message = _denied(lambda: branches.reset_branch(seeded, "main", reset(type="object", path="secret/s")))
    assert f"WriteObject on {seeded}/secret/s" in message
    # Dropping a key staged new removes it: DeleteObject.
    message = _denied(lambda: branches.reset_branch(seeded, "main", reset(type="object", path="secret/t")))
    assert f"DeleteObject on {seeded}/secret/t" in message
    _denied(lambda: branches.reset_branch(seeded, "main", reset(type="common_prefix", path="secret/")))
    assert _uncommitted(api, seeded) == ["open/a", "secret/s", "secret/t"]
    branches.reset_branch(seeded, "main", reset(type="common_prefix", path="open/"))
    assert _uncommitted(api, seeded) == ["secret/s", "secret/t"]
    # A key with nothing uncommitted changes nothing: allowed, whatever the policy says of it.
    branches.reset_branch(seeded, "main", reset(type="object", path="secret/other"))


def test_object_scoped_writes_alone_merge_nothing(api: Api, seeded: str) -> None:
    """WriteObject on open/* without WriteRepo: writes its keys, but a merge (a commit on the
    branch, lakeFS's fs:CreateCommit) needs the branch's CommitBranch (held by the repository's
    WriteRepo or the branch's WriteBranch), even with every change in open/."""
    user = _user(
        api,
        [
            {"effect": "allow", "action": ["ReadRefs"], "resource": seeded},
            {
                "effect": "allow",
                "action": ["ReadObject", "WriteObject", "DeleteObject"],
                "resource": f"{seeded}/open/*",
            },
        ],
    )
    _branch(api, seeded, "dev")
    _put(api, seeded, "dev", {"open/mine": b"mine"})
    _commit(api, seeded, "dev", "mine")
    assert lakefs_sdk.ObjectsApi(user).get_object(seeded, "dev", "open/mine") == b"mine"
    before = _head(api, seeded)
    message = _denied(lambda: lakefs_sdk.RefsApi(user).merge_into_branch(seeded, "dev", "main"))
    assert f"CommitBranch on {seeded}@main" in message
    assert _head(api, seeded) == before


def _id(api: Api, user: lakefs_sdk.ApiClient) -> str:
    return str(lakefs_sdk.AuthApi(user).get_current_user().user.id)


def _basic(api: Api, user: lakefs_sdk.ApiClient) -> dict[str, str]:
    config = user.configuration
    return urllib3.make_headers(basic_auth=f"{config.username}:{config.password}")


# --- imports: the suite's stack whose local blockstore imports from a landing directory ----------


def _import(user: lakefs_sdk.ApiClient, repo: str, source: Path, destination: str) -> str:
    location = lakefs_sdk.ImportLocation(type="common_prefix", path=f"local://{source}/", destination=destination)
    creation = lakefs_sdk.ImportCreation(paths=[location], commit=lakefs_sdk.CommitCreation(message="import"))
    return str(lakefs_sdk.ImportApi(user).import_start(repo, "main", creation).id)


def _import_status(user: lakefs_sdk.ApiClient, repo: str, import_id: str) -> lakefs_sdk.ImportStatus:
    deadline = time.monotonic() + 60
    while True:
        status = lakefs_sdk.ImportApi(user).import_status(repo, "main", import_id)
        if status.completed or status.error or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def test_import_changing_a_denied_key_is_refused(import_api: Api, import_landing: Path) -> None:
    api = import_api
    repo = f"r-{secrets.token_hex(5)}"
    creation = lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=f"local://{repo}")
    lakefs_sdk.RepositoriesApi(api.sdk()).create_repository(creation)
    _put(api, repo, "main", {"open/a": b"a", "secret/s": b"s"})
    _commit(api, repo, "main", "seed")
    user = _writer_denied_secret(api, repo)
    source = import_landing / uuid.uuid4().hex
    source.mkdir()
    (source / "x.csv").write_bytes(b"1,2\n")

    # Into a denied prefix: refused before anything starts.
    message = _denied(lambda: _import(user, repo, source, "secret/"))
    assert f"WriteObject on any key under {repo}/secret/" in message

    # Into the root: the import replaces everything, secret/s included (removed): the import
    # fails when it would commit, and nothing is committed.
    head = _head(api, repo)
    status = _import_status(user, repo, _import(user, repo, source, ""))
    assert not status.completed and status.error is not None
    assert f"DeleteObject on {repo}/secret/s" in status.error.message
    assert _head(api, repo) == head

    # Into an allowed prefix: imported and committed.
    status = _import_status(user, repo, _import(user, repo, source, "open/in/"))
    assert status.completed and status.error is None
    assert lakefs_sdk.ObjectsApi(api.sdk()).get_object(repo, "main", "open/in/x.csv") == b"1,2\n"
