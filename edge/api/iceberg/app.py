"""The catalog as an app of its own, mounted in the REST API's app at /iceberg/api: it shares the
API's backend and authentication, and answers errors in the Iceberg spec's model."""

from __future__ import annotations

from fastapi import FastAPI

from edge.api.iceberg.errors import HANDLERS
from edge.api.iceberg.routes import router

ICEBERG_PREFIX = "/iceberg/api"


def create_catalog_app() -> FastAPI:
    """The backend (app.state.backend) is set by the REST API's lifespan."""
    app = FastAPI(title="Silt: Iceberg REST catalog", openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(router)
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    return app
