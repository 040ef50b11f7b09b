"""IAM: users, groups, memberships, policies and their attachments, credentials.

Every route asks auth (ctx.authorize) with the action auth's own rule names for the call
(services/auth/permissions.py), then makes the call *for the caller* (edge/api/iam/calls.py):
auth judges it again as the caller's, grants check included, so the API adds no rights of its
own. Reading about oneself needs no policy, as in auth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NamedTuple, Protocol

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import (
    CredentialsList,
    GroupCreation,
    GroupList,
    Policy,
    PolicyList,
    UserCreation,
    UserList,
)

from edge.api.bodies import POLICY_BODY_BYTES, SMALL_BODY_BYTES, json_body
from edge.api.context import Context, Ctx
from edge.api.errors import ApiError, bad_request, not_found
from edge.api.iam import acl
from edge.api.iam import models as iam_models
from edge.api.iam.calls import iam_call
from edge.api.iam.paging import id_page
from edge.api.iam.policies import from_silt, to_silt
from edge.api.paging import PrefixPageParams, PrefixPageQuery
from edge.api.responses import model_response, no_content
from edge.api.session_cookie import drop_session_cookie
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.errors import SILT_OWN_POLICY
from silt.iam_system import SYSTEM_GROUPS, SYSTEM_POLICIES, kept_binding
from silt.paging import MAX_PAGE

router = APIRouter()

# Auth's ids are at most 128 characters; access key ids 20.
MAX_ID = 128
UserId = Annotated[str, Path(alias="userId", max_length=MAX_ID)]
GroupId = Annotated[str, Path(alias="groupId", max_length=MAX_ID)]
PolicyId = Annotated[str, Path(alias="policyId", max_length=MAX_ID)]
AccessKeyId = Annotated[str, Path(alias="accessKeyId", max_length=MAX_ID)]

USER = "/auth/users/{userId}"
GROUP = "/auth/groups/{groupId}"
POLICY = "/auth/policies/{policyId}"
# Credentials of one user examined to find one key: ids share a 19-character prefix with at
# most 36 others (20 upper-case letters and digits), so this many always reach it.
KEY_SEARCH = 64


async def authorize_about(ctx: Context, action: str, user_id: str) -> None:
    """As auth's rules: a user reads about itself without any policy."""
    if user_id != ctx.caller.user_id:
        await ctx.authorize(action, a.user_resource(user_id))


def _created() -> Response:
    return Response(status_code=201)


class _ListRequest(Protocol):
    """What every auth list request has: it pages by id from an exclusive `after`."""

    after: str
    amount: int


def _id_of(record: Any) -> str:
    return str(record.id)


def _access_key_id_of(credential: Any) -> str:
    return str(credential.access_key_id)


class _Listed(NamedTuple):
    """What one kind of auth list answers: the reply's repeated field, lakeFS's list model,
    how an item is shown in it, and the id an item is paged by."""

    items: str
    model: Callable[..., Any]
    shown: Callable[[Any], Any]
    id_of: Callable[[Any], str] = _id_of
    system: frozenset[str] = frozenset()


_USERS = _Listed("users", UserList, iam_models.user)
_GROUPS = _Listed("groups", GroupList, iam_models.group, system=SYSTEM_GROUPS)
_POLICIES = _Listed("policies", PolicyList, from_silt, system=SYSTEM_POLICIES)


def _marked(shown: dict[str, Any], system: frozenset[str]) -> dict[str, Any]:
    """A group or policy as answered, with Silt's `system: true` on its own (silt/iam_system.py:
    auth refuses to delete them, the admin pages show them apart); lakeFS's clients ignore it."""
    return {**shown, "system": True} if shown.get("id") in system else shown


_CREDENTIALS = _Listed("credentials", CredentialsList, iam_models.credentials, _access_key_id_of)


async def _listing(
    ctx: Context, method: Any, request: _ListRequest, listed: _Listed, page: PrefixPageQuery
) -> Response:
    """A lakeFS page (prefix, after, amount) of an auth list call made for the caller."""

    kept: set[str] = set()

    async def fetch(cursor: str, want: int) -> tuple[Any, bool]:
        request.after, request.amount = cursor, want  # one call at a time: the request is reused
        reply = await iam_call(ctx, method, request)
        kept.update(getattr(reply, "kept_by_setup", ()))
        return getattr(reply, listed.items), reply.has_more

    found, paging = await id_page(fetch, listed.id_of, page.prefix, page.after, page.amount)
    body = listed.model(pagination=paging, results=[listed.shown(r) for r in found]).to_dict()
    body["results"] = [_kept(_marked(shown, listed.system), kept) for shown in body["results"]]
    return JSONResponse(body)


def _kept(shown: dict[str, Any], kept: set[str]) -> dict[str, Any]:
    """An item of a relation's listing (a group's members, a user's groups, the policies attached
    to either) with Silt's `kept_by_setup: true` when auth says setup makes that binding again at
    every start (it refuses to undo it: 409): the admin pages offer no Detach or Remove for it."""
    return {**shown, "kept_by_setup": True} if shown.get("id") in kept else shown


# --- users --------------------------------------------------------------------------------


@router.get("/auth/users")
async def list_users(ctx: Ctx, page: PrefixPageParams) -> Response:
    await ctx.authorize(a.READ_USER, a.USERS)
    request = auth_api.ListUsersRequest()
    return await _listing(ctx, ctx.backend.auth.ListUsers, request, _USERS, page)


@router.post("/auth/users", status_code=201)
async def create_user(ctx: Ctx, request: Request) -> Response:
    # The resource to authorize is the id in the body, so the body (kept small) is read first.
    body = await json_body(request, UserCreation, SMALL_BODY_BYTES)
    await ctx.authorize(a.CREATE_USER, a.user_resource(body.id))
    created = await iam_call(ctx, ctx.backend.auth.CreateUser, auth_api.CreateUserRequest(id=body.id))
    return model_response(iam_models.user(created), 201)


@router.get(USER)
async def get_user(ctx: Ctx, user_id: UserId) -> Response:
    await authorize_about(ctx, a.READ_USER, user_id)
    found = await iam_call(ctx, ctx.backend.auth.GetUser, auth_api.GetUserRequest(id=user_id))
    return model_response(iam_models.user(found))


@router.delete(USER, status_code=204)
async def delete_user(ctx: Ctx, user_id: UserId) -> Response:
    await ctx.authorize(a.DELETE_USER, a.user_resource(user_id))
    await iam_call(ctx, ctx.backend.auth.DeleteUser, auth_api.DeleteUserRequest(id=user_id))
    return no_content()


@router.get(USER + "/groups")
async def list_user_groups(ctx: Ctx, user_id: UserId, page: PrefixPageParams) -> Response:
    await authorize_about(ctx, a.READ_USER, user_id)
    request = auth_api.ListUserGroupsRequest(user_id=user_id)
    return await _listing(ctx, ctx.backend.auth.ListUserGroups, request, _GROUPS, page)


@router.get(USER + "/policies")
async def list_user_policies(
    ctx: Ctx,
    user_id: UserId,
    page: PrefixPageParams,
    effective: bool = False,
) -> Response:
    await authorize_about(ctx, a.READ_USER, user_id)
    request = auth_api.ListUserPoliciesRequest(user_id=user_id, effective=effective)
    return await _listing(ctx, ctx.backend.auth.ListUserPolicies, request, _POLICIES, page)


async def _attachment(ctx: Context, action: str, method: Any, principal: str, policy_id: str, **ids: str) -> None:
    # Both ends, as auth's rule: whoever attaches to a user must also hold the action on the policy.
    await ctx.authorize(action, principal)
    await ctx.authorize(action, a.policy_resource(policy_id))
    await iam_call(ctx, method, auth_api.PolicyAttachmentRequest(policy_id=policy_id, **ids))


@router.put(USER + "/policies/{policyId}", status_code=201)
async def attach_policy_to_user(ctx: Ctx, user_id: UserId, policy_id: PolicyId) -> Response:
    principal = a.user_resource(user_id)
    await _attachment(ctx, a.ATTACH_POLICY, ctx.backend.auth.AttachPolicy, principal, policy_id, user_id=user_id)
    return _created()


@router.delete(USER + "/policies/{policyId}", status_code=204)
async def detach_policy_from_user(ctx: Ctx, user_id: UserId, policy_id: PolicyId) -> Response:
    principal = a.user_resource(user_id)
    await _attachment(ctx, a.DETACH_POLICY, ctx.backend.auth.DetachPolicy, principal, policy_id, user_id=user_id)
    return no_content()


# --- credentials --------------------------------------------------------------------------


@router.get(USER + "/credentials")
async def list_user_credentials(ctx: Ctx, user_id: UserId, page: PrefixPageParams) -> Response:
    await authorize_about(ctx, a.READ_CREDENTIALS, user_id)
    request = auth_api.ListCredentialsRequest(user_id=user_id)
    return await _listing(ctx, ctx.backend.auth.ListCredentials, request, _CREDENTIALS, page)


@router.post(USER + "/credentials", status_code=201)
async def create_credentials(ctx: Ctx, user_id: UserId) -> Response:
    await ctx.authorize(a.CREATE_CREDENTIALS, a.user_resource(user_id))
    request = auth_api.CreateCredentialsRequest(user_id=user_id)
    issued = await iam_call(ctx, ctx.backend.auth.CreateCredentials, request)
    # The only time the secret is ever returned (auth stores it encrypted and never sends it again).
    return model_response(iam_models.credentials_with_secret(issued), 201)


@router.get(USER + "/credentials/{accessKeyId}")
async def get_credentials(ctx: Ctx, user_id: UserId, access_key_id: AccessKeyId) -> Response:
    await authorize_about(ctx, a.READ_CREDENTIALS, user_id)
    # Auth has no single-key read: list from just before the id (ids have one fixed length).
    request = auth_api.ListCredentialsRequest(user_id=user_id, after=access_key_id[:-1], amount=KEY_SEARCH)
    reply = await iam_call(ctx, ctx.backend.auth.ListCredentials, request)
    for info in reply.credentials:
        if info.access_key_id == access_key_id:
            return model_response(iam_models.credentials(info))
    raise not_found(f"access key {access_key_id} of user {user_id} not found")


@router.delete(USER + "/credentials/{accessKeyId}", status_code=204)
async def delete_credentials(ctx: Ctx, user_id: UserId, access_key_id: AccessKeyId) -> Response:
    await ctx.authorize(a.DELETE_CREDENTIALS, a.user_resource(user_id))
    request = auth_api.DeleteCredentialsRequest(user_id=user_id, access_key_id=access_key_id)
    await iam_call(ctx, ctx.backend.auth.DeleteCredentials, request)
    return no_content()


# --- sessions -----------------------------------------------------------------------------


@router.delete(USER + "/sessions", status_code=204)
async def revoke_sessions(ctx: Ctx, user_id: UserId, request: Request) -> Response:
    """Sign out everywhere: every login session of the user ends (access keys do not). Anyone
    may end their own; ending another user's takes what deleting their keys takes."""
    await authorize_about(ctx, a.DELETE_CREDENTIALS, user_id)
    await iam_call(ctx, ctx.backend.auth.RevokeSessions, auth_api.RevokeSessionsRequest(user_id=user_id))
    ctx.backend.forget_sessions()
    response = no_content()
    if user_id == ctx.caller.user_id:
        drop_session_cookie(request, response)
    return response


# --- groups -------------------------------------------------------------------------------


@router.get("/auth/groups")
async def list_groups(ctx: Ctx, page: PrefixPageParams) -> Response:
    await ctx.authorize(a.READ_GROUP, a.GROUPS)
    request = auth_api.ListGroupsRequest()
    return await _listing(ctx, ctx.backend.auth.ListGroups, request, _GROUPS, page)


@router.post("/auth/groups", status_code=201)
async def create_group(ctx: Ctx, request: Request) -> Response:
    body = await json_body(request, GroupCreation, SMALL_BODY_BYTES)
    await ctx.authorize(a.CREATE_GROUP, a.group_resource(body.id))
    created = auth_api.CreateGroupRequest(id=body.id, description=body.description or "")
    group = await iam_call(ctx, ctx.backend.auth.CreateGroup, created)
    return model_response(iam_models.group(group), 201)


@router.get(GROUP)
async def get_group(ctx: Ctx, group_id: GroupId) -> Response:
    await ctx.authorize(a.READ_GROUP, a.group_resource(group_id))
    found = await iam_call(ctx, ctx.backend.auth.GetGroup, auth_api.GetGroupRequest(id=group_id))
    return JSONResponse(_marked(iam_models.group(found).to_dict(), SYSTEM_GROUPS))


@router.delete(GROUP, status_code=204)
async def delete_group(ctx: Ctx, group_id: GroupId) -> Response:
    await ctx.authorize(a.DELETE_GROUP, a.group_resource(group_id))
    await iam_call(ctx, ctx.backend.auth.DeleteGroup, auth_api.DeleteGroupRequest(id=group_id))
    return no_content()


@router.get(GROUP + "/members")
async def list_group_members(ctx: Ctx, group_id: GroupId, page: PrefixPageParams) -> Response:
    await ctx.authorize(a.READ_GROUP, a.group_resource(group_id))
    request = auth_api.ListGroupMembersRequest(group_id=group_id)
    return await _listing(ctx, ctx.backend.auth.ListGroupMembers, request, _USERS, page)


async def _membership(ctx: Context, action: str, method: Any, group_id: str, user_id: str) -> None:
    # Both ends, as auth's rule: a membership changes what the user may do.
    await ctx.authorize(action, a.group_resource(group_id))
    await ctx.authorize(action, a.user_resource(user_id))
    await iam_call(ctx, method, auth_api.GroupMemberRequest(group_id=group_id, user_id=user_id))


@router.put(GROUP + "/members/{userId}", status_code=201)
async def add_group_membership(ctx: Ctx, group_id: GroupId, user_id: UserId) -> Response:
    await _membership(ctx, a.ADD_GROUP_MEMBER, ctx.backend.auth.AddGroupMember, group_id, user_id)
    return _created()


@router.delete(GROUP + "/members/{userId}", status_code=204)
async def delete_group_membership(ctx: Ctx, group_id: GroupId, user_id: UserId) -> Response:
    await _membership(ctx, a.REMOVE_GROUP_MEMBER, ctx.backend.auth.RemoveGroupMember, group_id, user_id)
    return no_content()


@router.get(GROUP + "/policies")
async def list_group_policies(ctx: Ctx, group_id: GroupId, page: PrefixPageParams) -> Response:
    await ctx.authorize(a.READ_GROUP, a.group_resource(group_id))
    request = auth_api.ListGroupPoliciesRequest(group_id=group_id)
    return await _listing(ctx, ctx.backend.auth.ListGroupPolicies, request, _POLICIES, page)


@router.put(GROUP + "/policies/{policyId}", status_code=201)
async def attach_policy_to_group(ctx: Ctx, group_id: GroupId, policy_id: PolicyId) -> Response:
    principal = a.group_resource(group_id)
    await _attachment(ctx, a.ATTACH_POLICY, ctx.backend.auth.AttachPolicy, principal, policy_id, group_id=group_id)
    return _created()


@router.delete(GROUP + "/policies/{policyId}", status_code=204)
async def detach_policy_from_group(ctx: Ctx, group_id: GroupId, policy_id: PolicyId) -> Response:
    principal = a.group_resource(group_id)
    await _attachment(ctx, a.DETACH_POLICY, ctx.backend.auth.DetachPolicy, principal, policy_id, group_id=group_id)
    return no_content()


# --- group ACLs (lakeFS's ACL model, edge/api/iam/acl.py) ---------------------------------

NO_ACL = "Policy attached to group has no ACL"
SEVERAL_POLICIES = "Multiple policies attached to group - no ACL"


def _no_acl(message: str) -> Response:
    # lakeFS's ErrorNoACL: the group exists, but what it holds is no ACL.
    return JSONResponse({"message": message, "no_acl": True}, status_code=404)


@router.get(GROUP + "/acl")
async def get_group_acl(ctx: Ctx, group_id: GroupId) -> Response:
    await ctx.authorize(a.READ_GROUP, a.group_resource(group_id))
    acl_policy = acl.policy_id(group_id)
    if acl_policy is not None:
        await ctx.authorize(a.READ_POLICY, a.policy_resource(acl_policy))
    # Two are enough to tell "its only policy" from "one of several", as lakeFS asks.
    request = auth_api.ListGroupPoliciesRequest(group_id=group_id, amount=2)
    policies = list((await iam_call(ctx, ctx.backend.auth.ListGroupPolicies, request)).policies)
    if not policies:
        # lakeFS: a blank ACL, valid, allowing nothing (as a group without policies does).
        return JSONResponse({"permission": ""})
    if len(policies) > 1:
        return _no_acl(SEVERAL_POLICIES)
    permission = acl.permission_of(policies[0]) if policies[0].id == acl_policy else None
    if permission is None:
        return _no_acl(NO_ACL)
    return JSONResponse({"permission": permission})


@router.post(GROUP + "/acl", status_code=201)
async def set_group_acl(ctx: Ctx, group_id: GroupId, request: Request) -> Response:
    """As lakeFS: write the group's ACL policy, attach it, and detach every other policy, so the
    ACL is all the group grants. Each call is auth's, made for the caller (grants included)."""
    acl_policy = acl.settable_policy_id(group_id)
    await ctx.authorize(a.READ_GROUP, a.group_resource(group_id))
    if group_id in SYSTEM_GROUPS:
        # Its policy would be detached, and setup attaches it again at every start: refused
        # before anything is written, as auth refuses that detach.
        raise ApiError(409, kept_binding(f"the preset policy of group {group_id!r}"))
    # Writing the policy may replace it (delete and create) and attaches it to the group.
    for action in (a.CREATE_POLICY, a.DELETE_POLICY, a.ATTACH_POLICY):
        await ctx.authorize(action, a.policy_resource(acl_policy))
    await ctx.authorize(a.ATTACH_POLICY, a.group_resource(group_id))
    body = await json_body(request, acl.ACL, SMALL_BODY_BYTES)
    statements = acl.statements(body.permission)
    await iam_call(ctx, ctx.backend.auth.GetGroup, auth_api.GetGroupRequest(id=group_id))
    await _write_acl_policy(ctx, acl_policy, statements, acl.description(group_id, body.permission))
    attach = auth_api.PolicyAttachmentRequest(policy_id=acl_policy, group_id=group_id)
    await iam_call(ctx, ctx.backend.auth.AttachPolicy, attach)
    for other in await _group_policy_ids(ctx, group_id):
        if other != acl_policy:
            detach = auth_api.PolicyAttachmentRequest(policy_id=other, group_id=group_id)
            await iam_call(ctx, ctx.backend.auth.DetachPolicy, detach)
    return _created()


async def _write_acl_policy(ctx: Context, policy_id: str, statements: list[Any], description: str) -> None:
    """Replace the policy, or create it; once more if another request created it meanwhile."""
    update = auth_api.UpdatePolicyRequest(id=policy_id, statements=statements, description=description)
    create = auth_api.CreatePolicyRequest(id=policy_id, statements=statements, description=description)
    try:
        await iam_call(ctx, ctx.backend.auth.UpdatePolicy, update)
        return
    except ApiError as exc:
        if exc.status != 404:
            raise
    try:
        await iam_call(ctx, ctx.backend.auth.CreatePolicy, create)
    except ApiError as exc:
        if exc.status != 409:
            raise
        await iam_call(ctx, ctx.backend.auth.UpdatePolicy, update)


# Pages of a group's policies read before detaching them: far more than any group holds.
MAX_GROUP_POLICY_PAGES = 10


async def _group_policy_ids(ctx: Context, group_id: str) -> list[str]:
    ids: list[str] = []
    request = auth_api.ListGroupPoliciesRequest(group_id=group_id, amount=MAX_PAGE)
    for _ in range(MAX_GROUP_POLICY_PAGES):
        reply = await iam_call(ctx, ctx.backend.auth.ListGroupPolicies, request)
        ids += [p.id for p in reply.policies]
        if not reply.has_more or not reply.policies:
            break
        request.after = reply.policies[-1].id
    return ids


# --- policies -----------------------------------------------------------------------------


@router.get("/auth/policies")
async def list_policies(ctx: Ctx, page: PrefixPageParams) -> Response:
    await ctx.authorize(a.READ_POLICY, a.POLICIES)
    request = auth_api.ListPoliciesRequest()
    return await _listing(ctx, ctx.backend.auth.ListPolicies, request, _POLICIES, page)


@router.post("/auth/policies", status_code=201)
async def create_policy(ctx: Ctx, request: Request) -> Response:
    body = await json_body(request, Policy, POLICY_BODY_BYTES)
    await ctx.authorize(a.CREATE_POLICY, a.policy_resource(body.id))
    created = auth_api.CreatePolicyRequest(id=body.id, statements=to_silt(body))
    policy = await iam_call(ctx, ctx.backend.auth.CreatePolicy, created)
    return model_response(from_silt(policy), 201)


@router.get(POLICY)
async def get_policy(ctx: Ctx, policy_id: PolicyId) -> Response:
    await ctx.authorize(a.READ_POLICY, a.policy_resource(policy_id))
    found = await iam_call(ctx, ctx.backend.auth.GetPolicy, auth_api.GetPolicyRequest(id=policy_id))
    return JSONResponse(_marked(from_silt(found).to_dict(), SYSTEM_POLICIES))


@router.put(POLICY)
async def update_policy(ctx: Ctx, policy_id: PolicyId, request: Request) -> Response:
    body = await json_body(request, Policy, POLICY_BODY_BYTES)
    if body.id != policy_id:
        raise bad_request(f"the policy's id {body.id!r} differs from the path's {policy_id!r}")
    # Replacing a policy is deleting it and creating it again under the same attachments.
    for action in (a.CREATE_POLICY, a.DELETE_POLICY, a.ATTACH_POLICY):
        await ctx.authorize(action, a.policy_resource(policy_id))
    # lakeFS's Policy carries no description: an empty one tells auth to keep Silt's.
    updated = auth_api.UpdatePolicyRequest(id=policy_id, statements=to_silt(body))
    try:
        policy = await iam_call(ctx, ctx.backend.auth.UpdatePolicy, updated)
    except ApiError as exc:
        if exc.status == 400 and SILT_OWN_POLICY in exc.message:
            # Not a malformed request: the policy is Silt's own and stays as setup writes it.
            raise ApiError(409, exc.message) from None
        raise
    return model_response(from_silt(policy))


@router.delete(POLICY, status_code=204)
async def delete_policy(ctx: Ctx, policy_id: PolicyId) -> Response:
    await ctx.authorize(a.DELETE_POLICY, a.policy_resource(policy_id))
    await iam_call(ctx, ctx.backend.auth.DeletePolicy, auth_api.DeletePolicyRequest(id=policy_id))
    return no_content()
