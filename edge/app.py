"""What the edge process serves: the S3 gateway, and with api.enabled the REST API and the web
UI, built here and handed to silt/asgi.py's Dispatcher, which picks one per request (an AWS
signature is S3, otherwise /api/v1/... is the API and /ui/... the UI).

Apart from edge/server.py because building them imports most of Silt (the API's models alone
take a second): the supervisor of several workers binds the port and starts them without it.
"""

from __future__ import annotations

import logging

from services.api.app import create_app as api_app
from services.gateway.app import GatewayApp
from services.gateway.serving import configure_connection_limits
from services.ui.app import create_app as ui_app
from silt.asgi import ASGIApp, Dispatcher
from silt.collector import tune_for_serving
from silt.config import Config, load_config
from silt.logs import configure_logging
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


def worker_app() -> ASGIApp:
    """The app in a worker process; the configuration comes from the environment (SILT_CONFIG)."""
    config = load_config()
    configure_logging(config.logging, "gateway")
    configure_connection_limits(config.gateways.s3)
    # Each worker traces on its own and records metrics for the endpoint its parent serves.
    setup_telemetry(config, "gateway", metrics_in_worker=bool(config.gateways.s3.metrics_listen_address))
    app = serving_app(config)
    tune_for_serving()
    return app
