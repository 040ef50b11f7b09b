"""Serving an ASGI app (the S3 gateway, the REST API) on uvicorn the same way for every HTTP
service: uvloop and httptools, no access log or server header, and a bounded graceful stop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import uvicorn

from silt.service import STOP_GRACE_SECONDS
from silt.source_address import with_mapped_forms

# How long uvicorn's supervisor waits for a worker to answer its health check before it kills
# the worker as hung and starts another. A worker answers only once its process has imported
# the server's module again (multiprocessing's spawn does that before the worker's code runs),
# which takes seconds on a loaded machine: with uvicorn's 5 s, every new worker was killed
# before it could answer and the gateway never became ready.
WORKER_HEALTHCHECK_SECONDS = 60


def serve_http(app: Any, listen_address: str, trusted_proxies: Sequence[str], **options: Any) -> None:
    """Serve app (an ASGI app, or with factory=True an import path to a factory) on
    listen_address (host:port, [v6]:port) until SIGTERM or SIGINT; options override or add to
    uvicorn's settings (workers, http, TLS files).

    trusted_proxies (`gateways.trusted_proxies`, canonical blocks): the peers whose
    X-Forwarded-For and X-Forwarded-Proto uvicorn believes, rewriting the scope's `client` and
    `scheme` before the app sees them (the nearest untrusted address of X-Forwarded-For, read
    from the right); none by default. uvicorn's own default would trust 127.0.0.1 and ::1, so
    that any local process could name itself any client address. Each IPv4 block is also
    given in its IPv4-mapped IPv6 form, the way a dual-stack listener sees an IPv4 peer."""
    uvicorn.run(app, **{**http_settings(listen_address, trusted_proxies), **options})


def http_settings(listen_address: str, trusted_proxies: Sequence[str]) -> dict[str, Any]:
    """uvicorn's settings for serve_http, before its options."""
    host, _, port = listen_address.rpartition(":")
    settings: dict[str, Any] = {
        "host": host.strip("[]"),
        "port": int(port),
        "loop": "uvloop",
        "http": "httptools",
        "lifespan": "on",
        "access_log": False,
        "log_level": "warning",
        # Clients such as the AWS CLI keep connections open between requests.
        "timeout_keep_alive": 30,
        "server_header": False,
        # Stop within the launcher's grace period even if a client keeps a request open.
        "timeout_graceful_shutdown": int(STOP_GRACE_SECONDS),
        "proxy_headers": True,
        "forwarded_allow_ips": with_mapped_forms(trusted_proxies),
        "timeout_worker_healthcheck": WORKER_HEALTHCHECK_SECONDS,
    }
    return settings
