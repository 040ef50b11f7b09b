"""uvicorn's settings every HTTP front end of the edge is served with (edge/core/http_server.py)."""

from __future__ import annotations

import uvicorn

from edge.core.http_server import WORKER_HEALTHCHECK_SECONDS, http_settings


async def _app(scope: object, receive: object, send: object) -> None:
    pass


def test_a_slowly_starting_worker_is_not_killed_as_hung() -> None:
    # A new worker answers the supervisor's health check only after re-importing the server's
    # module, seconds on a loaded machine; uvicorn's own 5 s killed every worker in turn.
    config = uvicorn.Config(_app, **http_settings("127.0.0.1:0", []))
    assert config.timeout_worker_healthcheck == WORKER_HEALTHCHECK_SECONDS >= 30
