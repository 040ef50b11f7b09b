"""The REST API as an ASGI app: lakeFS's `/api/v1` routes over graveler and auth.

Shape (docs/design/api.md, "Shape"): each route is a small typed function; the caller,
the backend and `authorize` come in by dependency injection (context.py); errors are raised
as typed exceptions (errors.py) and become lakeFS's JSON `{"message": ...}` here, in one place.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from services.api.backend import Backend
from services.api.errors import ApiError, from_silt
from services.api.observe import Observed
from services.api.routes import (
    actions,
    branches,
    commits,
    data,
    diff_summary,
    events,
    iam,
    imports,
    objects,
    presigned,
    preview,
    pulls,
    refs,
    repositories,
    settings,
    setup,
    staging,
    tags,
)
from silt.asgi import API_PREFIX, ASGIApp
from silt.config import Config
from silt.edge_client import EntryReads
from silt.errors import SiltError

log = logging.getLogger(__name__)


def _message(status: int, message: str) -> JSONResponse:
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"message": message}, status_code=status, headers=headers)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    if exc.status >= 500:
        log.warning("%s %s: %d %s", request.method, request.url.path, exc.status, exc.message)
    return _message(exc.status, exc.message)


async def _silt_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SiltError)
    return await _api_error(request, from_silt(exc))


async def _invalid_parameters(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for error in exc.errors()[:5]:
        # loc is (where it came from, name...): the name of a parameter may itself be "path".
        where = ".".join(str(p) for p in tuple(error.get("loc", ()))[1:])
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return _message(400, "invalid parameters: " + "; ".join(parts))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    response = _message(exc.status_code, str(exc.detail))
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


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return _message(500, "internal error")


def create_app(config: Config, open_reads: Callable[[], EntryReads | None] | None = None) -> ASGIApp:
    """open_reads: what reads entries in this process, opened at start-up (edge/app.py composes
    graveler's reader); without it every read is a call to graveler."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.backend = Backend(config, reads=open_reads() if open_reads is not None else None)
        app.state.backend.history.start()
        try:
            yield
        finally:
            await app.state.backend.close()

    app = FastAPI(
        title="Silt: lakeFS REST API",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.config = config
    app.state.max_body_bytes = config.api.max_body_bytes
    app.state.feed_reauthorize_seconds = config.api.live_feed_reauthorize_seconds
    routers = (
        setup.router,
        repositories.router,
        settings.router,
        branches.router,
        commits.router,
        refs.router,
        diff_summary.router,
        tags.router,
        preview.router,
        data.router,
        objects.router,
        staging.router,
        imports.router,
        events.router,
        pulls.router,
        actions.router,
        iam.router,
    )
    for router in routers:
        app.include_router(router, prefix=API_PREFIX)
    # The local blockstore's presigned URLs: outside /api/v1, as a store's URLs are.
    app.include_router(presigned.router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(SiltError, _silt_error)
    app.add_exception_handler(RequestValidationError, _invalid_parameters)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    return Observed(app)
