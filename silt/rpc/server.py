"""Building a gRPC server the same way for every service, so cross-cutting interceptors
(error mapping now, authentication later) apply to every handler without touching them."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1.health import HealthServicer

from silt.config import CONFIG_PATH_ENV, Config, load_config
from silt.errors import ConfigError, SiltError
from silt.lifeline import watch_parent_from_env
from silt.logs import configure_logging
from silt.rpc.errors import ErrorMappingInterceptor
from silt.rpc.health_port import HealthPort
from silt.rpc.interceptor import AuthInterceptor
from silt.rpc.limits import DEFAULT_LIMITS, AdmissionInterceptor, ServerLimits, health_check_handler
from silt.telemetry.rpc import SkipHealth, server_interceptors
from silt.telemetry.setup import setup as setup_telemetry

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
    port = server.add_insecure_port(address) if tls is None else server.add_secure_port(address, tls)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
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


# After its launcher died, a service gets this long to stop in order before it exits regardless.
SHUTDOWN_GRACE_SECONDS = 10.0


def service_config(description: str, argv: list[str] | None, service: str) -> Config:
    """Parse a service's command line, load and validate its configuration, set up logging.

    A bad configuration ends the process with one line naming the key (exit code 2).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", help="YAML configuration file (default: $SILT_CONFIG, then defaults)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"silt {service}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.config:
        # Worker processes the service starts read the same file.
        os.environ[CONFIG_PATH_ENV] = args.config
    configure_logging(config.logging, service)
    # Started by the launcher (silt run, tests): no service outlives it, even a kill -9 of it.
    watch_parent_from_env(grace=SHUTDOWN_GRACE_SECONDS)
    # Before any store or channel is opened: those opened later are instrumented.
    setup_telemetry(config, service, metrics_address(config, service))
    return config


def metrics_address(config: Config, service: str) -> str | None:
    """Where service serves /metrics (the *.metrics_listen_address keys), if anywhere."""
    if service == "gateway":
        return config.gateways.s3.metrics_listen_address
    section = getattr(config, service, None)
    return getattr(section, "metrics_listen_address", None)


def wait_for_shutdown(every: float | None = None, tick: Callable[[], None] | None = None) -> None:
    """Block until SIGTERM or SIGINT; call tick every `every` seconds meanwhile."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(every):
        if tick is not None:
            try:
                tick()
            except Exception:
                log.warning("periodic task failed; will retry", exc_info=True)


@contextlib.contextmanager
def startup_errors(service: str) -> Iterator[None]:
    """A store that cannot be reached at start-up ends the process with one line (exit code 3)."""
    try:
        yield
    except SiltError as exc:
        print(f"silt {service}: cannot start: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
