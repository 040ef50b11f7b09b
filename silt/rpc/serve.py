"""Serving a gRPC service's process until it is stopped, the same way for every service: the
server, its health (silt/telemetry/health.py) and the plaintext health port up, one line when
listening, then after SIGTERM or SIGINT everything down in order."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1.health import HealthServicer

from silt.collector import tune_for_serving
from silt.config import Config
from silt.rpc.server import start_health_port
from silt.service import STOP_GRACE_SECONDS, wait_for_shutdown
from silt.telemetry.health import HealthMonitor, Probe

log = logging.getLogger(__name__)

# Starts the service's server with a health servicer to answer probes; returns it and its port.
Starter = Callable[[HealthServicer], tuple[grpc.Server, int]]


def serve(
    service: str,
    start: Starter,
    *,
    config: Config,
    grpc_service: ServiceDescriptor,
    probes: Mapping[str, Probe],
    health_address: str | None,
    tls: bool,
    every: float | None = None,
    tick: Callable[[], None] | None = None,
    close: Sequence[Callable[[], None]] = (),
) -> None:
    """Serve until SIGTERM or SIGINT, calling tick every `every` seconds meanwhile.

    grpc_service is SERVING while every probe answers (at config.telemetry's pace); health_address,
    if set, answers health checks in plaintext. On the way down health turns NOT_SERVING first
    (balancers stop sending), calls in flight get STOP_GRACE_SECONDS, then the health port
    stops and close runs in order (what the server's handlers used last).
    """
    monitor = HealthMonitor(
        [grpc_service.full_name],
        probes,
        config.telemetry.health_check_interval_seconds,
        config.telemetry.health_check_timeout_seconds,
    )
    tune_for_serving()  # before the first request: what is built from here on is collected as usual
    server, port = start(monitor.servicer)
    health_port = start_health_port(health_address, monitor.servicer)
    monitor.start()
    log.info("%s listening on port %d%s", service, port, " (TLS)" if tls else "")
    wait_for_shutdown(every, tick)
    monitor.stop()
    server.stop(grace=STOP_GRACE_SECONDS).wait()
    if health_port is not None:
        health_port.stop(None)
    for step in close:
        step()
