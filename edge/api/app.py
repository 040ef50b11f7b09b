"""The REST API as an ASGI app: lakeFS's `/api/v1` routes over graveler and auth.

Shape (docs/design/api.md, "Shape"): each route is a small typed function; the caller,
the backend and `authorize` come in by dependency injection (context.py); errors are raised
as typed exceptions (errors.py) and become lakeFS's JSON `{"message": ...}` in one place
(error_responses.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI

from edge.api.backend import Backend
from edge.api.error_responses import HANDLERS
from edge.api.fast.objects import ObjectsFastPath
from edge.api.iceberg.app import RELATIVE_PREFIX, RelativeForm, create_catalog_app
from edge.api.observe import Observed
from edge.api.routes import (
    actions,
    branches,
    commits,
    data,
    diff_summary,
    events,
    external_principals,
    gc,
    iam,
    imports,
    metadata,
    not_served,
    objects,
    presigned,
    presigned_multipart,
    preview,
    pulls,
    refs,
    refs_dump,
    repositories,
    settings,
    setup,
    staging,
    statistics,
    symlinks,
    table_diff,
    tags,
)
from edge.core.asgi import API_PREFIX, ICEBERG_PREFIX, ASGIApp
from edge.core.client import EntryReads
from silt.config import Config


def create_app(
    config: Config, open_reads: Callable[[], EntryReads | None] | None = None, fast_paths: bool = True
) -> ASGIApp:
    """open_reads: what reads entries in this process, opened at start-up (edge/app.py composes
    graveler's reader); without it every read is a call to graveler. fast_paths: the hot object
    routes answered before FastAPI's routing (fast/objects.py); off, FastAPI answers everything."""

    # The Iceberg REST catalog (edge/api/iceberg), on the API's backend and credentials.
    catalog = create_catalog_app()
    catalog.state.commit_per_change = config.api.iceberg.commit_per_change

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.backend = Backend(config, reads=open_reads() if open_reads is not None else None)
        catalog.state.backend = app.state.backend
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
        gc.router,
        metadata.router,
        branches.router,
        commits.router,
        refs.router,
        refs_dump.router,
        diff_summary.router,
        table_diff.router,
        tags.router,
        preview.router,
        data.router,
        objects.router,
        staging.router,
        presigned_multipart.router,
        imports.router,
        events.router,
        pulls.router,
        actions.router,
        iam.router,
        external_principals.router,
        not_served.router,
        statistics.router,
        symlinks.router,
    )
    for router in routers:
        app.include_router(router, prefix=API_PREFIX)
    # The local blockstore's presigned URLs: outside /api/v1, as a store's URLs are.
    app.include_router(presigned.router)
    app.mount(ICEBERG_PREFIX, catalog)
    app.mount(RELATIVE_PREFIX.rstrip("/"), RelativeForm(catalog))
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    # Telemetry around both: the fast path's requests are observed as the app's are.
    return Observed(ObjectsFastPath(app) if fast_paths else app)
