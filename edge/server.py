"""The edge process: `python -m edge.server [--config FILE]`, the gateway's port.

Server choice: a plain ASGI application (no framework) on uvicorn with uvloop and httptools:
the C HTTP parser and libuv loop keep per-request overhead low for small objects, and ASGI's
`receive`/`send` give the explicit back-pressure that lets bodies stream in bounded memory.

With several workers this process only binds the port and supervises them; each worker builds
the app (edge/app.py). It does not import the app itself, which takes seconds of CPU: on a
busy node that delayed the port's opening by as much as a minute.
"""

from __future__ import annotations

import os
import sys

from edge.api.sdk_models import load_models_alone
from edge.core.asgi import ASGIApp
from edge.core.http_server import serve_http
from edge.gateway.protocol import BoundedHttpToolsProtocol
from edge.gateway.serving import configure_connection_limits, https_options
from silt.collector import tune_for_serving
from silt.lifeline import PARENT_PID_ENV, watch_parent_from_env
from silt.service import service_config

# The worker factory, by name: uvicorn imports it in each worker process.
WORKER_APP_FACTORY = "edge.server:create_app"


def create_app() -> ASGIApp:
    """The app in a worker process (uvicorn calls this in each)."""
    # A worker must not outlive the process that supervises it, even a kill -9 of it, nor
    # spend seconds importing the app for nobody. The supervisor's pid comes from the
    # environment, not getppid(): a worker started just before the supervisor died has been
    # reparented, and would watch the wrong process.
    watch_parent_from_env(grace=5.0)
    load_models_alone()
    from edge.app import worker_app  # after the watch: see the module docstring

    return worker_app()


def main(argv: list[str] | None = None) -> int:
    config = service_config("Silt's S3 gateway", argv, "gateway")
    configure_connection_limits(config.gateways.s3)
    workers = config.gateways.s3.workers
    if workers > 1:
        os.environ[PARENT_PID_ENV] = str(os.getpid())  # what each worker watches
        app: ASGIApp | str = WORKER_APP_FACTORY
    else:
        load_models_alone()
        from edge.app import serving_app  # only here: see the module docstring

        app = serving_app(config)
        tune_for_serving()
    serve_http(
        app,
        config.gateways.s3.listen_address,
        config.gateways.trusted_proxies,
        factory=workers > 1,
        workers=workers,
        # Bounded heads, head timeout and connection cap, in every worker.
        http=BoundedHttpToolsProtocol,
        **https_options(config.gateways.s3),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
