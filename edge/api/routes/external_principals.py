"""External principals: identities of another provider (an AWS IAM role's ARN, an OIDC subject)
linked to a Silt user, each to one user at most, as lakeFS's `/auth/.../external/principals`.

They are stored by auth and served here; logging in with one is not (edge/api/not_served.py:
checking the identity needs its provider). Each route asks auth with the action auth's rules
name (services/auth/permissions.py) and makes the call for the caller (edge/api/iam/calls.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from lakefs_sdk.models import ExternalPrincipal, ExternalPrincipalCreation, ExternalPrincipalList

from edge.api.bodies import optional_json_body
from edge.api.context import Ctx
from edge.api.iam.calls import iam_call
from edge.api.iam.paging import id_page
from edge.api.paging import PrefixPageParams
from edge.api.responses import model_response, no_content
from edge.api.routes.iam import MAX_ID, authorize_about
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as pb

router = APIRouter()

# Auth's bounds (services/auth/principals.py): ids, and settings within a few tens of KiB.
MAX_PRINCIPAL_ID = 512
SETTINGS_BODY_BYTES = 64 * 1024

UserId = Annotated[str, Path(alias="userId", max_length=MAX_ID)]
PrincipalId = Annotated[str, Query(alias="principalId", min_length=1, max_length=MAX_PRINCIPAL_ID)]

USER_PRINCIPALS = "/auth/users/{userId}/external/principals"


def _shown(record: pb.ExternalPrincipal) -> ExternalPrincipal:
    settings = [dict(one.values) for one in record.settings]
    return ExternalPrincipal(id=record.id, user_id=record.user_id, settings=settings or None)


@router.post(USER_PRINCIPALS, status_code=201)
async def create_user_external_principal(
    ctx: Ctx, user_id: UserId, principal_id: PrincipalId, request: Request
) -> Response:
    await ctx.authorize(a.CREATE_USER_EXTERNAL_PRINCIPAL, a.user_resource(user_id))
    body = await optional_json_body(request, ExternalPrincipalCreation, SETTINGS_BODY_BYTES)
    settings = [pb.PrincipalSettings(values=one) for one in body.settings or []]
    created = auth_api.CreateUserExternalPrincipalRequest(user_id=user_id, principal_id=principal_id, settings=settings)
    await iam_call(ctx, ctx.backend.auth.CreateUserExternalPrincipal, created)
    return Response(status_code=201)


@router.delete(USER_PRINCIPALS, status_code=204)
async def delete_user_external_principal(ctx: Ctx, user_id: UserId, principal_id: PrincipalId) -> Response:
    await ctx.authorize(a.DELETE_USER_EXTERNAL_PRINCIPAL, a.user_resource(user_id))
    deleted = auth_api.DeleteUserExternalPrincipalRequest(user_id=user_id, principal_id=principal_id)
    await iam_call(ctx, ctx.backend.auth.DeleteUserExternalPrincipal, deleted)
    return no_content()


@router.get(USER_PRINCIPALS + "/ls")
async def list_user_external_principals(ctx: Ctx, user_id: UserId, page: PrefixPageParams) -> Response:
    await authorize_about(ctx, a.READ_USER, user_id)
    request = auth_api.ListUserExternalPrincipalsRequest(user_id=user_id)

    async def fetch(cursor: str, want: int) -> tuple[Any, bool]:
        request.after, request.amount = cursor, want  # one call at a time: the request is reused
        reply = await iam_call(ctx, ctx.backend.auth.ListUserExternalPrincipals, request)
        return reply.principals, reply.has_more

    found, paging = await id_page(fetch, lambda p: str(p.id), page.prefix, page.after, page.amount)
    return model_response(ExternalPrincipalList(pagination=paging, results=[_shown(p) for p in found]))


@router.get("/auth/external/principals")
async def get_external_principal(ctx: Ctx, principal_id: PrincipalId) -> Response:
    await ctx.authorize(a.READ_EXTERNAL_PRINCIPAL, a.external_principal_resource(principal_id))
    request = auth_api.GetExternalPrincipalRequest(principal_id=principal_id)
    found = await iam_call(ctx, ctx.backend.auth.GetExternalPrincipal, request)
    return model_response(_shown(found))
