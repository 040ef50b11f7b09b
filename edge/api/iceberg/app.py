"""The catalog as an app of its own, mounted in the REST API's app at /iceberg/api: it shares the
API's backend and authentication, and answers errors in the Iceberg spec's model. Also lakeFS's
relative form of its paths (RelativeForm, mounted beside it)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from edge.api.context import authenticate
from edge.api.iceberg.errors import HANDLERS
from edge.api.iceberg.routes import router
from edge.api.iceberg.signed import SIGNED_PATH, authenticate_catalog
from edge.api.iceberg.views import router as view_router

# lakeFS's relative form: `/iceberg/relative_to/<repository>.<ref>/api` as the catalog's URI
# makes namespaces relative to that ref, as the warehouse prefix does.
from edge.core.asgi import ICEBERG_PREFIX
from edge.core.asgi import ICEBERG_RELATIVE_PREFIX as RELATIVE_PREFIX

# Routes the spec serves without its {prefix}.
_UNPREFIXED = ("config", "oauth/tokens")


def create_catalog_app() -> FastAPI:
    """The backend (app.state.backend) is set by the REST API's lifespan."""
    app = FastAPI(title="Silt: Iceberg REST catalog", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(router)
    app.include_router(view_router)
    # SigV4-signed requests besides the REST API's credentials, in the catalog only.
    app.dependency_overrides[authenticate] = authenticate_catalog
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    return app


def relative_path(path: str) -> str | None:
    """The catalog path a relative-form path stands for (`.../relative_to/<r>.<ref>/api/v1/x`
    is `/iceberg/api/v1/<r>.<ref>/x`); None for a path of another form."""
    if not path.startswith(RELATIVE_PREFIX):
        return None
    fixed, sep, rest = path[len(RELATIVE_PREFIX) :].partition("/api/v1/")
    if not sep or not fixed or "/" in fixed:
        return None
    if rest in _UNPREFIXED:
        return f"{ICEBERG_PREFIX}/v1/{rest}"
    return f"{ICEBERG_PREFIX}/v1/{fixed}/{rest}"


class RelativeForm:
    """lakeFS's relative form of the catalog's paths, mounted at its prefix in the REST API's app:
    each request is handed to the catalog at the prefix form's path. A mount, not a middleware
    around the app: the object fast path serves only an app without middleware."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            rewritten = relative_path(scope.get("path", ""))
            if rewritten is None:
                rewritten = f"{ICEBERG_PREFIX}/v1/not-a-relative-form"  # the catalog's own 404
            # The mount made its prefix the root path; the catalog is mounted at the prefix form's.
            root = scope.get("root_path", "").removesuffix(RELATIVE_PREFIX.rstrip("/"))
            scope = {
                **scope,
                "path": rewritten,
                "raw_path": rewritten.encode(),
                "root_path": root + ICEBERG_PREFIX,
                # A SigV4 signature covers the path the client sent (signed.py).
                SIGNED_PATH: scope.get("raw_path") or scope.get("path", "").encode(),
            }
        await self.catalog(scope, receive, send)
