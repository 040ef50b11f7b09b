"""A service process's life, the same for every service (gRPC or HTTP): its command line and
configuration, logging, the launcher's lifeline and telemetry, in that order; one line and an
exit code when it cannot start; serving until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from silt.config import CONFIG_PATH_ENV, Config, load_config
from silt.errors import ConfigError, SiltError
from silt.lifeline import watch_parent_from_env
from silt.logs import configure_logging
from silt.telemetry.setup import setup as setup_telemetry

log = logging.getLogger(__name__)

# After its launcher died, a service gets this long to stop in order before it exits regardless.
SHUTDOWN_GRACE_SECONDS = 10.0
# Calls (or requests) in flight when a service stops get this long to finish: well within
# SHUTDOWN_GRACE_SECONDS, even if a client keeps one open.
STOP_GRACE_SECONDS = 5.0


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


@contextlib.contextmanager
def startup_errors(service: str) -> Iterator[None]:
    """A store that cannot be reached at start-up ends the process with one line (exit code 3)."""
    try:
        yield
    except SiltError as exc:
        print(f"silt {service}: cannot start: {exc}", file=sys.stderr)
        raise SystemExit(3) from None


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
