"""The REST API as its own process: `python -m edge.api.server [--config FILE]`.

Usually the API answers on the S3 gateway's port (the edge process, edge/app.py);
run on its own (its own Deployment) it listens on `api.listen_address`.
"""

from __future__ import annotations

import sys

from edge.api.app import create_app
from edge.core.http_server import serve_http
from silt.collector import tune_for_serving
from silt.service import service_config


def main(argv: list[str] | None = None) -> int:
    # Logging, the launcher's lifeline and telemetry (api.metrics_listen_address) too.
    config = service_config("Silt's lakeFS-compatible REST API", argv, "api")
    app = create_app(config)
    tune_for_serving()
    serve_http(app, config.api.listen_address, config.gateways.trusted_proxies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
