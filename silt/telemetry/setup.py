"""Turning telemetry on for one process, from its configuration and the OTEL_* environment."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the `silt` CLI asks tracing_enabled() without importing pydantic
    from silt.config import Config

log = logging.getLogger(__name__)

# prometheus_client's own switch to multiprocess mode: set, every process records its
# metrics in files there, and one endpoint adds them up.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"

_state = {"tracing": False, "metrics": False, "storage_spans": False}


def setup(config: Config, service: str, metrics_address: str | None = None, *, metrics_in_worker: bool = False) -> None:
    """Start tracing (if telemetry.tracing) and the /metrics endpoint (if metrics_address).

    A process that starts workers sharing one endpoint (the gateway with several uvicorn
    workers) calls prepare_multiprocess_metrics() first; the workers pass metrics_in_worker.
    """
    # Imported here: processes that never call setup (the CLI) never load the SDKs.
    from silt.telemetry import tracing

    if config.telemetry.tracing and tracing.configure(service):
        _state["tracing"] = True
        _state["storage_spans"] = config.telemetry.trace_storage_calls
    if metrics_in_worker and os.environ.get(MULTIPROCESS_ENV):
        _state["metrics"] = True
    if metrics_address:
        if service == "gateway" and config.gateways.s3.workers > 1:
            prepare_multiprocess_metrics()
        from silt.telemetry import metrics

        port = metrics.serve(metrics_address, os.environ.get(MULTIPROCESS_ENV))
        _state["metrics"] = True
        log.info("%s serves Prometheus metrics on port %d (/metrics)", service, port)


def prepare_multiprocess_metrics() -> None:
    """Before anything imports prometheus_client: workers started from now on write their
    metrics where this process's endpoint reads them."""
    if os.environ.get(MULTIPROCESS_ENV):
        return
    directory = tempfile.mkdtemp(prefix="silt-metrics-")
    os.environ[MULTIPROCESS_ENV] = directory
    atexit.register(shutil.rmtree, directory, True)


def tracing_enabled() -> bool:
    return _state["tracing"]


def metrics_enabled() -> bool:
    return _state["metrics"]


def storage_spans_enabled() -> bool:
    """A span per KV and object-store call as well (telemetry.trace_storage_calls)."""
    return _state["storage_spans"]
