"""The S3 gateway as an ASGI application: route, authenticate, dispatch, answer S3-style."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from edge.core.client import EntryReads
from edge.gateway import health
from edge.gateway.authn import authenticate, check_unambiguous
from edge.gateway.backend import Backend, store_error
from edge.gateway.errors import S3Error, error_body
from edge.gateway.health import is_health_path
from edge.gateway.observe import RequestRecord, operation_name
from edge.gateway.operations import dispatch
from edge.gateway.operations.common import Context, Response
from edge.gateway.operations.multipart import expire_uploads
from edge.gateway.request import Receive, Request, from_scope
from edge.gateway.routing import route
from silt.config import Config
from silt.errors import SiltError

log = logging.getLogger(__name__)


def _handler_for_naming(ctx: Context) -> Any:
    """The handler a request that failed early would have had, to name its operation."""
    try:
        return dispatch(ctx)
    except Exception:
        return None


class GatewayApp:
    def __init__(self, config: Config, open_reads: Callable[[], EntryReads | None] | None = None) -> None:
        """open_reads: what reads entries in this process, opened at start-up (edge/app.py
        composes graveler's reader); without it every read is a call to graveler."""
        self.config = config
        self._open_reads = open_reads
        self.backend: Backend | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self.readiness = health.Readiness()
        self._readiness_task: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = from_scope(scope, receive)
        if self._is_health_check(request):
            await self._health(request, send)
            return
        assert self.backend is not None
        ctx = Context(request, self.backend, self.config.gateways.s3)
        record = RequestRecord(request)
        handler = None
        error_code = ""
        try:
            # Before routing: a repeated Host would otherwise name a bucket first.
            check_unambiguous(request)
            route(request, self.config.gateways.s3.domain_name)
            await authenticate(ctx)
            handler = dispatch(ctx)
            response = await handler(ctx)
        except S3Error as exc:
            error_code = exc.code
            response = self._error(ctx, exc)
        except SiltError as exc:
            error = store_error(exc)
            error_code = error.code
            response = self._error(ctx, error)
        except Exception:
            log.exception("%s %s failed", request.method, request.raw_path)
            error_code = "InternalError"
            response = self._error(ctx, S3Error("InternalError"))
        sent = 0
        try:
            sent = await self._send(ctx, response, send)
        finally:
            record.finish(
                operation_name(request, handler or _handler_for_naming(ctx)),
                response.status,
                error_code,
                ctx.user_id,
                request.body.received,
                sent,
            )

    def _is_health_check(self, request: Request) -> bool:
        # Path style only: on a virtual host the path belongs to that bucket.
        host = request.host.rsplit(":", 1)[0].lower()
        domain = self.config.gateways.s3.domain_name.lower()
        virtual = bool(domain) and host.endswith("." + domain)
        return request.method in ("GET", "HEAD") and not virtual and is_health_path(request.raw_path)

    async def _health(self, request: Request, send: Any) -> None:
        status, body = health.answer(request.raw_path, self.readiness)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"x-amz-request-id", request.request_id.encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body if request.method == "GET" else b""})

    def _error(self, ctx: Context, exc: S3Error) -> Response:
        request = ctx.request
        if exc.status >= 500 or exc.code in ("SignatureDoesNotMatch", "InvalidAccessKeyId"):
            log.info("%s %s: %s %s", request.method, request.raw_path, exc.code, exc.message)
        if exc.status == 304:
            return Response(304)
        body = b"" if request.method == "HEAD" else error_body(exc, request.resource, request.request_id)
        headers = [("Content-Type", "application/xml")]
        if exc.code in ("ServiceUnavailable", "SlowDown"):
            headers.append(("Retry-After", "1"))
        return Response(exc.status, headers, body)

    async def _send(self, ctx: Context, response: Response, send: Any) -> int:
        """Send the response; return how many body bytes were sent."""
        headers = [(k.encode("latin-1"), v.encode("latin-1", "replace")) for k, v in response.headers]
        headers.append((b"x-amz-request-id", ctx.request.request_id.encode()))
        headers.append((b"server", b"Silt"))
        if self._unread_body(ctx):
            # A client that sent Expect: 100-continue may still send the body we refused;
            # closing is the only way to keep it from being parsed as the next request.
            headers.append((b"connection", b"close"))
        if response.stream is not None:
            headers.append((b"content-length", str(response.length).encode()))
        elif not any(k.lower() == b"content-length" for k, _ in headers):
            headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        if response.stream is None:
            body = response.body if ctx.request.method != "HEAD" else b""
            await send({"type": "http.response.body", "body": body})
            return len(body)
        sent = 0
        try:
            async for chunk in response.stream:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent += len(chunk)
        finally:
            await response.stream.aclose()  # type: ignore[attr-defined]
        await send({"type": "http.response.body", "body": b""})
        return sent

    @staticmethod
    def _unread_body(ctx: Context) -> bool:
        headers = ctx.request.headers
        sent = headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers
        return sent and not ctx.request.body.finished

    async def _start_readiness(self, backend: Backend) -> None:
        # The first check before the port serves (bounded by the timeout), so that readiness
        # is known from the first probe on; then one check per interval, never one per probe.
        telemetry = self.config.telemetry
        await self.readiness.check(backend, telemetry.health_check_timeout_seconds)
        self._readiness_task = asyncio.create_task(
            self.readiness.run(backend, telemetry.health_check_interval_seconds, telemetry.health_check_timeout_seconds)
        )

    async def _lifespan(self, receive: Receive, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                reads = self._open_reads() if self._open_reads is not None else None
                self.backend = Backend(self.config, reads=reads)
                self.backend.history.start()
                self._expiry_task = asyncio.create_task(expire_uploads(self.backend, self.config.gateways.s3))
                await self._start_readiness(self.backend)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._readiness_task is not None:
                    self._readiness_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._readiness_task
                if self._expiry_task is not None:
                    self._expiry_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._expiry_task
                if self.backend is not None:
                    await self.backend.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
