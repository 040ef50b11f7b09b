"""IAM through the REST API with lakefs-sdk's AuthApi, on the real stack: users, groups,
memberships, policies, attachments and credentials, and who may do what with them.

The API makes every IAM call for its caller (edge/api/iam/calls.py): a delegate's
limits and auth's "nobody grants what they do not hold" apply through the API too.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api


def _id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def _status(call: Callable[[], Any]) -> tuple[int, str]:
    try:
        call()
    except ApiException as exc:
        return exc.status, json.loads(exc.body or "{}").get("message", "")
    return 200, ""


def _auth(client: lakefs_sdk.ApiClient) -> lakefs_sdk.AuthApi:
    return lakefs_sdk.AuthApi(client)


def _statement(effect: str, actions: list[str], resource: str) -> lakefs_sdk.Statement:
    return lakefs_sdk.Statement(effect=effect, action=actions, resource=resource)


def _policy(policy_id: str, *statements: lakefs_sdk.Statement) -> lakefs_sdk.Policy:
    return lakefs_sdk.Policy(id=policy_id, statement=list(statements))


def _user_with_key(api: Api, client: lakefs_sdk.ApiClient, prefix: str) -> tuple[str, Credentials]:
    auth = _auth(client)
    user_id = _id(prefix)
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    issued = auth.create_credentials(user_id)
    return user_id, Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))


def test_admin_sets_up_a_reader_of_one_repository(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    auth = _auth(client)
    user_id, group_id, policy_id = _id("alice"), _id("readers"), _id("read-one")
    user = auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    assert user.id == user_id and user.creation_date > 0
    group = auth.create_group(lakefs_sdk.GroupCreation(id=group_id, description="reads one repository"))
    assert (group.id, group.description) == (group_id, "reads one repository")
    policy = auth.create_policy(_policy(policy_id, _statement("allow", ["ReadRepo"], repo)))
    assert [(s.effect, s.action, s.resource) for s in policy.statement] == [("allow", ["ReadRepo"], repo)]
    auth.attach_policy_to_group(group_id, policy_id)
    auth.add_group_membership(group_id, user_id)

    issued = auth.create_credentials(user_id)
    assert len(issued.secret_access_key) >= 20
    alice = api.sdk(Credentials(issued.access_key_id, SecretStr(issued.secret_access_key)))

    # Alice reads that repository through the REST API, and nothing more.
    assert lakefs_sdk.RepositoriesApi(alice).get_repository(repo).id == repo
    assert [b.id for b in lakefs_sdk.BranchesApi(alice).list_branches(repo).results] == ["main"]
    creation = lakefs_sdk.BranchCreation(name="feature", source="main")
    assert _status(lambda: lakefs_sdk.BranchesApi(alice).create_branch(repo, creation))[0] == 403
    assert _status(lambda: _auth(alice).list_users())[0] == 403
    assert _status(lambda: _auth(alice).create_user(lakefs_sdk.UserCreation(id=_id("x"))))[0] == 403
    # ...but reads about herself, as auth allows every user.
    assert _auth(alice).get_user(user_id).id == user_id
    assert [g.id for g in _auth(alice).list_user_groups(user_id).results] == [group_id]
    effective = _auth(alice).list_user_policies(user_id, effective=True).results
    assert [p.id for p in effective] == [policy_id]
    assert _auth(alice).list_user_policies(user_id).results == []
    keys = _auth(alice).list_user_credentials(user_id).results
    assert [k.access_key_id for k in keys] == [issued.access_key_id]
    # The secret is returned once: no listing or read carries it.
    got = auth.get_credentials(user_id, issued.access_key_id)
    assert got.access_key_id == issued.access_key_id and "secret_access_key" not in got.to_dict()

    assert [u.id for u in auth.list_group_members(group_id).results] == [user_id]
    assert [p.id for p in auth.list_group_policies(group_id).results] == [policy_id]
    assert auth.get_group(group_id).id == group_id
    assert auth.get_policy(policy_id).statement[0].resource == repo

    # Taking it apart, each step answered as lakeFS does (204) and visible at once.
    auth.delete_group_membership(group_id, user_id)
    assert auth.list_group_members(group_id).results == []
    auth.attach_policy_to_user(user_id, policy_id)
    assert [p.id for p in auth.list_user_policies(user_id).results] == [policy_id]
    auth.detach_policy_from_user(user_id, policy_id)
    auth.detach_policy_from_group(group_id, policy_id)
    auth.delete_credentials(user_id, issued.access_key_id)
    assert _status(lambda: auth.get_credentials(user_id, issued.access_key_id))[0] == 404
    auth.delete_policy(policy_id)
    auth.delete_group(group_id)
    auth.delete_user(user_id)
    for gone in (
        lambda: auth.get_user(user_id),
        lambda: auth.get_group(group_id),
        lambda: auth.get_policy(policy_id),
    ):
        assert _status(gone)[0] == 404


def test_listing_pages_by_id_with_a_prefix(client: lakefs_sdk.ApiClient) -> None:
    auth = _auth(client)
    prefix = _id("page")
    ids = sorted(f"{prefix}-{n}" for n in range(5))
    for user_id in ids:
        auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    seen: list[str] = []
    after = ""
    for _ in range(10):
        page = auth.list_users(prefix=prefix, after=after, amount=2)
        seen += [u.id for u in page.results]
        assert page.pagination.results == len(page.results) <= 2
        if not page.pagination.has_more:
            assert page.pagination.next_offset == ""
            break
        after = page.pagination.next_offset
    assert seen == ids
    everyone = auth.list_users(amount=1000).results
    assert [u.id for u in everyone] == sorted(u.id for u in everyone)
    groups = auth.list_groups(prefix="Ad").results
    assert [g.id for g in groups] == ["Admins"]
    policies = auth.list_policies(prefix="Full").results
    assert [(p.id, p.statement[0].action) for p in policies] == [("FullAccess", ["*"])]


def test_a_non_admin_is_refused_and_nothing_is_stored(api: Api, client: lakefs_sdk.ApiClient) -> None:
    reader = _auth(api.sdk(api.stack.reader))
    user_id, group_id, policy_id = _id("nope"), _id("nope"), _id("nope")
    refusals = [
        lambda: reader.list_users(),
        lambda: reader.list_groups(),
        lambda: reader.list_policies(),
        lambda: reader.create_user(lakefs_sdk.UserCreation(id=user_id)),
        lambda: reader.create_group(lakefs_sdk.GroupCreation(id=group_id)),
        lambda: reader.create_policy(_policy(policy_id, _statement("allow", ["*"], "*"))),
        lambda: reader.add_group_membership("Admins", "reader"),
        lambda: reader.attach_policy_to_user("reader", "FullAccess"),
        lambda: reader.create_credentials("admin"),
        lambda: reader.get_user("admin"),
    ]
    for refused in refusals:
        status, message = _status(refused)
        assert status == 403, message
        assert "may not" in message
    admin = _auth(client)
    assert _status(lambda: admin.get_user(user_id))[0] == 404
    assert _status(lambda: admin.get_group(group_id))[0] == 404
    assert _status(lambda: admin.get_policy(policy_id))[0] == 404
    assert "Admins" not in [g.id for g in admin.list_user_groups("reader").results]


def test_a_delegate_cannot_escalate_through_the_api(api: Api, client: lakefs_sdk.ApiClient) -> None:
    """A user with some IAM rights grants only what it holds itself, through the API as over gRPC."""
    admin = _auth(client)
    delegate_id, creds = _user_with_key(api, client, "delegate")
    rights = _id("delegate-rights")
    admin.create_policy(
        _policy(
            rights,
            _statement("allow", ["iam:CreatePolicy", "iam:AttachPolicy", "iam:ReadPolicy"], "policies/*"),
            _statement("allow", ["iam:AttachPolicy", "iam:ReadUser"], f"users/{delegate_id}"),
            _statement("allow", ["ReadRepo"], "*"),
        )
    )
    admin.attach_policy_to_user(delegate_id, rights)
    delegate = _auth(api.sdk(creds))

    allow_all = _id("allow-all")
    status, message = _status(lambda: delegate.create_policy(_policy(allow_all, _statement("allow", ["*"], "*"))))
    assert status == 403 and "does not hold itself" in message
    assert _status(lambda: admin.get_policy(allow_all))[0] == 404
    status, message = _status(lambda: delegate.attach_policy_to_user(delegate_id, "FullAccess"))
    assert status == 403 and "does not hold itself" in message
    assert _status(lambda: delegate.add_group_membership("Admins", delegate_id))[0] == 403
    # What it holds it may hand out, to itself too.
    reading = _id("reading")
    delegate.create_policy(_policy(reading, _statement("allow", ["ReadRepo"], "*")))
    delegate.attach_policy_to_user(delegate_id, reading)
    attached = {p.id for p in admin.list_user_policies(delegate_id).results}
    assert attached == {rights, reading}
    assert "Admins" not in [g.id for g in admin.list_user_groups(delegate_id).results]


@pytest.mark.parametrize(
    ("call", "status", "text"),
    [
        (lambda auth: auth.create_user(lakefs_sdk.UserCreation(id="bad id!")), 400, "invalid user id"),
        (lambda auth: auth.create_group(lakefs_sdk.GroupCreation(id="-leading")), 400, "invalid group id"),
        (lambda auth: auth.get_user("no-such-user-x1"), 404, "not found"),
        (lambda auth: auth.get_group("no-such-group-x1"), 404, "not found"),
        (lambda auth: auth.delete_policy("no-such-policy-x1"), 404, "not found"),
        (lambda auth: auth.attach_policy_to_user("admin", "no-such-policy-x1"), 404, "not found"),
        (lambda auth: auth.add_group_membership("Admins", "no-such-user-x1"), 404, "not found"),
        (lambda auth: auth.create_credentials("no-such-user-x1"), 404, "not found"),
        (lambda auth: auth.create_user(lakefs_sdk.UserCreation(id="admin")), 409, "exists"),
        (lambda auth: auth.create_group(lakefs_sdk.GroupCreation(id="Admins")), 409, "exists"),
        (lambda auth: auth.get_user("u" * 300), 400, "userId"),
    ],
)
def test_bad_input(client: lakefs_sdk.ApiClient, call: Callable[[Any], Any], status: int, text: str) -> None:
    got, message = _status(lambda: call(_auth(client)))
    assert got == status, message
    assert text.lower() in message.lower()


@pytest.mark.parametrize(
    ("call", "status", "message"),
    [
        (lambda auth: auth.delete_user("no-such-user-x2"), 404, "user not found"),
        (lambda auth: auth.get_user("no-such-user-x2"), 404, "user not found"),
        (lambda auth: auth.create_user(lakefs_sdk.UserCreation(id="admin")), 409, "Already exists"),
        (lambda auth: auth.create_group(lakefs_sdk.GroupCreation(id="Admins")), 409, "Already exists"),
    ],
)
def test_lakefs_words_where_lakectl_compares_them(
    client: lakefs_sdk.ApiClient, call: Callable[[Any], Any], status: int, message: str
) -> None:
    """lakectl's own tests compare the whole message (`user not found`, then `404 Not Found`)."""
    assert _status(lambda: call(_auth(client))) == (status, message)


def test_bad_bodies_store_nothing(api: Api, client: lakefs_sdk.ApiClient) -> None:
    policy_id = _id("bad")
    bodies: list[tuple[Any, str]] = [
        (b"{not json", "not valid JSON"),
        ({"id": policy_id}, "statement"),
        ({"id": policy_id, "statement": []}, "statement"),
        ({"id": policy_id, "statement": [{"effect": "maybe", "action": ["*"], "resource": "*"}]}, "effect"),
        ({"id": policy_id, "statement": [{"effect": "allow", "action": ["ReadRepos"], "resource": "*"}]}, "ReadRepos"),
        (
            {"id": policy_id, "statement": [{"effect": "allow", "action": ["fs:ReadObject"], "resource": "*"}]},
            "fs:ReadObject",
        ),
    ]
    for body, text in bodies:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        reply = api.request("POST", "/auth/policies", body=raw, headers=_json_headers(api))
        assert reply.status == 400, reply.data
        assert text in json.loads(reply.data)["message"]
    assert _status(lambda: _auth(client).get_policy(policy_id))[0] == 404
    reply = api.request("POST", "/auth/users", body=b'{"id": 5}', headers=_json_headers(api))
    assert reply.status == 400
    # The SDK refuses amount > 1000 itself; a raw client is told by the API.
    reply = api.request("GET", "/auth/users?amount=1000000000")
    assert reply.status == 400 and "amount" in json.loads(reply.data)["message"]


def _json_headers(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    basic = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
    return {**basic, "Content-Type": "application/json"}
