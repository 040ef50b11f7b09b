"""Editing a policy in place (PUT /auth/policies/{id}) and signing out everywhere
(DELETE /auth/users/{id}/sessions), on the real stack, by raw HTTP as a browser or script does."""

from __future__ import annotations

import json
import secrets
from typing import Any

import lakefs_sdk
import urllib3
from pydantic import SecretStr

from silt.auth.v1 import auth_pb2, auth_pb2_grpc, model_pb2
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import Api, error_message


def _id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def _basic(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _send(api: Api, method: str, path: str, body: Any, creds: Credentials | None = None) -> urllib3.BaseHTTPResponse:
    headers = {**_basic(creds or api.stack.admin), "Content-Type": "application/json"}
    return api.request(method, path, body=json.dumps(body).encode(), headers=headers)


def _policy(policy_id: str, actions: list[str], resource: str = "*", effect: str = "allow") -> dict[str, Any]:
    return {"id": policy_id, "statement": [{"effect": effect, "action": actions, "resource": resource}]}


def _user_with_key(api: Api, prefix: str) -> tuple[str, Credentials]:
    auth = lakefs_sdk.AuthApi(api.sdk())
    user_id = _id(prefix)
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    issued = auth.create_credentials(user_id)
    return user_id, Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))


def _login(api: Api, creds: Credentials) -> str:
    """A browser's session cookie (`name=value`) for creds."""
    body = {"access_key_id": creds.access_key_id, "secret_access_key": creds.secret_access_key.get_secret_value()}
    reply = api.request(
        "POST", "/auth/login", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    assert reply.status == 200, reply.data
    return reply.headers["set-cookie"].split(";", 1)[0]


def _as_browser(api: Api, cookie: str, method: str = "GET", path: str = "/user") -> urllib3.BaseHTTPResponse:
    headers = {"Cookie": cookie, "Origin": api.stack.endpoint}
    return api.request(method, path, headers=headers)


def test_a_policy_is_replaced_in_place_and_its_attachments_stay(api: Api) -> None:
    policy_id, group_id = _id("edit"), _id("editors")
    assert _send(api, "POST", "/auth/policies", _policy(policy_id, ["ReadRepo"])).status == 201
    auth = lakefs_sdk.AuthApi(api.sdk())
    auth.create_group(lakefs_sdk.GroupCreation(id=group_id))
    auth.attach_policy_to_group(group_id, policy_id)
    reply = _send(api, "PUT", f"/auth/policies/{policy_id}", _policy(policy_id, ["ReadRepo", "WriteRepo"], "r-*"))
    assert reply.status == 200, reply.data
    body = json.loads(reply.data)
    assert body["statement"] == [{"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": "r-*"}]
    assert [p.id for p in auth.list_group_policies(group_id).results] == [policy_id]
    assert auth.get_policy(policy_id).statement[0].resource == "r-*"


def test_policy_edits_are_validated_with_lakefs_json_errors(api: Api) -> None:
    policy_id = _id("bad")
    assert _send(api, "POST", "/auth/policies", _policy(policy_id, ["ReadRepo"])).status == 201
    cases = [
        (_policy(policy_id, ["NoSuchAction"]), 400, "NoSuchAction"),
        (_policy(policy_id, ["ReadRepo"], effect="maybe"), 400, "effect"),
        ({"id": policy_id, "statement": "nope"}, 400, "statement"),
        (_policy("other-id", ["ReadRepo"]), 400, "differs"),
    ]
    for body, status, text in cases:
        message = error_message(_send(api, "PUT", f"/auth/policies/{policy_id}", body), status)
        assert text in message, (body, message)
    assert "not found" in error_message(
        _send(api, "PUT", "/auth/policies/nope-x", _policy("nope-x", ["ReadRepo"])), 404
    )
    # Nothing of the refused edits was stored.
    assert lakefs_sdk.AuthApi(api.sdk()).get_policy(policy_id).statement[0].action == ["ReadRepo"]
    # Creating is validated the same way.
    assert "NoSuchAction" in error_message(
        _send(api, "POST", "/auth/policies", _policy(_id("x"), ["NoSuchAction"])), 400
    )


def test_only_policy_administrators_edit_policies(api: Api) -> None:
    policy_id = _id("guarded")
    assert _send(api, "POST", "/auth/policies", _policy(policy_id, ["ReadRepo"])).status == 201
    _, creds = _user_with_key(api, "nobody")
    reply = _send(api, "PUT", f"/auth/policies/{policy_id}", _policy(policy_id, ["*"]), creds)
    error_message(reply, 403)
    assert lakefs_sdk.AuthApi(api.sdk()).get_policy(policy_id).statement[0].action == ["ReadRepo"]


def test_sign_out_everywhere_ends_every_session_of_that_user_only(api: Api) -> None:
    user_id, creds = _user_with_key(api, "roamer")
    other_id, other_creds = _user_with_key(api, "bystander")
    laptop, phone, bystander = _login(api, creds), _login(api, creds), _login(api, other_creds)
    assert _as_browser(api, phone).status == 200
    reply = _as_browser(api, laptop, "DELETE", f"/auth/users/{user_id}/sessions")
    assert reply.status == 204
    assert "Max-Age=0" in reply.headers["set-cookie"] or 'internal_auth_session=""' in reply.headers["set-cookie"]
    for cookie in (laptop, phone):
        error_message(_as_browser(api, cookie), 401)
    assert json.loads(_as_browser(api, bystander).data)["user"]["id"] == other_id
    # The access key still works, and a new login opens a session that works.
    assert api.request("GET", "/user", headers=_basic(creds)).status == 200
    assert _as_browser(api, _login(api, creds)).status == 200


def test_an_admin_signs_a_user_out_everywhere_and_others_may_not(api: Api) -> None:
    user_id, creds = _user_with_key(api, "target")
    _, meddler = _user_with_key(api, "meddler")
    session = _login(api, creds)
    refused = api.request("DELETE", f"/auth/users/{user_id}/sessions", headers=_basic(meddler))
    error_message(refused, 403)
    assert _as_browser(api, session).status == 200
    reply = api.request("DELETE", f"/auth/users/{user_id}/sessions")  # as the admin, by Basic
    assert reply.status == 204 and "set-cookie" not in reply.headers
    error_message(_as_browser(api, session), 401)
    error_message(api.request("DELETE", "/auth/users/no-such-user-x/sessions"), 404)


def test_a_delegate_cannot_escalate_by_editing_a_policy_it_holds(api: Api) -> None:
    """Editing is creating again: the grants check applies, so a delegate that may edit the policy
    attached to itself still cannot turn it into Allow * *."""
    delegate_id, creds = _user_with_key(api, "delegate")
    rights, own = _id("delegate-rights"), _id("own")
    rights_body = {
        "id": rights,
        "statement": [
            {
                "effect": "allow",
                "action": ["iam:CreatePolicy", "iam:DeletePolicy", "iam:AttachPolicy"],
                "resource": "policies/*",
            },
            {"effect": "allow", "action": ["ReadRepo"], "resource": "*"},
            # `own` is attached to the delegate: editing it acts on the delegate as attaching would.
            {"effect": "allow", "action": ["iam:AttachPolicy"], "resource": f"users/{delegate_id}"},
        ],
    }
    assert _send(api, "POST", "/auth/policies", rights_body).status == 201
    assert _send(api, "POST", "/auth/policies", _policy(own, ["ReadRepo"])).status == 201
    auth = lakefs_sdk.AuthApi(api.sdk())
    auth.attach_policy_to_user(delegate_id, rights)
    auth.attach_policy_to_user(delegate_id, own)
    message = error_message(_send(api, "PUT", f"/auth/policies/{own}", _policy(own, ["*"]), creds), 403)
    assert "does not hold itself" in message
    assert auth.get_policy(own).statement[0].action == ["ReadRepo"]
    # What it holds it may put there.
    assert _send(api, "PUT", f"/auth/policies/{own}", _policy(own, ["ReadRepo"], "r-*"), creds).status == 200


def test_a_delegate_edits_only_policies_whose_holders_it_may_attach_to(api: Api) -> None:
    """A helpdesk scoped to team-* may not edit team-x once an admin attached it to someone
    else: that would reach them (a Deny as much as an Allow); 403 names who."""
    helpdesk_id, creds = _user_with_key(api, "helpdesk")
    rights, team_policy = _id("helpdesk-rights"), _id("team")
    actions = ["iam:CreatePolicy", "iam:DeletePolicy", "iam:AttachPolicy"]
    rights_body = {
        "id": rights,
        "statement": [
            {"effect": "allow", "action": actions, "resource": "policies/team-*"},
            {"effect": "allow", "action": actions, "resource": "users/team-*"},
        ],
    }
    assert _send(api, "POST", "/auth/policies", rights_body).status == 201
    assert _send(api, "POST", "/auth/policies", _policy(team_policy, ["ReadRepo"], "r-*")).status == 201
    auth = lakefs_sdk.AuthApi(api.sdk())
    auth.attach_policy_to_user(helpdesk_id, rights)
    bob_id, _ = _user_with_key(api, "bob")
    auth.attach_policy_to_user(bob_id, team_policy)
    lockout = _policy(team_policy, ["*"], effect="deny")
    message = error_message(_send(api, "PUT", f"/auth/policies/{team_policy}", lockout, creds), 403)
    assert f"users/{bob_id}" in message
    assert auth.get_policy(team_policy).statement[0].effect == "allow"


def test_silt_s_own_policies_are_refused_and_descriptions_kept(api: Api) -> None:
    message = error_message(
        _send(api, "PUT", "/auth/policies/RepoReadAll", _policy("RepoReadAll", ["ReadRepo"], "r-*")), 409
    )
    assert "Silt's own" in message and "create a new policy" in message
    policy_id = _id("described")
    read = model_pb2.Statement(effect=model_pb2.EFFECT_ALLOW, actions=["ReadRepo"], resources=["*"])
    with signed_channel(api.stack.stack.endpoints["auth"], api.stack.admin) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        auth.CreatePolicy(auth_pb2.CreatePolicyRequest(id=policy_id, description="kept", statements=[read]))
        assert _send(api, "PUT", f"/auth/policies/{policy_id}", _policy(policy_id, ["ReadRepo"])).status == 200
        assert auth.GetPolicy(auth_pb2.GetPolicyRequest(id=policy_id)).description == "kept"
