"""External principals through the REST API with lakefs-sdk, on the real stack, and the logins
that need an identity provider answering 501 with their reason (edge/api/not_served.py)."""

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

from edge.api.not_served import NOT_SERVED
from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api, error_message


def _id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def _arn(name: str) -> str:
    return f"arn:aws:iam::123456789012:role/{_id(name)}"


def _status(call: Callable[[], Any]) -> tuple[int, str]:
    try:
        call()
    except ApiException as exc:
        return exc.status, json.loads(exc.body or "{}").get("message", "")
    return 200, ""


def _user(client: lakefs_sdk.ApiClient, prefix: str = "ext") -> str:
    user_id = _id(prefix)
    lakefs_sdk.AuthApi(client).create_user(lakefs_sdk.UserCreation(id=user_id))
    return user_id


def _user_with_key(client: lakefs_sdk.ApiClient, prefix: str) -> tuple[str, Credentials]:
    user_id = _user(client, prefix)
    issued = lakefs_sdk.AuthApi(client).create_credentials(user_id)
    return user_id, Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))


def test_a_principal_is_linked_read_listed_and_unlinked(client: lakefs_sdk.ApiClient) -> None:
    external = lakefs_sdk.ExternalApi(client)
    user_id = _user(client)
    role = _arn("etl")
    creation = lakefs_sdk.ExternalPrincipalCreation(settings=[{"region": "eu-west-1"}])
    external.create_user_external_principal(user_id, role, creation)
    found = external.get_external_principal(role)
    assert (found.id, found.user_id, found.settings) == (role, user_id, [{"region": "eu-west-1"}])
    listed = external.list_user_external_principals(user_id)
    assert [p.id for p in listed.results] == [role] and not listed.pagination.has_more
    external.delete_user_external_principal(user_id, role)
    assert _status(lambda: external.get_external_principal(role))[0] == 404
    assert external.list_user_external_principals(user_id).results == []


def test_principals_page_as_lakefs_lists(client: lakefs_sdk.ApiClient) -> None:
    external = lakefs_sdk.AuthApi(client)  # AuthApi carries them too, as in lakeFS's SDK
    user_id = _user(client, "paged")
    roles = [f"arn:aws:iam::1:role/{team}/{n}" for team in ("a", "b") for n in range(3)]
    for role in roles:
        external.create_user_external_principal(user_id, role)  # no body: settings are optional
    first = external.list_user_external_principals(user_id, amount=4)
    assert [p.id for p in first.results] == roles[:4]
    assert first.pagination.has_more and first.pagination.next_offset == roles[3]
    rest = external.list_user_external_principals(user_id, after=first.pagination.next_offset)
    assert [p.id for p in rest.results] == roles[4:] and not rest.pagination.has_more
    only_b = external.list_user_external_principals(user_id, prefix="arn:aws:iam::1:role/b/")
    assert [p.id for p in only_b.results] == roles[3:]
    assert all(p.settings is None for p in only_b.results)


def test_a_principal_is_linked_to_one_user_at_most(client: lakefs_sdk.ApiClient) -> None:
    external = lakefs_sdk.ExternalApi(client)
    first, second = _user(client, "first"), _user(client, "second")
    role = _arn("shared")
    external.create_user_external_principal(first, role)
    assert _status(lambda: external.create_user_external_principal(second, role)) == (409, "Already exists")
    assert _status(lambda: external.create_user_external_principal(first, role))[0] == 409
    assert _status(lambda: external.delete_user_external_principal(second, role))[0] == 404
    assert external.get_external_principal(role).user_id == first


def test_unknown_and_bad_input(api: Api, client: lakefs_sdk.ApiClient) -> None:
    external = lakefs_sdk.ExternalApi(client)
    user_id = _user(client, "bad-input")
    missing_user = _id("nobody")
    assert _status(lambda: external.create_user_external_principal(missing_user, _arn("x"))) == (
        404,
        "user not found",
    )
    assert _status(lambda: external.list_user_external_principals(missing_user))[0] == 404
    assert _status(lambda: external.get_external_principal(_arn("never")))[0] == 404
    assert _status(lambda: external.delete_user_external_principal(user_id, _arn("never")))[0] == 404
    # Over-long ids, a principal id with a space, over-large settings: 400 with lakeFS's JSON error.
    assert _status(lambda: external.create_user_external_principal("u" * 129, "role"))[0] == 400
    assert _status(lambda: external.create_user_external_principal(user_id, "r" * 513))[0] == 400
    assert _status(lambda: external.get_external_principal("r" * 513))[0] == 400
    assert _status(lambda: external.create_user_external_principal(user_id, "has space"))[0] == 400
    too_many = lakefs_sdk.ExternalPrincipalCreation(settings=[{"k": "v"}] * 17)
    assert _status(lambda: external.create_user_external_principal(user_id, "role-x", too_many))[0] == 400
    headers = {**_basic(api.stack.admin), "Content-Type": "application/json"}
    base = f"/auth/users/{user_id}/external/principals"
    for query, body in [("", b""), ("?principalId=", b""), ("?principalId=r", b'{"settings": "no"}')]:
        error_message(api.request("POST", base + query, body=body, headers=headers), 400)
    assert external.list_user_external_principals(user_id).results == []


def _basic(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def test_only_administrators_link_read_or_unlink_principals(api: Api, client: lakefs_sdk.ApiClient) -> None:
    admin = lakefs_sdk.ExternalApi(client)
    victim = _user(client, "victim")
    role = _arn("victim")
    admin.create_user_external_principal(victim, role)
    reader = lakefs_sdk.ExternalApi(api.sdk(api.stack.reader))
    for call in (
        lambda: reader.create_user_external_principal(victim, _arn("mine")),
        lambda: reader.delete_user_external_principal(victim, role),
        lambda: reader.get_external_principal(role),
        lambda: reader.list_user_external_principals(victim),
    ):
        assert _status(call)[0] == 403
    # Linking a principal to oneself is refused too: it is not reading about oneself.
    me, creds = _user_with_key(client, "self")
    as_me = lakefs_sdk.ExternalApi(api.sdk(creds))
    assert _status(lambda: as_me.create_user_external_principal(me, _arn("self")))[0] == 403
    # Listing one's own is reading about oneself, which needs no policy.
    assert as_me.list_user_external_principals(me).results == []
    assert admin.get_external_principal(role).user_id == victim


@pytest.mark.parametrize("operation", sorted(NOT_SERVED))
def test_logins_needing_an_identity_provider_answer_501_with_the_reason(api: Api, operation: str) -> None:
    entry = NOT_SERVED[operation]
    bodies = {
        "externalPrincipalLogin": {"identityRequest": {"method": "POST", "url": "https://sts.amazonaws.com/"}},
        "stsLogin": {"code": "c", "state": "s", "redirect_uri": "http://x/"},
    }
    body = json.dumps(bodies.get(operation, {})).encode() if entry.method == "POST" else None
    headers = {"Content-Type": "application/json"} if body else {}
    for who in ({}, _basic(api.stack.admin)):  # anyone: lakeFS serves these without credentials
        reply = api.request(entry.method, entry.path, body=body, headers={**headers, **who})
        assert error_message(reply, 501) == entry.reason
        assert "not implemented" in entry.reason and "configured" in entry.reason


def test_the_sdk_sees_the_501(api: Api) -> None:
    external = lakefs_sdk.ExternalApi(api.sdk())
    login = lakefs_sdk.ExternalLoginInformation(identity_request={"method": "POST"})
    status, message = _status(lambda: external.external_principal_login(login))
    assert status == 501 and message == NOT_SERVED["externalPrincipalLogin"].reason
