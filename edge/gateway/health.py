"""The gateway's liveness and readiness endpoints, for probes and `silt doctor`.

They live under ``/_silt/health/``: ``_silt`` can never be a bucket (bucket names start with
a letter or digit, edge/gateway/routing.py), so no S3 request is shadowed. They answer
without credentials — a probe cannot sign — and so say no more than whether the gateway can
serve:

* ``/_silt/health/live``: the process answers HTTP (200).
* ``/_silt/health/ready``: at the last periodic check auth and graveler reported SERVING over
  gRPC health and the KV (multipart uploads) answered, each within the configured timeout
  (200 ``ready``, else 503 ``not ready``).

Readiness is checked every ``telemetry.health_check_interval_seconds`` by one task per gateway
process, never per request: a flood of anonymous probes costs no call to auth, graveler or the
KV. Which dependency fails goes to the log (on every change) and to the metric
``silt_gateway_dependency_up{dependency=auth|graveler|kv}``, not to the anonymous answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2, health_pb2_grpc

from silt.telemetry.health import kv_probe
from silt.telemetry.setup import metrics_enabled

if TYPE_CHECKING:
    from edge.gateway.backend import Backend

log = logging.getLogger(__name__)

PREFIX = "/_silt/health/"
LIVE = PREFIX + "live"
READY = PREFIX + "ready"
DEPENDENCIES = ("auth", "graveler", "kv")

_LIVE_BODY = b'{"status":"live"}'
_READY_BODY = b'{"status":"ready"}'
_NOT_READY_BODY = b'{"status":"not ready"}'
_UNKNOWN_BODY = b'{"status":"unknown health check"}'


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


class Readiness:
    """What the last check found; the readiness endpoint answers from it alone."""

    def __init__(self) -> None:
        self.failing: tuple[str, ...] | None = None  # None: not checked yet

    @property
    def ready(self) -> bool:
        return self.failing == ()

    async def check(self, backend: Backend, timeout: float) -> None:
        """Ask every dependency at once, each bounded by timeout."""
        answers = await asyncio.gather(
            _serving(backend, "auth_channel", timeout),
            _serving(backend, "graveler_channel", timeout),
            _kv_answers(backend, timeout),
        )
        failing = tuple(name for name, ok in zip(DEPENDENCIES, answers, strict=True) if not ok)
        if failing != self.failing:
            if failing:
                log.warning("not ready: %s not answering", ", ".join(failing))
            elif self.failing is not None:
                log.info("ready: every dependency answers")
        self.failing = failing
        if metrics_enabled():
            from silt.telemetry import metrics

            for name, ok in zip(DEPENDENCIES, answers, strict=True):
                metrics.GATEWAY_DEPENDENCY_UP.labels(name).set(1 if ok else 0)

    async def run(self, backend: Backend, interval: float, timeout: float) -> None:
        """Check every interval until cancelled (the first check is the caller's, at startup)."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check(backend, timeout)
            except Exception:
                log.warning("readiness check failed", exc_info=True)


def answer(path: str, readiness: Readiness) -> tuple[int, bytes]:
    """(HTTP status, JSON body) for a health path: no I/O, whatever is asked how often."""
    if path == LIVE:
        return 200, _LIVE_BODY
    if path != READY:
        return 404, _UNKNOWN_BODY
    return (200, _READY_BODY) if readiness.ready else (503, _NOT_READY_BODY)
