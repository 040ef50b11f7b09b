"""The one place exceptions become lakeFS's JSON errors (`{"message": ...}`): registered as the
FastAPI app's exception handlers (app.py) and used as they are by the object fast path
(fast/objects.py), so both answer every failure alike."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Match

from edge.api.errors import ApiError, from_silt
from silt.errors import SiltError

log = logging.getLogger("edge.api.app")

Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]


def message_response(status: int, message: str, extra: dict[str, Any] | None = None) -> JSONResponse:
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"message": message, **(extra or {})}, status_code=status, headers=headers)


async def api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    if exc.status >= 500:
        log.warning("%s %s: %d %s", request.method, request.url.path, exc.status, exc.message)
    return message_response(exc.status, exc.message, exc.extra)


async def silt_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SiltError)
    return await api_error(request, from_silt(exc))


async def invalid_parameters(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for error in exc.errors()[:5]:
        # loc is (where it came from, name...): the name of a parameter may itself be "path".
        where = ".".join(str(p) for p in tuple(error.get("loc", ()))[1:])
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return message_response(400, "invalid parameters: " + "; ".join(parts))


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    response = message_response(exc.status_code, str(exc.detail))
    if exc.headers:
        response.headers.update(exc.headers)
    if exc.status_code == 405:
        # Starlette names only the first route matching the path; each method is its own route.
        response.headers["Allow"] = ", ".join(_allowed_methods(request))
    return response


_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> list[str]:
    """The methods some route takes at this path: asked of the router itself, method by method,
    so that included routers (however FastAPI wraps them) answer too."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)
    ]


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return message_response(500, "internal error")


HANDLERS: dict[type[Exception], Handler] = {
    ApiError: api_error,
    SiltError: silt_error,
    RequestValidationError: invalid_parameters,
    HTTPException: http_error,
    Exception: unexpected,
}


async def error_response(request: Request, exc: Exception) -> JSONResponse:
    """What the app's handlers answer for exc: the handler of its nearest class, as Starlette
    looks one up."""
    for kind in type(exc).__mro__:
        handler = HANDLERS.get(kind)
        if handler is not None:
            return await handler(request, exc)
    raise exc  # a BaseException that is not an Exception: not ours to answer
