"""gRPC instrumentation: OpenTelemetry's interceptors (spans, W3C traceparent in metadata),
the request id in metadata, and Prometheus metrics of every call a server handles."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from opentelemetry import propagate, trace

from silt.telemetry import requestid
from silt.telemetry.setup import metrics_enabled, tracing_enabled

log = logging.getLogger("silt.rpc")

HEALTH_SERVICE = "grpc.health.v1.Health"


def _not_health(details: Any) -> bool:
    # Server and aio calls describe themselves with .method, sync client calls with .full_method.
    method = getattr(details, "method", None) or getattr(details, "full_method", None) or ""
    if isinstance(method, bytes):
        method = method.decode()
    return not str(method).startswith(f"/{HEALTH_SERVICE}/")


# --- server side --------------------------------------------------------------------------


def server_interceptors() -> list[grpc.ServerInterceptor]:
    """Outermost first: the trace span, then request id and metrics, around everything else."""
    out: list[grpc.ServerInterceptor] = []
    if tracing_enabled():
        from opentelemetry.instrumentation.grpc import server_interceptor

        # Probes every few seconds would bury the requests' traces.
        out.append(server_interceptor(filter_=_not_health))
    out.append(ServerCallInterceptor(metrics_enabled()))
    return out


class ServerCallInterceptor(grpc.ServerInterceptor):
    """Makes the caller's request id current for the handler; counts and times each call."""

    def __init__(self, with_metrics: bool) -> None:
        from silt.telemetry import metrics

        self._metrics = with_metrics
        self._m = metrics
        self._handled: dict[tuple[str, str, str], Any] = {}
        self._latency: dict[tuple[str, str], Any] = {}

    def _record(self, service: str, name: str, code: grpc.StatusCode, seconds: float, method: str) -> None:
        if self._metrics:
            key = (service, name, code.name)
            handled = self._handled.get(key)
            if handled is None:
                handled = self._handled[key] = self._m.GRPC_HANDLED.labels(*key)
            handled.inc()
            latency = self._latency.get(key[:2])
            if latency is None:
                latency = self._latency[key[:2]] = self._m.GRPC_DURATION.labels(service, name)
            latency.observe(seconds)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("rpc %s %s %.1f ms", method, code.name, seconds * 1000)

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None], details: Any
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None:
            return None
        method: str = details.method
        service, _, name = method.lstrip("/").rpartition("/")
        request_id = None
        for key, value in details.invocation_metadata or ():
            if key == requestid.METADATA_KEY:
                request_id = requestid.sanitize(value)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, service, name, method, request_id),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream, service, name, method, request_id),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _unary(self, behavior: Any, service: str, name: str, method: str, request_id: str | None) -> Any:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            token = requestid.current.set(request_id)
            started = time.perf_counter()
            failed = False
            try:
                return behavior(request, context)
            except BaseException:
                failed = True
                raise
            finally:
                code = context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)  # type: ignore[attr-defined]
                self._record(service, name, code, time.perf_counter() - started, method)
                requestid.current.reset(token)

        return handle

    def _stream(self, behavior: Any, service: str, name: str, method: str, request_id: str | None) -> Any:
        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            token = requestid.current.set(request_id)
            started = time.perf_counter()
            failed = False
            try:
                yield from behavior(request, context)
            except BaseException:
                failed = True
                raise
            finally:
                code = context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)  # type: ignore[attr-defined]
                self._record(service, name, code, time.perf_counter() - started, method)
                requestid.current.reset(token)

        return handle


class SkipHealth(grpc.ServerInterceptor):
    """Runs inner for every call but the health service's, which must answer unauthenticated
    probes (Kubernetes' native gRPC probe cannot sign calls) and reveals only a status."""

    def __init__(self, inner: grpc.ServerInterceptor) -> None:
        self.inner = inner

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        if details.method.startswith(f"/{HEALTH_SERVICE}/"):
            return continuation(details)
        return self.inner.intercept_service(continuation, details)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# --- client side --------------------------------------------------------------------------


def traced_channel(channel: grpc.Channel) -> grpc.Channel:
    """channel with a client span per call and W3C traceparent in its metadata, if tracing."""
    if not tracing_enabled():
        return channel
    from opentelemetry.instrumentation.grpc import client_interceptor
    from opentelemetry.instrumentation.grpc.grpcext import intercept_channel

    traced: grpc.Channel = intercept_channel(channel, client_interceptor(filter_=_not_health))
    return traced


def aio_client_interceptors() -> list[Any]:
    """For grpc.aio channels, outermost first: a client span per call and the W3C traceparent
    in its metadata, when tracing (none otherwise: each grpc.aio interceptor costs per call).
    The request id travels with the signature (silt.rpc.signing)."""
    if not tracing_enabled():
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors as otel_aio

    instrumented = otel_aio(filter_=_not_health)
    unary = next(i for i in instrumented if isinstance(i, grpc.aio.UnaryUnaryClientInterceptor))
    stream = next(i for i in instrumented if isinstance(i, grpc.aio.UnaryStreamClientInterceptor))
    return [_SampledOnlyUnary(unary), _SampledOnlyStream(stream)]


def _traceparent_only(details: Any) -> Any:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return details
    return details._replace(metadata=grpc.aio.Metadata(*(details.metadata or ()), *carrier.items()))


# OpenTelemetry's grpc.aio client interceptor costs about 0.1 ms per call even for a request
# that is not sampled (measured: 0.1 ms against 7 us for a pass-through interceptor). Those
# calls need only the traceparent, so that the services downstream keep the sampling decision;
# the library's interceptor handles the sampled ones.
class _SampledOnlyUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        if trace.get_current_span().is_recording():
            return await self.inner.intercept_unary_unary(continuation, details, request)
        return await continuation(_traceparent_only(details), request)


class _SampledOnlyStream(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        if trace.get_current_span().is_recording():
            return await self.inner.intercept_unary_stream(continuation, details, request)
        return await continuation(_traceparent_only(details), request)
