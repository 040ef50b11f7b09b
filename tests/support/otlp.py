"""A real OTLP/gRPC trace receiver for tests: the collector's TraceService, implemented with
opentelemetry-proto, keeping every span it is sent."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: int
    attributes: dict[str, Any] = field(hash=False)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class _Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests: list[Any] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Kept as received and decoded when asked: a benchmark pays only for receiving.
        with self.lock:
            self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    def decode(self) -> list[ReceivedSpan]:
        with self.lock:
            requests, self.requests = self.requests, []
        received = []
        for request in requests:
            received.extend(_spans_of(request))
        with self.lock:
            self.spans.extend(received)
            return list(self.spans)


def _spans_of(request: Any) -> list[ReceivedSpan]:
    received = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(
                    ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                    )
                )
    return received


class OtlpReceiver:
    def __init__(self) -> None:
        self._receiver = _Receiver()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self._receiver, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)

    def spans(self) -> list[ReceivedSpan]:
        return self._receiver.decode()

    def requests(self) -> list[Any]:
        """The ExportTraceServiceRequests received and not yet decoded by spans(), as sent."""
        with self._receiver.lock:
            return list(self._receiver.requests)

    def wait_for(self, condition: Callable[[list[ReceivedSpan]], bool], timeout: float = 20.0) -> list[ReceivedSpan]:
        """The spans received once condition holds for them (AssertionError after timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if condition(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"spans never met the condition; got {[(s.service, s.name) for s in spans]}")
            time.sleep(0.1)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with values set, restored afterwards (a Stack copies it when it prepares)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def otel_env(receiver: OtlpReceiver, sampler: str = "parentbased_always_on", delay_ms: int = 100) -> dict[str, str]:
    """OTEL_* variables that send every sampled span to receiver, batched every delay_ms."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_TRACES_SAMPLER": sampler,
        "OTEL_BSP_SCHEDULE_DELAY": str(delay_ms),
    }
