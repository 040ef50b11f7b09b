"""The S3 gateway process: `python -m services.gateway.server [--config FILE]`.

Server choice: a plain ASGI application (no framework) on uvicorn with uvloop and httptools:
the C HTTP parser and libuv loop keep per-request overhead low for small objects, and ASGI's
`receive`/`send` give the explicit back-pressure that lets bodies stream in bounded memory.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from services.gateway import protocol, request
from services.gateway.app import GatewayApp
from services.gateway.protocol import BoundedHttpToolsProtocol
from silt.asgi import ASGIApp, Dispatcher, load_app
from silt.collector import tune_for_serving
from silt.config import Config, S3GatewayConfig, load_config
from silt.http_server import serve_http
from silt.lifeline import PARENT_PID_ENV, watch_parent_from_env
from silt.logs import configure_logging
from silt.service import service_config
from silt.telemetry.setup import setup as setup_telemetry

log = logging.getLogger(__name__)


def configure_connection_limits(s3: S3GatewayConfig) -> None:
    protocol.configure(
        protocol.ConnectionLimits(
            max_head_bytes=s3.max_header_bytes,
            max_header_bytes=s3.max_header_line_bytes,
            head_timeout_s=s3.header_timeout_seconds,
            max_connections=s3.max_connections,
            max_connections_per_client=s3.max_connections_per_client,
            idle_timeout_s=s3.idle_timeout_seconds,
        )
    )
    request.BODY_IDLE_TIMEOUT.seconds = s3.body_idle_timeout_seconds


def https_options(s3: S3GatewayConfig) -> dict[str, Any]:
    """uvicorn's TLS settings for gateways.s3.tls: server-side only, S3 clients present no
    certificate. Unreadable files end the process with one line, as other configuration errors."""
    tls = s3.tls
    if not tls.enabled:
        return {}
    assert tls.cert_file and tls.key_file  # the configuration requires them when enabled
    for key, path in (("cert_file", tls.cert_file), ("key_file", tls.key_file)):
        if not os.access(os.path.expanduser(path), os.R_OK):
            print(f"silt gateway: gateways.s3.tls.{key}: cannot read {path}", file=sys.stderr)
            raise SystemExit(2)
    return {"ssl_certfile": os.path.expanduser(tls.cert_file), "ssl_keyfile": os.path.expanduser(tls.key_file)}


def serving_app(config: Config) -> ASGIApp:
    """The gateway, and with api.enabled the REST API and the web UI on the same port
    (silt/asgi.py decides per request: an AWS signature is S3, otherwise /api/v1/... is the
    API and /ui/... the UI)."""
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
    return Dispatcher(gateway, load_app("api", config), load_app("ui", config))


def create_app() -> ASGIApp:
    """The app in a worker process; the configuration comes from the environment (SILT_CONFIG)."""
    # A worker must not outlive the gateway process that supervises it, even a kill -9 of it.
    # The supervisor's pid comes from the environment, not getppid(): a worker still importing
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
        app = "services.gateway.server:create_app"
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
