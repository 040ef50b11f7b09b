"""What each AuthService call needs (see silt/iam_actions.py for the resources).

Calls that give someone more (creating, attaching or detaching a policy, changing group
membership, issuing a key for another user, deleting a policy or group) are checked again in
the handler: the caller must hold what it grants (services/auth/grants.py).

A user may always read about itself, without any policy: its record, groups, policies,
access keys (never their secrets: no call returns one after CreateCredentials), and decisions
about itself. In those requests an empty user id means the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.auth.signatures import CATALOG_SERVICE, check_call_key_audience
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as pb
from silt.rpc.interceptor import Authenticated, Require, Rule

SERVICE = "silt.auth.v1.AuthService"


def _user(name: str) -> Callable[[Any], str]:
    return lambda request: a.user_resource(getattr(request, name))


def _group(name: str) -> Callable[[Any], str]:
    return lambda request: a.group_resource(getattr(request, name))


def _policy(name: str) -> Callable[[Any], str]:
    return lambda request: a.policy_resource(getattr(request, name))


def _principal(name: str) -> Callable[[Any], str]:
    return lambda request: a.external_principal_resource(getattr(request, name))


def _const(resource: str) -> Callable[[Any], str]:
    return lambda _request: resource


def _attachment(request: Any) -> tuple[str, str]:
    """Both ends: whoever may attach to a user must also hold the action on the policy."""
    if request.WhichOneof("principal") == "group_id":
        target = a.group_resource(request.group_id)
    else:
        target = a.user_resource(request.user_id)
    return target, a.policy_resource(request.policy_id)


def _membership(request: Any) -> tuple[str, str]:
    """Both ends: a membership changes what the user may do, so the user is acted on as much as
    the group (a helpdesk limited to some users cannot change the groups of others)."""
    return a.group_resource(request.group_id), a.user_resource(request.user_id)


def _self(name: str) -> Callable[[Any], str]:
    return lambda request: getattr(request, name)


def _call_key_audience(request: Any) -> str:
    """Only graveler's and the compactor's: refused before any decision for `auth`, `s3` or
    anything else (InvalidArgument), whoever asks (services/auth/signatures.py)."""
    return a.audience_resource(check_call_key_audience(request.audience))


def _signature_audience(request: Any) -> str:
    """An S3 request's signature is verified for the gateway's audience; a SigV4 signature
    scoped to the Iceberg catalog's service (execute-api) for the REST API's, which serves the
    catalog: neither front end can have the other's requests verified, nor get their keys."""
    if request.version == pb.S3_SIGNATURE_VERSION_V4 and request.service == CATALOG_SERVICE:
        return a.audience_resource(a.API_AUDIENCE)
    return a.audience_resource(a.S3_AUDIENCE)


_RULES: dict[str, Rule] = {
    "CreateUser": Require(a.CREATE_USER, _user("id")),
    "GetUser": Require(a.READ_USER, _user("id"), unless_self=_self("id")),
    "ListUsers": Require(a.READ_USER, _const(a.USERS)),
    "DeleteUser": Require(a.DELETE_USER, _user("id")),
    "CreateGroup": Require(a.CREATE_GROUP, _group("id")),
    "GetGroup": Require(a.READ_GROUP, _group("id")),
    "ListGroups": Require(a.READ_GROUP, _const(a.GROUPS)),
    "DeleteGroup": Require(a.DELETE_GROUP, _group("id")),
    "AddGroupMember": Require(a.ADD_GROUP_MEMBER, _membership),
    "RemoveGroupMember": Require(a.REMOVE_GROUP_MEMBER, _membership),
    "ListGroupMembers": Require(a.READ_GROUP, _group("group_id")),
    "ListUserGroups": Require(a.READ_USER, _user("user_id"), unless_self=_self("user_id")),
    "CreatePolicy": Require(a.CREATE_POLICY, _policy("id")),
    "GetPolicy": Require(a.READ_POLICY, _policy("id")),
    "ListPolicies": Require(a.READ_POLICY, _const(a.POLICIES)),
    "DeletePolicy": Require(a.DELETE_POLICY, _policy("id")),
    # Replacing a policy is deleting and re-creating it under the same attachments: the handler
    # also asks for DeletePolicy and AttachPolicy on it, and grants checks both ways.
    "UpdatePolicy": Require(a.CREATE_POLICY, _policy("id")),
    "AttachPolicy": Require(a.ATTACH_POLICY, _attachment),
    "DetachPolicy": Require(a.DETACH_POLICY, _attachment),
    "ListUserPolicies": Require(a.READ_USER, _user("user_id"), unless_self=_self("user_id")),
    "ListGroupPolicies": Require(a.READ_GROUP, _group("group_id")),
    "CreateCredentials": Require(a.CREATE_CREDENTIALS, _user("user_id")),
    "ListCredentials": Require(a.READ_CREDENTIALS, _user("user_id"), unless_self=_self("user_id")),
    "DeleteCredentials": Require(a.DELETE_CREDENTIALS, _user("user_id")),
    # Linking an identity of another provider to a user lets it in as that user: on the user, as
    # issuing a key is (and the handler checks it as one). Listing a user's is reading about it.
    "CreateUserExternalPrincipal": Require(a.CREATE_USER_EXTERNAL_PRINCIPAL, _user("user_id")),
    "DeleteUserExternalPrincipal": Require(a.DELETE_USER_EXTERNAL_PRINCIPAL, _user("user_id")),
    "GetExternalPrincipal": Require(a.READ_EXTERNAL_PRINCIPAL, _principal("principal_id")),
    "ListUserExternalPrincipals": Require(a.READ_USER, _user("user_id"), unless_self=_self("user_id")),
    # Ending someone's sessions is less than deleting their keys (which ends them too); anyone
    # may end their own.
    "RevokeSessions": Require(a.DELETE_CREDENTIALS, _user("user_id"), unless_self=_self("user_id")),
    "Authorize": Require(a.AUTHORIZE, _user("user_id"), unless_self=_self("user_id")),
    "AuthorizeMany": Require(a.AUTHORIZE, _user("user_id"), unless_self=_self("user_id")),
    "AuthorizeKeys": Require(a.AUTHORIZE, _user("user_id"), unless_self=_self("user_id")),
    "WhoAmI": Authenticated(),
    # Whoever verifies for an audience can act as any signer toward it: each service user holds
    # auth:VerifySignature on its own audience only (services/auth/setup.py), and only a
    # statement naming the action allows it (`*` does not: silt.iam_actions.LITERAL_ONLY_ACTIONS).
    "VerifyS3Signature": Require(a.VERIFY_SIGNATURE, _signature_audience),
    "GetCallSigningKey": Require(a.VERIFY_SIGNATURE, _call_key_audience),
    # Checking a secret, or a session opened with one, is verifying for the REST API's audience.
    "VerifySecret": Require(a.VERIFY_SIGNATURE, _const(a.audience_resource(a.API_AUDIENCE))),
    "CreateSession": Require(a.VERIFY_SIGNATURE, _const(a.audience_resource(a.API_AUDIENCE))),
    "VerifySession": Require(a.VERIFY_SIGNATURE, _const(a.audience_resource(a.API_AUDIENCE))),
    # First-run setup (lakeFS's /setup_lakefs), the REST API's front door before anyone can log
    # in: it takes what the API's own user holds for its audience (an admin's `*` does not).
    # Creating the first admin succeeds only once, ever.
    "GetSetupState": Require(a.VERIFY_SIGNATURE, _const(a.audience_resource(a.API_AUDIENCE))),
    "SetupAdmin": Require(a.VERIFY_SIGNATURE, _const(a.audience_resource(a.API_AUDIENCE))),
}

RULES: dict[str, Rule] = {f"/{SERVICE}/{method}": rule for method, rule in _RULES.items()}
