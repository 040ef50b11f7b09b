"""Building a gRPC server the same way for every service, so cross-cutting interceptors
(error mapping now, authentication later) apply to every handler without touching them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1.health import HealthServicer

from silt.rpc.errors import ErrorMappingInterceptor
from silt.rpc.health_port import HealthPort
from silt.rpc.interceptor import AuthInterceptor
from silt.rpc.limits import DEFAULT_LIMITS, AdmissionInterceptor, ServerLimits, health_check_handler
from silt.telemetry.rpc import SkipHealth, server_interceptors

log = logging.getLogger(__name__)


def build_server(
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    health: HealthServicer | None = None,
    limits: ServerLimits = DEFAULT_LIMITS,
) -> grpc.Server:
    """A server whose calls pass admission (silt/rpc/limits.py), telemetry (span, request id,
    metrics), then interceptors, within limits.

    health: served as grpc.health.v1.Health, Check only, around which no interceptor runs but
    admission: probes cannot sign calls, and the service reveals only SERVING or NOT_SERVING.
    """
    # A server that authenticates calls refuses those whose signature headers cannot be valid
    # before waiting for their request.
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)
    admission = AdmissionInterceptor(limits, auth.check_headers if auth is not None else None)
    # Error mapping is innermost so other interceptors see handlers that never raise SiltError.
    inner = [*server_interceptors(), *interceptors, ErrorMappingInterceptor()]
    server = grpc.server(
        ThreadPoolExecutor(max_workers=limits.max_workers, thread_name_prefix="grpc"),
        interceptors=[admission, *(SkipHealth(i) for i in inner)],
        options=limits.options(),
        maximum_concurrent_rpcs=limits.max_concurrent_rpcs,
    )
    if health is not None:
        server.add_generic_rpc_handlers([health_check_handler(health.Check)])
    return server


def bind(server: grpc.Server, address: str, tls: grpc.ServerCredentials | None = None) -> int:
    """Listen on address (host:port; port 0 picks a free one), over TLS when tls is given;
    return the port."""
    try:
        port = server.add_insecure_port(address) if tls is None else server.add_secure_port(address, tls)
    except RuntimeError:  # newer gRPC raises where older returned 0
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {address}: the address is in use or not this host's")
    return port


def start_health_port(address: str | None, health: HealthServicer) -> HealthPort | None:
    """A plaintext server on address answering grpc.health.v1.Health/Check only (for probes
    that cannot speak TLS, as Kubernetes' gRPC probe); None when address is unset. It runs on
    grpc.aio (silt/rpc/health_port.py): calls waiting for their request hold no thread."""
    if not address:
        return None
    server = HealthPort(health)
    port = server.start(address)
    log.info("health checks on port %d", port)
    return server
