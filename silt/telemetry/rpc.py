"""gRPC instrumentation: one server span per call handled and one client span per unary call
made (W3C traceparent in metadata), the request id in metadata, and Prometheus metrics of
every call a server handles."""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, NamedTuple

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from silt.grpc_handlers import HandlerInterceptor, within
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
    """The one telemetry interceptor, around everything else: the server span (when tracing),
    the caller's request id made current, and metrics."""
    from silt.telemetry.tracing import tracer

    return [ServerCallInterceptor(metrics_enabled(), tracer() if tracing_enabled() else None)]


class ServerCallInterceptor(HandlerInterceptor):
    """Opens one server span per call (a child of the caller's traceparent), makes the caller's
    request id current for the handler, and counts and times each call.

    A hand-placed span rather than opentelemetry-instrumentation-grpc's interceptor: that one asks
    the call for its peer three times per call (each takes the call's lock, contended by the
    server's polling thread) and sets a dozen attributes; profiled, it cost more than the span.
    Health checks never get here (silt.rpc.server wraps this in SkipHealth).
    """

    def __init__(self, with_metrics: bool, tracer: trace.Tracer | None = None) -> None:
        from silt.telemetry import metrics

        self._metrics = with_metrics
        self._tracer = tracer
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

    def wrap(self, handler: grpc.RpcMethodHandler, details: Any) -> grpc.RpcMethodHandler:
        method: str = details.method
        service, _, name = method.lstrip("/").rpartition("/")
        request_id = None
        carrier: dict[str, str] = {}
        for key, value in details.invocation_metadata or ():
            if key == requestid.METADATA_KEY:
                request_id = requestid.sanitize(value)
            elif key in _TRACE_HEADERS:
                carrier[key] = value
        return within(handler, functools.partial(_Handling, self, _Call(service, name, method, request_id, carrier)))

    def _begin(self, call: _Call) -> tuple[trace.Span | None, object | None]:
        if self._tracer is None:
            return None, None
        parent = propagate.extract(call.carrier) if call.carrier else None
        span = self._tracer.start_span(
            call.method,
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": call.service, "rpc.method": call.name},
        )
        # Current for the handler: its own spans (a commit's build) and the calls it makes to
        # other services belong to this call.
        return span, otel_context.attach(trace.set_span_in_context(span, parent))

    def _end(self, span: trace.Span | None, token: object | None, code: grpc.StatusCode) -> None:
        if span is None:
            return
        if span.is_recording():
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            if code in _SERVER_ERRORS:
                span.set_status(Status(StatusCode.ERROR, code.name))
        span.end()
        otel_context.detach(token)  # type: ignore[arg-type]


class _Handling:
    """One call handled, as its scope: the caller's request id current, the server span open
    and the clock running from entry; on exit the call is counted and timed by its status code
    (UNKNOWN if the handler raised without setting one) and the span ended."""

    __slots__ = ("_call", "_context", "_interceptor", "_otel_token", "_request_id", "_span", "_started")

    def __init__(self, interceptor: ServerCallInterceptor, call: _Call, request: Any, context: Any) -> None:
        self._interceptor = interceptor
        self._call = call
        self._context = context

    def __enter__(self) -> None:
        self._request_id = requestid.current.set(self._call.request_id)
        self._span, self._otel_token = self._interceptor._begin(self._call)
        self._started = time.perf_counter()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        call, failed = self._call, exc_type is not None
        code = self._context.code() or (grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK)
        self._interceptor._record(call.service, call.name, code, time.perf_counter() - self._started, call.method)
        self._interceptor._end(self._span, self._otel_token, code)
        requestid.current.reset(self._request_id)


class _Call(NamedTuple):
    service: str
    name: str
    method: str
    request_id: str | None
    carrier: dict[str, str]  # the W3C trace headers the caller sent


# What the default propagators (W3C trace context and baggage) read from metadata.
_TRACE_HEADERS = frozenset({"traceparent", "tracestate", "baggage"})
# Codes that mean the server failed, not that the caller asked for something wrong or absent
# (as the OpenTelemetry semantic conventions have it for gRPC servers).
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


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
#
# One client span per unary call, started without being made current (nothing below it starts
# spans) and carrying the rpc.* attributes at creation; streaming calls carry the traceparent
# only, so the server's span joins the caller's. A call made while the current span is not
# sampled carries the traceparent alone: the sampling decision is made once, where the trace
# starts, and travels with it.


def _client_span(tracer: trace.Tracer, method: str) -> trace.Span:
    service, _, name = method.lstrip("/").rpartition("/")
    return tracer.start_span(
        method,
        kind=trace.SpanKind.CLIENT,
        attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
    )


def _end_client_span(span: trace.Span, code: grpc.StatusCode | None) -> None:
    if code is not None:
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        if code is not grpc.StatusCode.OK:
            span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


def _trace_headers(span: trace.Span | None = None) -> list[tuple[str, str]]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span) if span is not None else None)
    return list(carrier.items())


def _method_name(method: str | bytes) -> str:
    return method.decode() if isinstance(method, bytes) else method


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


def _with_headers(details: Any, headers: list[tuple[str, str]]) -> Any:
    if not headers:
        return details
    return _Details(
        details.method,
        details.timeout,
        [*(details.metadata or ()), *headers],
        details.credentials,
        getattr(details, "wait_for_ready", None),
        getattr(details, "compression", None),
    )


class ClientSpans(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """For synchronous channels."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        method = _method_name(details.method)
        if not trace.get_current_span().is_recording() or not _not_health(details):
            return continuation(_with_headers(details, _trace_headers()), request)
        span = _client_span(self._tracer, method)
        try:
            outcome = continuation(_with_headers(details, _trace_headers(span)), request)
        except BaseException:
            _end_client_span(span, grpc.StatusCode.UNKNOWN)
            raise
        # A blocking call is done already (the callback runs at once); a future ends it later.
        outcome.add_done_callback(lambda done: _end_client_span(span, done.code()))
        return outcome

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(_with_headers(details, _trace_headers()), request)


def traced_channel(channel: grpc.Channel) -> grpc.Channel:
    """channel with a client span per call and W3C traceparent in its metadata, if tracing."""
    if not tracing_enabled():
        return channel
    from silt.telemetry.tracing import tracer

    traced_by = tracer()
    if traced_by is None:
        return channel
    return grpc.intercept_channel(channel, ClientSpans(traced_by))


class AioClientSpans(grpc.aio.UnaryUnaryClientInterceptor):
    """For grpc.aio channels, unary calls (the gateway's and the REST API's)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        if not trace.get_current_span().is_recording():
            return await continuation(_aio_with_headers(details, _trace_headers()), request)
        span = _client_span(self._tracer, _method_name(details.method))
        code: grpc.StatusCode | None = grpc.StatusCode.UNKNOWN
        try:
            call = await continuation(_aio_with_headers(details, _trace_headers(span)), request)
            code = await call.code()
            return call
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            raise
        finally:
            _end_client_span(span, code)


class AioTraceHeaders(grpc.aio.UnaryStreamClientInterceptor):
    """For grpc.aio channels, streaming calls: the traceparent only."""

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_aio_with_headers(details, _trace_headers()), request)


def _aio_with_headers(details: Any, headers: list[tuple[str, str]]) -> Any:
    if not headers:
        return details
    return details._replace(metadata=grpc.aio.Metadata(*(details.metadata or ()), *headers))


def aio_client_interceptors() -> list[Any]:
    """For grpc.aio channels, outermost first: a client span per unary call and the W3C
    traceparent in every call's metadata, when tracing (none otherwise: each grpc.aio
    interceptor costs per call). The request id travels with the signature (silt.rpc.signing)."""
    if not tracing_enabled():
        return []
    from silt.telemetry.tracing import tracer

    traced_by = tracer()
    if traced_by is None:
        return []
    return [AioClientSpans(traced_by), AioTraceHeaders()]
