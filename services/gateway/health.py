"""The gateway's liveness and readiness endpoints, for probes and `silt doctor`.

They live under ``/_silt/health/``: ``_silt`` can never be a bucket (bucket names start with
a letter or digit, services/gateway/routing.py), so no S3 request is shadowed. They answer
without credentials — a probe cannot sign — and say only whether the gateway can serve:

* ``/_silt/health/live``: the process answers HTTP (200).
* ``/_silt/health/ready``: auth and graveler report SERVING over gRPC health, and the KV
  (multipart uploads) answers, each within the configured timeout (200, else 503).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2, health_pb2_grpc

from silt.telemetry.health import kv_probe

if TYPE_CHECKING:
    from services.gateway.backend import Backend

PREFIX = "/_silt/health/"
LIVE = PREFIX + "live"
READY = PREFIX + "ready"


def is_health_path(path: str) -> bool:
    return path.startswith(PREFIX)


async def _serving(backend: Backend, channel_name: str, timeout: float) -> bool:
    stub = health_pb2_grpc.HealthStub(getattr(backend, channel_name))
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)  # type: ignore[attr-defined]
    except Exception:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def _kv_answers(backend: Backend, timeout: float) -> bool:
    try:
        await asyncio.wait_for(backend.run(kv_probe(backend.kv)), timeout)
    except Exception:
        return False
    return True


async def answer(path: str, backend: Backend | None, timeout: float) -> tuple[int, bytes]:
    """(HTTP status, JSON body) for a health path."""
    if path == LIVE:
        return 200, b'{"status":"live"}'
    if path != READY:
        return 404, b'{"status":"unknown health check"}'
    if backend is None:
        return 503, b'{"status":"starting"}'
    checks = await asyncio.gather(
        _serving(backend, "_auth_channel", timeout),
        _serving(backend, "_graveler_channel", timeout),
        _kv_answers(backend, timeout),
    )
    failing = [name for name, ok in zip(("auth", "graveler", "kv"), checks, strict=True) if not ok]
    if failing:
        return 503, json.dumps({"status": "unavailable", "failing": failing}).encode()
    return 200, b'{"status":"ready"}'
