"""The REST API's hot object routes — getObject, its HEAD and uploadObject — answered before
FastAPI's routing, for their plain form.

Why: for a 4 KiB object most of a request's time in the API was FastAPI's own (matching the
path against every route's pattern, solving the dependencies, validating the query parameters),
which left the API well behind the S3 gateway's raw ASGI answer to the same GET or PUT.

What does not change: the answer comes from the very route functions of routes/objects.py,
given the context the `Ctx` dependency builds (context.authenticate, then context.context) and
the same Starlette request; failures become responses through the app's own exception handlers
(error_responses.py). So authentication, the session cookie's cross-site check,
authorization, validation, limits, history events, headers and bodies are the route's. Only
the routing and the reading of query parameters are done here, and only in the plain case: a
request with any query parameter beyond those parsed below (presign=true, storageClass, a
boolean spelt other than true/false, a repeated parameter) falls through to FastAPI, which
answers it as before — falling through is always safe. Telemetry (observe.py) wraps both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from services.api.context import authenticate, context
from services.api.error_responses import error_response, unexpected
from services.api.routes import objects
from silt.asgi import API_PREFIX, ASGIApp, Receive, Scope, Send

Endpoint = Callable[..., Awaitable[Response]]

_REPOSITORIES = API_PREFIX + "/repositories/"
# Booleans as the fast path takes them; FastAPI reads other spellings (1, yes, on, ...) too.
_TRUE_OR_FALSE = ("true", "false")
# presign=true is a redirect to the store: FastAPI's.
_NOT_PRESIGNED = ("false",)


@dataclass(frozen=True)
class Plain:
    """A request this fast path answers: the route function and its arguments."""

    endpoint: Endpoint
    path_params: dict[str, str]
    arguments: dict[str, Any]


def _arguments(query_string: bytes, booleans: Mapping[str, tuple[str, ...]]) -> dict[str, Any] | None:
    """`path` and the booleans named (each spelt as listed) as the route's arguments, parsed as
    Starlette parses them; None when anything else is asked for."""
    arguments: dict[str, Any] = {}
    for name, value in QueryParams(query_string).multi_items():
        if name in arguments:
            return None
        if name == "path":
            arguments[name] = value
        elif value in booleans.get(name, ()):
            arguments[name] = value == "true"
        else:
            return None
    return arguments


def plain_request(scope: Scope) -> Plain | None:
    """The fast path's answer for this request, or None to leave it to FastAPI. The paths are
    routes/objects.py's REF_OBJECTS and BRANCH_OBJECTS; a segment is what FastAPI's `{name}`
    matches (non-empty, no `/`)."""
    path: str = scope["path"]
    if not path.startswith(_REPOSITORIES) or scope.get("root_path"):
        return None
    parts = path[len(_REPOSITORIES) :].split("/")
    if len(parts) != 4 or parts[3] != "objects" or not parts[0] or not parts[2]:
        return None
    method, kind = scope["method"], parts[1]
    endpoint: Endpoint
    booleans: dict[str, tuple[str, ...]]
    if kind == "refs" and method == "GET":
        endpoint, booleans, names = objects.get_object, {"presign": _NOT_PRESIGNED}, ("repository", "ref")
    elif kind == "refs" and method == "HEAD":
        endpoint, booleans, names = objects.head_object, {}, ("repository", "ref")
    elif kind == "branches" and method == "POST":
        endpoint, booleans, names = objects.upload_object, {"force": _TRUE_OR_FALSE}, ("repository", "branch")
    else:
        return None
    arguments = _arguments(scope.get("query_string", b""), booleans)
    if arguments is None:
        return None
    return Plain(endpoint, {names[0]: parts[0], names[1]: parts[2]}, arguments)


class ObjectsFastPath:
    """ASGI middleware in front of the FastAPI app: answers plain_request's requests itself and
    passes everything else (and the lifespan) to the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        plain = plain_request(scope) if scope["type"] == "http" else None
        if plain is None:
            await self.app(scope, receive, send)
            return
        # What FastAPI's app and router would have put in the scope: the app (whose state holds
        # the backend), the route function (observe.py's operation label) and the path parameters.
        scope["app"] = self.app
        scope["endpoint"] = plain.endpoint
        scope["path_params"] = plain.path_params
        request = Request(scope, receive, send)
        try:
            ctx = await context(request, await authenticate(request))
            response = await plain.endpoint(ctx, request, **plain.path_params, **plain.arguments)
        except Exception as exc:
            response = await error_response(request, exc)
        try:
            await response(scope, receive, send)
        except Exception as exc:
            # A body that fails once under way: logged as the app logs it, then ended by observe.py.
            await unexpected(request, exc)
            raise
