"""The S3 port's process settings: its connection limits and its TLS options.

The process that serves the port is composed in edge/app.py (the gateway, the REST API and
the web UI on one port); what only the gateway knows about serving HTTP to the Internet is here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from edge.gateway import protocol, request
from silt.config import S3GatewayConfig


def configure_connection_limits(s3: S3GatewayConfig) -> None:
    protocol.configure(
        protocol.ConnectionLimits(
            max_head_bytes=s3.max_header_bytes,
            max_header_bytes=s3.max_header_line_bytes,
            head_timeout_s=s3.header_timeout_seconds,
            max_connections=s3.max_connections,
            max_connections_per_client=s3.max_connections_per_client,
            idle_timeout_s=s3.idle_timeout_seconds,
        )
    )
    request.BODY_IDLE_TIMEOUT.seconds = s3.body_idle_timeout_seconds


def https_options(s3: S3GatewayConfig) -> dict[str, Any]:
    """uvicorn's TLS settings for gateways.s3.tls: server-side only, S3 clients present no
    certificate. Unreadable files end the process with one line, as other configuration errors."""
    tls = s3.tls
    if not tls.enabled:
        return {}
    assert tls.cert_file and tls.key_file  # the configuration requires them when enabled
    for key, path in (("cert_file", tls.cert_file), ("key_file", tls.key_file)):
        if not os.access(os.path.expanduser(path), os.R_OK):
            print(f"silt gateway: gateways.s3.tls.{key}: cannot read {path}", file=sys.stderr)
            raise SystemExit(2)
    return {"ssl_certfile": os.path.expanduser(tls.cert_file), "ssl_keyfile": os.path.expanduser(tls.key_file)}
