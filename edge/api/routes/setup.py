"""Setup and identity: health, configuration, first-run setup, the current user, login and logout.

First-run setup (lakeFS's /setup_lakefs) creates the admin user through auth's SetupAdmin, once:
only an installation whose auth setup left the admin to it (`services.auth.setup --defer-admin`)
is ever "not_initialized"; every other is set up before the API starts (docs/getting-started.md).
A setup that auth could not finish (it stopped between claiming the admin and issuing its key)
leaves the state "not_initialized", and setting up again once the claim is abandoned (60 s)
finishes it (services/auth/model.py create_first_admin).
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import (
    AuthenticationToken,
    CommPrefsInput,
    CredentialsWithSecret,
    CurrentUser,
    GarbageCollectionConfig,
    LoginInformation,
    Setup,
    SetupState,
    StorageConfig,
    User,
    VersionConfig,
)
from lakefs_sdk.models import Config as LakeFSConfig

from edge.api.backend import Caller
from edge.api.bodies import SMALL_BODY_BYTES, json_body
from edge.api.context import SESSION_COOKIE, Context, Ctx, authenticate, backend_of, refuse_cross_site
from edge.api.errors import ApiError, bad_request
from edge.api.iam.calls import iam_call
from edge.api.objects.presign import presign_settings, presigned_multipart_offered
from edge.api.responses import model_response
from edge.api.session_cookie import drop_session_cookie, set_session_cookie
from silt import __version__ as silt_version
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as auth_pb
from silt.gc_grace import DEFAULT_GRACE_SECONDS
from silt.iam_actions import CREATE_REPO, READ_USER, USERS
from silt.paging import MAX_PAGE
from silt.wildcards import compile_pattern

router = APIRouter()

# The lakeFS API version whose behaviour this API implements: the lakefs-sdk it is tested
# with. Clients gate features on it, so it is lakeFS's number, not Silt's (version_context).
LAKEFS_API_VERSION = "1.88.0"

_NAMESPACE_EXAMPLES = {
    "local": "local://example-repo",
    "s3": "s3://example-bucket/example-repo",
    "gs": "gs://example-bucket/example-repo",
    "azure": "https://example-account.blob.core.windows.net/example-container/example-repo",
}
# What a namespace of each blockstore starts with (lakeFS's blockstore_namespace_ValidityRegex).
_NAMESPACE_PATTERNS = {"azure": "^https?://"}


@router.get("/healthcheck", status_code=204)
async def health_check() -> Response:
    return Response(status_code=204)


def storage_config(request: Request) -> StorageConfig:
    config = request.app.state.config
    blockstore = config.blockstore.type
    roots = config.graveler.allowed_namespace_roots
    presigned = presign_settings(config)
    if roots is None:
        roots = ["local://"] if blockstore == "local" else []
    return StorageConfig(
        blockstore_type=blockstore,
        blockstore_namespace_example=_NAMESPACE_EXAMPLES.get(blockstore, f"{blockstore}://example"),
        blockstore_namespace_ValidityRegex=_NAMESPACE_PATTERNS.get(blockstore, f"^{blockstore}://"),
        default_namespace_prefix=roots[0] if roots else None,
        pre_sign_support=not presigned.disable_pre_signed,
        pre_sign_support_ui=not (presigned.disable_pre_signed or presigned.disable_pre_signed_ui),
        import_support=blockstore != "local" or config.blockstore.local.import_enabled,
        import_validity_regex=_NAMESPACE_PATTERNS.get(blockstore, f"^{blockstore}://"),
        pre_sign_multipart_upload=presigned_multipart_offered(config),
    )


def version_config() -> VersionConfig:
    # No latest_version or upgrade_recommended: Silt never asks anyone what the latest release is.
    return VersionConfig(version=LAKEFS_API_VERSION, version_context=f"silt {silt_version}")


@router.get("/config")
async def get_config(request: Request, caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    storage = storage_config(request)
    return model_response(
        LakeFSConfig(version_config=version_config(), storage_config=storage, storage_config_list=[storage])
    )


@router.get("/config/version")
async def get_lakefs_version(caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    return model_response(version_config())


@router.get("/config/storage")
async def get_storage_config(request: Request, caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    return model_response(storage_config(request))


@router.get("/config/garbage-collection")
async def get_garbage_collection_config(caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    # The grace period a GC run keeps recent objects for unless told otherwise (silt/gc_grace.py):
    # lakeFS answers its link-address lifetime, which Silt's default grace exceeds by a margin.
    return model_response(GarbageCollectionConfig(grace_period=DEFAULT_GRACE_SECONDS))


# --- first-run setup (lakeFS's setup wizard) --------------------------------------------------

ALREADY_INITIALIZED = "lakeFS already initialized"
NOT_INITIALIZED = "lakeFS is not initialized"
COMM_PREFS_SET = "communication preferences already set"
# How long a setup refused by auth waits for the setup it lost to to be done (_initialized_soon).
SETUP_SETTLE_SECONDS = 1.0
# Silt's login: its own access keys (Basic) and login sessions in lakeFS's cookie, with full
# RBAC policies managed through this API (lakeFS's "internal"). The swagger's LoginConfig, whose
# required fields the lakefs-sdk's trimmed model leaves out, so written as the swagger has it.
_LOGIN_CONFIG = {
    "RBAC": "internal",
    "login_url": "",
    "login_url_method": "none",
    "login_failed_message": "The credentials don't match.",
    "login_cookie_names": [SESSION_COOKIE],
    "logout_url": "",
}


async def _initialized(request: Request) -> bool:
    # Setup happens once and is never undone: once seen done, asking auth again tells nothing new.
    if getattr(request.app.state, "setup_initialized", False):
        return True
    initialized = await backend_of(request).setup_initialized()
    if initialized:
        request.app.state.setup_initialized = True
    return initialized


async def _initialized_soon(request: Request) -> bool:
    """Whether setup is done, or gets done within SETUP_SETTLE_SECONDS: a setup that lost to
    another still under way (auth's claim of the first admin is written before its key is
    issued) answers as one that lost to a setup done, once the winner is done, in milliseconds.
    A claim that stays unfinished is a setup that died: not initialized, and a retry once it is
    abandoned finishes it."""
    deadline = time.monotonic() + SETUP_SETTLE_SECONDS
    while not await _initialized(request):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@router.get("/setup_lakefs")
async def get_setup_state(request: Request) -> Response:
    # Public, as in lakeFS: the UI asks before anyone can log in. comm_prefs_missing is always
    # false: Silt has nowhere to send communication preferences (lakeFS with its email
    # subscription disabled answers the same).
    state = SetupState(
        state="initialized" if await _initialized(request) else "not_initialized", comm_prefs_missing=False
    )
    return JSONResponse({**state.to_dict(), "login_config": _LOGIN_CONFIG})


@router.post("/setup_lakefs")
async def setup(request: Request) -> Response:
    # Anyone may send this before setup, as in lakeFS: the body is kept small, and auth lets
    # exactly one call ever create an admin (services/auth/model.py: create_first_admin).
    body = await json_body(request, Setup, SMALL_BODY_BYTES)
    if not body.username:
        raise bad_request("empty user display name")
    if await _initialized(request):
        raise ApiError(409, ALREADY_INITIALIZED)
    if body.key is not None:
        raise bad_request(
            "Silt issues the admin's access key itself: send Setup without `key` and store the key in the answer"
        )
    try:
        reply = await backend_of(request).setup_admin(body.username)
    except ApiError as exc:
        # Lost a race to another setup, or the user id is taken: which one, auth's state says.
        if exc.status == 409 and await _initialized_soon(request):
            raise ApiError(409, ALREADY_INITIALIZED) from None
        raise
    request.app.state.setup_initialized = True
    credentials = CredentialsWithSecret(
        access_key_id=reply.credential.access_key_id,
        secret_access_key=reply.secret_access_key,
        creation_date=reply.credential.creation_date.seconds,
    )
    # The only time the secret is shown: never cached by anything in between.
    return JSONResponse(credentials.to_dict(), headers={"Cache-Control": "no-store"})


@router.post("/setup_comm_prefs")
async def setup_comm_prefs(request: Request) -> Response:
    # Public, as in lakeFS. Silt sends no email and phones nowhere home, so there are never
    # preferences missing to collect: lakeFS with its email subscription disabled answers 412
    # before setup and 409 after, and so does this, storing nothing.
    await json_body(request, CommPrefsInput, SMALL_BODY_BYTES)
    if not await _initialized(request):
        raise ApiError(412, NOT_INITIALIZED)
    raise ApiError(409, COMM_PREFS_SET)


@router.get("/auth/capabilities")
async def get_auth_capabilities() -> Response:
    # Public, as in lakeFS. Silt sends no email: it can neither invite a user nor reset a
    # password (an administrator issues keys: POST /auth/users/{id}/credentials).
    return JSONResponse({"invite_user": False, "forgot_password": False})


@router.get("/user")
async def get_current_user(caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    return model_response(
        CurrentUser(user=User(id=caller.user_id, creation_date=caller.creation_date, friendly_name=None, email=None))
    )


# Effective policies read to find where the caller may create repositories, at most.
MAX_POLICY_PAGES = 10


async def _may_create_a_repository(ctx: Context) -> bool:
    """Whether some repository name is one the caller may create. Every name is a question to
    auth like any other: `*` (a policy on every name), then each resource pattern of the
    caller's own Allow statements naming CreateRepo, asked as a name (the pattern `team-*`
    matches the name "team-*"), so auth's Denies and conditions decide as they would."""
    user, ip = ctx.caller.user_id, ctx.source_ip
    if await ctx.backend.allowed(user, CREATE_REPO, "*", ip):
        return True
    candidates: list[str] = []
    after = ""
    for _ in range(MAX_POLICY_PAGES):
        listed = auth_api.ListUserPoliciesRequest(user_id=user, effective=True, after=after, amount=MAX_PAGE)
        reply = await iam_call(ctx, ctx.backend.auth.ListUserPolicies, listed)
        for policy in reply.policies:
            for statement in policy.statements:
                if statement.effect == auth_pb.EFFECT_ALLOW and any(
                    compile_pattern(action)(CREATE_REPO) for action in statement.actions
                ):
                    candidates.extend(statement.resources)
        if not reply.has_more or not reply.policies:
            break
        after = reply.policies[-1].id
    names = sorted(set(candidates))[:MAX_PAGE]
    return any(await ctx.backend.allowed_many(user, CREATE_REPO, names, ip))


@router.get("/user/permissions")
async def get_current_user_permissions(ctx: Ctx) -> Response:
    """Silt's own: what the caller may do that changes what a client offers them: create a
    repository (the web UI's first-run offer) and administer users (its Administration pages,
    whose first page lists users). About the caller only, so anyone signed in may ask."""
    administer = await ctx.backend.allowed(ctx.caller.user_id, READ_USER, USERS, ctx.source_ip)
    return JSONResponse({"create_repository": await _may_create_a_repository(ctx), "administer": administer})


@router.post("/auth/login")
async def login(request: Request) -> Response:
    # Anyone may send this: the body is kept to what a key id and secret need.
    body = await json_body(request, LoginInformation, SMALL_BODY_BYTES)
    _, token, expires = await backend_of(request).create_session(body.access_key_id, body.secret_access_key)
    response = model_response(AuthenticationToken(token=token, token_expiration=expires))
    set_session_cookie(request, response, token, expires)
    return response


@router.post("/auth/logout", status_code=204)
async def logout(request: Request) -> Response:
    # Tokens are stateless (services/auth/sessions.py): logging out drops the cookie, with the
    # attributes it was set with (ending every session is DELETE /auth/users/{id}/sessions).
    # Dropping it is a change a foreign page must not force on the user, so a request carrying
    # the cookie passes the same-origin check; one without has nothing to drop.
    if SESSION_COOKIE in request.cookies:
        refuse_cross_site(request)
    response = Response(status_code=204)
    drop_session_cookie(request, response)
    return response
