"""Group ACLs (lakeFS's ACL model) through the REST API, on the real stack: set and read back,
what each permission lets a member do, the group's other policies detached, lakeFS's 404s,
bad input and who may.

lakefs-sdk has no ACL operations (lakeFS publishes them in its swagger only), so the ACL calls
are raw HTTP, as lakectl's `auth groups acl` sends them; everything else is lakefs-sdk.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api, error_message


def _id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def _headers(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _set(api: Api, group_id: str, body: Any, creds: Credentials | None = None) -> urllib3.BaseHTTPResponse:
    headers = {**_headers(creds or api.stack.admin), "Content-Type": "application/json"}
    return api.request("POST", f"/auth/groups/{group_id}/acl", body=json.dumps(body).encode(), headers=headers)


def _get(api: Api, group_id: str, creds: Credentials | None = None) -> urllib3.BaseHTTPResponse:
    return api.request("GET", f"/auth/groups/{group_id}/acl", headers=_headers(creds or api.stack.admin))


def _group(client: lakefs_sdk.ApiClient) -> str:
    group_id = _id("acl-group")
    lakefs_sdk.AuthApi(client).create_group(lakefs_sdk.GroupCreation(id=group_id))
    return group_id


def _member(api: Api, client: lakefs_sdk.ApiClient, group_id: str) -> Credentials:
    auth = lakefs_sdk.AuthApi(client)
    user_id = _id("acl-member")
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    auth.add_group_membership(group_id, user_id)
    issued = auth.create_credentials(user_id)
    return Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))


def _can(call: Any) -> bool:
    try:
        call()
    except ApiException as exc:
        assert exc.status in (401, 403), (exc.status, exc.body)
        return False
    return True


@pytest.mark.parametrize("permission", ["Read", "Write", "Super", "Admin"])
def test_an_acl_reads_back_as_set(api: Api, client: lakefs_sdk.ApiClient, permission: str) -> None:
    group_id = _group(client)
    reply = _set(api, group_id, {"permission": permission})
    assert reply.status == 201 and not reply.data, reply.data
    got = _get(api, group_id)
    assert got.status == 200 and json.loads(got.data) == {"permission": permission}
    # Realised as lakeFS does: one policy, named after the group, the group's only one.
    policies = lakefs_sdk.AuthApi(client).list_group_policies(group_id).results
    assert [p.id for p in policies] == [f"ACL_-_{group_id}"]


def test_each_permission_lets_members_do_what_it_says(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    group_id = _group(client)
    member = _member(api, client, group_id)
    as_member = api.sdk(member)
    branches = lakefs_sdk.BranchesApi(as_member)

    def read() -> bool:
        return _can(lambda: branches.list_branches(repo))

    def write() -> bool:
        creation = lakefs_sdk.BranchCreation(name=_id("b"), source="main")
        return _can(lambda: branches.create_branch(repo, creation))

    def create_repo() -> bool:
        name = _id("acl-repo")
        creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
        return _can(lambda: lakefs_sdk.RepositoriesApi(as_member).create_repository(creation))

    def manage_users() -> bool:
        return _can(lambda: lakefs_sdk.AuthApi(as_member).list_users())

    expected = {
        "Read": (True, False, False, False),
        "Write": (True, True, False, False),
        "Super": (True, True, True, False),
        "Admin": (True, True, True, True),
    }
    for permission, allowed in expected.items():
        assert _set(api, group_id, {"permission": permission}).status == 201
        _wait_for_caches()
        assert (read(), write(), create_repo(), manage_users()) == allowed, permission
    # Lowering it again takes effect too.
    assert _set(api, group_id, {"permission": "Read"}).status == 201
    _wait_for_caches()
    assert (read(), write()) == (True, False)


def _wait_for_caches() -> None:
    # The suite's auth caches keep a decision for a second (conftest): an IAM change shows after it.
    time.sleep(1.2)


def test_setting_an_acl_detaches_the_groups_other_policies(api: Api, client: lakefs_sdk.ApiClient) -> None:
    auth = lakefs_sdk.AuthApi(client)
    group_id = _group(client)
    auth.attach_policy_to_group(group_id, "RepoReadWriteAll")
    assert error_message(_get(api, group_id), 404) == "Policy attached to group has no ACL"
    assert json.loads(_get(api, group_id).data)["no_acl"] is True
    assert _set(api, group_id, {"permission": "Read"}).status == 201
    assert [p.id for p in auth.list_group_policies(group_id).results] == [f"ACL_-_{group_id}"]
    # The policy stays, for the groups that still hold it.
    assert auth.get_policy("RepoReadWriteAll").id == "RepoReadWriteAll"
    # A second policy attached beside the ACL: lakeFS's "no ACL" for several.
    auth.attach_policy_to_group(group_id, "RepoReadAll")
    reply = _get(api, group_id)
    assert error_message(reply, 404) == "Multiple policies attached to group - no ACL"
    assert json.loads(reply.data)["no_acl"] is True


def test_a_group_without_policies_has_lakefs_blank_acl(api: Api, client: lakefs_sdk.ApiClient) -> None:
    reply = _get(api, _group(client))
    assert reply.status == 200 and json.loads(reply.data) == {"permission": ""}


def test_an_edited_acl_policy_is_no_acl(api: Api, client: lakefs_sdk.ApiClient) -> None:
    group_id = _group(client)
    assert _set(api, group_id, {"permission": "Write"}).status == 201
    policy = lakefs_sdk.Policy(
        id=f"ACL_-_{group_id}",
        statement=[lakefs_sdk.Statement(effect="allow", action=["ReadRepo"], resource="prod-*")],
    )
    lakefs_sdk.AuthApi(client).update_policy(policy.id, policy)
    assert error_message(_get(api, group_id), 404) == "Policy attached to group has no ACL"


def test_bad_acl_requests(api: Api, client: lakefs_sdk.ApiClient) -> None:
    group_id = _group(client)
    for body, text in [
        ({"permission": "Owner"}, "Bad ACL permission"),
        ({"permission": "read"}, "Bad ACL permission"),
        ({}, "permission"),
        ({"permission": 3}, "permission"),
        ({"permission": "Read", "repositories": ["x"]}, "repositories"),
    ]:
        assert text in error_message(_set(api, group_id, body), 400), body
    assert _get(api, group_id).status == 200  # nothing was written
    assert json.loads(_get(api, group_id).data) == {"permission": ""}
    missing = _id("no-such-group")
    assert "not found" in error_message(_set(api, missing, {"permission": "Read"}), 404)
    assert "not found" in error_message(_get(api, missing), 404)
    # Ids: over auth's 128 characters (any route), and too long to prefix (setting only).
    assert error_message(_get(api, "g" * 129), 400)
    assert error_message(_set(api, "g" * 129, {"permission": "Read"}), 400)
    long_group = "g" * 125
    lakefs_sdk.AuthApi(client).create_group(lakefs_sdk.GroupCreation(id=long_group))
    try:
        assert "at most 122" in error_message(_set(api, long_group, {"permission": "Read"}), 400)
    finally:
        lakefs_sdk.AuthApi(client).delete_group(long_group)


def test_only_administrators_set_or_read_acls(api: Api, client: lakefs_sdk.ApiClient) -> None:
    group_id = _group(client)
    assert _set(api, group_id, {"permission": "Read"}).status == 201
    reader = api.stack.reader
    error_message(_set(api, group_id, {"permission": "Admin"}, reader), 403)
    error_message(_get(api, group_id, reader), 403)
    # A member cannot raise its own group's ACL either.
    member = _member(api, client, group_id)
    error_message(_set(api, group_id, {"permission": "Admin"}, member), 403)
    assert json.loads(_get(api, group_id).data) == {"permission": "Read"}


def test_what_setup_binds_again_is_kept_with_409(api: Api, client: lakefs_sdk.ApiClient) -> None:
    """A preset group's policy, a service user's rights and group: setup binds them again at
    every start, so undoing one (an ACL set on a preset group detaches its policy) would not
    last; the API answers 409 and writes nothing."""
    auth = lakefs_sdk.AuthApi(client)
    for undo in (
        lambda: auth.detach_policy_from_group("Analysts", "RepoReadAll"),
        lambda: auth.detach_policy_from_user("svc-api", "ApiActsForUsers"),
        lambda: auth.delete_group_membership("Services", "svc-gateway"),
    ):
        with pytest.raises(ApiException) as refused:
            undo()
        assert refused.value.status == 409 and "setup makes it again at every start" in str(refused.value.body)
    assert "setup makes it again" in error_message(_set(api, "Analysts", {"permission": "Read"}), 409)
    analysts = [p.id for p in auth.list_group_policies("Analysts").results]
    assert "RepoReadAll" in analysts and "ACL_-_Analysts" not in analysts
    assert "svc-gateway" in [u.id for u in auth.list_group_members("Services").results]
    # The listings say which bindings those are (auth's own answer, not a copy of its rule), so
    # that a client offers no Detach or Remove for them; the others carry no mark.
    for path, kept, free in (
        ("/auth/groups/Analysts/policies", "RepoReadAll", None),
        ("/auth/groups/Services/members", "svc-gateway", None),
        ("/auth/users/svc-api/groups", "Services", None),
        ("/auth/users/svc-api/policies", "ApiActsForUsers", None),
        ("/auth/groups/Admins/members", None, "admin"),
    ):
        listed = api.request("GET", path, headers=_headers(api.stack.admin))
        assert listed.status == 200, (path, listed.data)
        marks = {item["id"]: item.get("kept_by_setup", False) for item in json.loads(listed.data)["results"]}
        if kept:
            assert marks[kept] is True, (path, marks)
        if free:
            assert marks[free] is False, (path, marks)
