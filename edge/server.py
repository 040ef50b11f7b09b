"""The edge process: `python -m edge.server [--config FILE]`, the gateway's port.

Composition root: the S3 gateway, and with api.enabled the REST API and the web UI, built here
and handed to silt/asgi.py's Dispatcher, which picks one per request (an AWS signature is S3,
otherwise /api/v1/... is the API and /ui/... the UI).

Server choice: a plain ASGI application (no framework) on uvicorn with uvloop and httptools:
the C HTTP parser and libuv loop keep per-request overhead low for small objects, and ASGI's
`receive`/`send` give the explicit back-pressure that lets bodies stream in bounded memory.
"""

from __future__ import annotations

import logging
import os
import sys

from services.api.app import create_app as api_app
from services.gateway.app import GatewayApp
from services.gateway.protocol import BoundedHttpToolsProtocol
from services.gateway.serving import configure_connection_limits, https_options
from services.ui.app import create_app as ui_app
from silt.asgi import ASGIApp, Dispatcher
from silt.collector import tune_for_serving
from silt.config import Config, load_config
from silt.http_server import serve_http
from silt.lifeline import PARENT_PID_ENV, watch_parent_from_env
from silt.logs import configure_logging
from silt.service import service_config
from silt.telemetry.setup import setup as setup_telemetry

log = logging.getLogger(__name__)


def serving_app(config: Config) -> ASGIApp:
    """The gateway, and with api.enabled the REST API and the web UI on the same port."""
    gateway = GatewayApp(config)
    if not config.api.enabled:
        return gateway
    if not config.api.credentials.access_key_id:
        # svc-gateway may not verify REST API credentials: every API call would answer 503.
        log.warning(
            "api.enabled without api.credentials: the REST API on this port signs as the gateway's "
            "own user; give it svc-api's key (SILT_API_CREDENTIALS_*), or set api.enabled false"
        )
    # The web UI is a client of the API on the same origin: it is served wherever the API is.
    return Dispatcher(gateway, api_app(config), ui_app(config))


def create_app() -> ASGIApp:
    """The app in a worker process; the configuration comes from the environment (SILT_CONFIG)."""
    # A worker must not outlive the process that supervises it, even a kill -9 of it. The
    # supervisor's pid comes from the environment, not getppid(): a worker still importing
    # when the supervisor died has been reparented, and would watch the wrong process.
    watch_parent_from_env(grace=5.0)
    config = load_config()
    configure_logging(config.logging, "gateway")
    configure_connection_limits(config.gateways.s3)
    # Each worker traces on its own and records metrics for the endpoint its parent serves.
    setup_telemetry(config, "gateway", metrics_in_worker=bool(config.gateways.s3.metrics_listen_address))
    app = serving_app(config)
    tune_for_serving()
    return app


def main(argv: list[str] | None = None) -> int:
    config = service_config("Silt's S3 gateway", argv, "gateway")
    configure_connection_limits(config.gateways.s3)
    workers = config.gateways.s3.workers
    if workers > 1:
        os.environ[PARENT_PID_ENV] = str(os.getpid())  # what each worker watches
    if workers == 1:
        app: ASGIApp | str = serving_app(config)
        tune_for_serving()
    else:
        # With several workers uvicorn imports the app in each process: a factory, by name.
        app = "edge.server:create_app"
    serve_http(
        app,
        config.gateways.s3.listen_address,
        factory=workers > 1,
        workers=workers,
        # Bounded heads, head timeout and connection cap, in every worker.
        http=BoundedHttpToolsProtocol,
        **https_options(config.gateways.s3),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
