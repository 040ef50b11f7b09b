"""What the edge process serves: the S3 gateway, and with api.enabled the REST API and the web
UI, built here and handed to edge/core/asgi.py's Dispatcher, which picks one per request (an AWS
signature is S3, otherwise /api/v1/... is the API and /ui/... the UI).

Here too the gateway gets graveler's reader (engine/reads.py), so that it answers
HEAD, GET and LIST without a call to graveler (gateways.s3.direct_reads).

Apart from edge/server.py because building them imports most of Silt (the API's models alone
take a second): the supervisor of several workers binds the port and starts them without it.
"""

from __future__ import annotations

import logging
import threading

from edge.api.app import create_app as api_app
from edge.core.asgi import ASGIApp, Dispatcher
from edge.core.client import EntryReads
from edge.gateway.app import GatewayApp
from edge.gateway.serving import configure_connection_limits
from edge.ui.app import create_app as ui_app
from engine.open import open_engine
from engine.reads import ReadEngine
from silt.collector import tune_for_serving
from silt.config import Config, load_config
from silt.graveler.v1 import graveler_pb2 as api
from silt.logs import configure_logging
from silt.telemetry.setup import setup as setup_telemetry

log = logging.getLogger(__name__)


class SharedReads:
    """One reader of graveler's entries for the front ends of this process (one range cache, one
    set of KV connections): opened by the first to start, closed by the last to stop."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._engine: ReadEngine | None = None
        self._users = 0
        self._lock = threading.Lock()

    def open(self) -> EntryReads | None:
        with self._lock:
            if self._users == 0:
                self._engine = open_engine(self._config, "reader")
            self._users += 1
            return None if self._engine is None else self

    def StatEntry(self, request: api.StatEntryRequest, *, timeout: float, wait: bool = True) -> api.EntryInfo:
        assert self._engine is not None
        return self._engine.StatEntry(request, timeout=timeout, wait=wait)

    def ListEntries(self, request: api.ListEntriesRequest, *, timeout: float) -> api.ListEntriesResponse:
        assert self._engine is not None
        return self._engine.ListEntries(request, timeout=timeout)

    def GetNeutralEntry(self, request: api.GetNeutralEntryRequest, *, timeout: float) -> api.EntryInfo:
        assert self._engine is not None
        return self._engine.GetNeutralEntry(request, timeout=timeout)

    def close(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._engine is not None:
                self._engine.close()
                self._engine = None


def serving_app(config: Config) -> ASGIApp:
    """The gateway, and with api.enabled the REST API and the web UI on the same port."""
    reads = SharedReads(config)
    gateway = GatewayApp(config, reads.open)
    if not config.api.enabled:
        return gateway
    if not config.api.credentials.access_key_id:
        # svc-gateway may not verify REST API credentials: every API call would answer 503.
        log.warning(
            "api.enabled without api.credentials: the REST API on this port signs as the gateway's "
            "own user; give it svc-api's key (SILT_API_CREDENTIALS_*), or set api.enabled false"
        )
    # The web UI is a client of the API on the same origin: it is served wherever the API is.
    return Dispatcher(gateway, api_app(config, reads.open), ui_app(config))


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
