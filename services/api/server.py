"""The REST API as its own process: `python -m services.api.server [--config FILE]`.

Usually the API answers on the S3 gateway's port (services/gateway/server.py, silt/asgi.py);
run on its own (its own Deployment) it listens on `api.listen_address`.
"""

from __future__ import annotations

import sys

import uvicorn

from services.api.app import create_app
from silt.rpc.server import service_config


def main(argv: list[str] | None = None) -> int:
    # Logging, the launcher's lifeline and telemetry (api.metrics_listen_address) too.
    config = service_config("Silt's lakeFS-compatible REST API", argv, "api")
    host, _, port = config.api.listen_address.rpartition(":")
    uvicorn.run(
        create_app(config),
        host=host.strip("[]"),
        port=int(port),
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_keep_alive=30,
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
