"""Setup and identity: health, configuration, the current user, login and logout."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from lakefs_sdk.models import AuthenticationToken, CurrentUser, LoginInformation, StorageConfig, User, VersionConfig
from lakefs_sdk.models import Config as LakeFSConfig

from edge.api.backend import Caller
from edge.api.bodies import SMALL_BODY_BYTES, json_body
from edge.api.context import SESSION_COOKIE, authenticate, backend_of, refuse_cross_site
from edge.api.objects.presign import presign_settings, presigned_multipart_offered
from edge.api.responses import model_response
from edge.api.session_cookie import drop_session_cookie, set_session_cookie
from silt import __version__ as silt_version

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


@router.get("/config")
async def get_config(request: Request, caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    storage = storage_config(request)
    version = VersionConfig(version=LAKEFS_API_VERSION, version_context=f"silt {silt_version}")
    return model_response(LakeFSConfig(version_config=version, storage_config=storage, storage_config_list=[storage]))


@router.get("/user")
async def get_current_user(caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    return model_response(
        CurrentUser(user=User(id=caller.user_id, creation_date=caller.creation_date, friendly_name=None, email=None))
    )


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
