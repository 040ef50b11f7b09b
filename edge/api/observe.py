"""What the API records about each request: a request id (returned as X-Request-Id and
carried into the gRPC calls it makes), Prometheus metrics by operation and status, a trace
span when tracing is on, and one access-log line. Never recorded: Authorization headers,
cookies, tokens, secrets, request bodies."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from edge.core.asgi import Message, Receive, Scope, Send
from edge.core.middleware import HttpMiddleware
from silt.telemetry import metrics, requestid
from silt.telemetry.setup import metrics_enabled
from silt.telemetry.tracing import tracer

access_log = logging.getLogger("silt.access")

_INTERNAL_BODY = b'{"message":"internal error"}'
_INTERNAL_START = {
    "type": "http.response.start",
    "status": 500,
    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(_INTERNAL_BODY)).encode())],
}


def operation_of(scope: Scope) -> str:
    """The route's name (its function's, unless the route names the operation itself: an older
    path one function serves too): a fixed set, so a bounded metrics label."""
    name = getattr(scope.get("route"), "name", None)
    return name if isinstance(name, str) else getattr(scope.get("endpoint"), "__name__", "unknown")


class Observed(HttpMiddleware):
    """ASGI middleware around the API app."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:16]
        token = requestid.current.set(request_id)
        status = 500
        sent = 0
        traced_by = tracer()
        span = traced_by.start_span("API", kind=trace.SpanKind.SERVER) if traced_by is not None else None

        started_response = False

        async def send_observed(message: Message) -> None:
            nonlocal status, sent, started_response
            if message["type"] == "http.response.start":
                started_response = True
                status = int(message["status"])
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_observed)
        except Exception:
            # Starlette re-raises what it answered 500 (and app.py logged): stop it here, so
            # the server does not log it again; answer only if nothing was sent yet.
            if not started_response:
                status = 500
                await send(_INTERNAL_START)
                await send({"type": "http.response.body", "body": _INTERNAL_BODY})
        finally:
            try:
                self._finish(scope, span, request_id, status, sent, time.perf_counter() - started)
            finally:
                requestid.current.reset(token)

    @staticmethod
    def _finish(scope: Scope, span: Any, request_id: str, status: int, sent: int, seconds: float) -> None:
        operation = operation_of(scope)
        if span is not None:
            span.update_name(f"API {operation}")
            span.set_attribute("http.response.status_code", status)
            span.set_attribute("silt.request_id", request_id)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
            span.end()
        if metrics_enabled():
            metrics.API_REQUESTS.labels(operation, str(status)).inc()
            metrics.API_DURATION.labels(operation).observe(seconds)
        if access_log.isEnabledFor(logging.INFO):
            state = scope.get("state") or {}
            fields = {
                "api": True,
                "user": state.get("user_id", ""),
                "operation": operation,
                "method": scope.get("method", ""),
                "path": scope.get("path", ""),
                "status": status,
                "bytes_out": sent,
                "duration_ms": round(seconds * 1000, 3),
            }
            text = " ".join(f"{k}={json.dumps(v) if isinstance(v, str) else v}" for k, v in fields.items() if v != "")
            access_log.info("access " + text, extra={"fields": fields})
