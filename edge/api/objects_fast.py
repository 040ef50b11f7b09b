"""The REST API's hot object routes — getObject, its HEAD, uploadObject and listObjects —
answered before FastAPI's routing, for their plain form.

Why: for a 4 KiB object most of a request's time in the API was FastAPI's own (matching the
path against every route's pattern, solving the dependencies, validating the query parameters),
which left the API well behind the S3 gateway's raw ASGI answer to the same GET or PUT (and,
with the page's JSON written as text, a listing page behind ListObjectsV2's).

What does not change: the answer comes from the very route functions of routes/objects.py,
given the context the `Ctx` dependency builds (context.authenticate, then context.context) and
the same Starlette request; failures become responses through the app's own exception handlers
(error_responses.py). So authentication, the session cookie's cross-site check,
authorization, validation, limits, history events, headers and bodies are the route's. Only
the routing and the reading of query parameters are done here, and only in the plain case: a
request with any query parameter beyond those parsed below (presign=true, storageClass, a
boolean spelt other than true/false, an amount spelt other than as a plain number, a value
FastAPI would refuse, a repeated parameter) falls through to FastAPI, which answers it as
before — falling through is always safe. Telemetry (observe.py) wraps both.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from edge.api.context import authenticate, context
from edge.api.error_responses import error_response, unexpected
from edge.api.paging import MAX_TOKEN
from edge.api.routes import objects
from edge.core.asgi import API_PREFIX, ASGIApp, Receive, Scope, Send
from silt.paging import MAX_PAGE

Endpoint = Callable[..., Awaitable[Response]]
# A query parameter's value as the route's argument; ValueError leaves the request to FastAPI.
Parser = Callable[[str], Any]

_REPOSITORIES = API_PREFIX + "/repositories/"
# Amounts as the fast path takes them (-1, 0 or a plain decimal); FastAPI reads other
# spellings (+5, 05, " 5") and answers the ones out of range.
_AMOUNT = re.compile(r"-1|0|[1-9][0-9]{0,3}")


def _text(value: str) -> str:
    return value


def _boolean(*spellings: str) -> Parser:
    """A boolean spelt as listed; FastAPI reads other spellings (1, yes, on, ...) too."""

    def parse(value: str) -> bool:
        if value not in spellings:
            raise ValueError(value)
        return value == "true"

    return parse


def _token(value: str) -> str:
    """paging.py's After and Prefix and the Delimiter: FastAPI refuses a longer one."""
    if len(value) > MAX_TOKEN:
        raise ValueError(value)
    return value


def _amount(value: str) -> int:
    if _AMOUNT.fullmatch(value) is None or int(value) > MAX_PAGE:
        raise ValueError(value)
    return int(value)


_TRUE_OR_FALSE = _boolean("true", "false")
# presign=true is a redirect to the store (a presigned listing, URLs): FastAPI's.
_NOT_PRESIGNED = _boolean("false")
_GET = {"path": _text, "presign": _NOT_PRESIGNED}
_HEAD = {"path": _text}
_UPLOAD = {"path": _text, "force": _TRUE_OR_FALSE}
_LIST = {
    "prefix": _token,
    "after": _token,
    "amount": _amount,
    "delimiter": _token,
    "user_metadata": _TRUE_OR_FALSE,
    "presign": _NOT_PRESIGNED,
}


@dataclass(frozen=True)
class Plain:
    """A request this fast path answers: the route function and its arguments."""

    endpoint: Endpoint
    path_params: dict[str, str]
    arguments: dict[str, Any]


def _arguments(query_string: bytes, parsers: Mapping[str, Parser]) -> dict[str, Any] | None:
    """The query parameters named, each read by its parser, as the route's arguments (parsed
    from the query string as Starlette parses it); None when anything else is asked for."""
    arguments: dict[str, Any] = {}
    for name, value in QueryParams(query_string).multi_items():
        parse = parsers.get(name)
        if parse is None or name in arguments:
            return None
        try:
            arguments[name] = parse(value)
        except ValueError:
            return None
    return arguments


def plain_request(scope: Scope) -> Plain | None:
    """The fast path's answer for this request, or None to leave it to FastAPI. The paths are
    routes/objects.py's REF_OBJECTS (and its /ls) and BRANCH_OBJECTS; a segment is what
    FastAPI's `{name}` matches (non-empty, no `/`)."""
    path: str = scope["path"]
    if not path.startswith(_REPOSITORIES) or scope.get("root_path"):
        return None
    parts = path[len(_REPOSITORIES) :].split("/")
    if len(parts) not in (4, 5) or parts[3] != "objects" or not parts[0] or not parts[2]:
        return None
    method, kind, listing = scope["method"], parts[1], len(parts) == 5
    endpoint: Endpoint
    parsers: Mapping[str, Parser]
    if listing and (parts[4] != "ls" or kind != "refs" or method != "GET"):
        return None
    if listing:
        endpoint, parsers, names = objects.list_objects, _LIST, ("repository", "ref")
    elif kind == "refs" and method == "GET":
        endpoint, parsers, names = objects.get_object, _GET, ("repository", "ref")
    elif kind == "refs" and method == "HEAD":
        endpoint, parsers, names = objects.head_object, _HEAD, ("repository", "ref")
    elif kind == "branches" and method == "POST":
        endpoint, parsers, names = objects.upload_object, _UPLOAD, ("repository", "branch")
    else:
        return None
    arguments = _arguments(scope.get("query_string", b""), parsers)
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
