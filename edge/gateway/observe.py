"""What the gateway records about each S3 request: a server span (continuing the caller's
trace when it sends a W3C traceparent), Prometheus metrics, the request id made current for
the calls the request makes, and one access-log line.

Never recorded: the Authorization header, signatures, presigned query strings, secrets. The
object key appears in the access log (as S3 server access logs have it), not in spans or metrics.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from edge.gateway.request import Request
from silt.telemetry import metrics, requestid
from silt.telemetry.setup import metrics_enabled
from silt.telemetry.tracing import tracer

access_log = logging.getLogger("silt.access")

# S3's names for the handlers the dispatcher picks (edge/gateway/operations/__init__.py).
_OPERATIONS = {
    "list_buckets": "ListBuckets",
    "get_bucket_location": "GetBucketLocation",
    "get_bucket_versioning": "GetBucketVersioning",
    "list_uploads": "ListMultipartUploads",
    "head_bucket": "HeadBucket",
    "create_bucket": "CreateBucket",
    "delete_bucket": "DeleteBucket",
    "delete_objects": "DeleteObjects",
    "list_parts": "ListParts",
    "upload_part": "UploadPart",
    "put_object": "PutObject",
    "create": "CreateMultipartUpload",
    "complete": "CompleteMultipartUpload",
    "abort": "AbortMultipartUpload",
    "delete_object": "DeleteObject",
    "handle": "NotImplemented",
}


def operation_name(request: Request, handler: Any) -> str:
    """The S3 operation of a request, from a fixed set (a metrics label must stay bounded)."""
    name = getattr(handler, "__name__", "")
    if name in _OPERATIONS:
        if name == "put_object" and "x-amz-copy-source" in request.headers:
            return "CopyObject"
        if name == "upload_part" and "x-amz-copy-source" in request.headers:
            return "UploadPartCopy"
        return _OPERATIONS[name]
    if name == "<lambda>":  # GET/HEAD object and the listings are dispatched through lambdas
        if not request.path:
            return "ListObjectsV2" if request.arg("list-type") == "2" else "ListObjects"
        return "HeadObject" if request.method == "HEAD" else "GetObject"
    return "Unknown"


class RequestRecord:
    """Begun when a request arrives, finished after its last byte is sent."""

    __slots__ = ("_id_token", "_otel_token", "_started", "request", "span")

    def __init__(self, request: Request) -> None:
        self.request = request
        self._started = time.perf_counter()
        self._id_token = requestid.current.set(request.request_id)
        self.span: trace.Span | None = None
        self._otel_token: object | None = None
        traced_by = tracer()
        if traced_by is not None:
            # A caller's traceparent continues its trace; otherwise this span is the root, and
            # the sampling decision made here travels with every call the request makes.
            headers = request.headers
            parent = propagate.extract(headers) if "traceparent" in headers or "baggage" in headers else None
            self.span = traced_by.start_span(
                "S3",
                context=parent,
                kind=trace.SpanKind.SERVER,
                attributes={"http.request.method": request.method, "silt.request_id": request.request_id},
            )
            self._otel_token = otel_context.attach(trace.set_span_in_context(self.span, parent))

    def trace_id(self) -> str:
        if self.span is None:
            return ""
        return format(self.span.get_span_context().trace_id, "032x")

    def finish(
        self,
        operation: str,
        status: int,
        error_code: str,
        user: str,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        seconds = time.perf_counter() - self._started
        request = self.request
        ref, _, key = request.path.partition("/")
        try:
            if self.span is not None and self.span.is_recording():
                self.span.update_name(f"S3 {operation}")
                # Known only now, and set in one call: each call takes the span's lock.
                attributes: dict[str, str | int] = {"s3.operation": operation, "http.response.status_code": status}
                if request.bucket:
                    attributes["s3.bucket"] = request.bucket
                if ref:
                    attributes["silt.ref"] = ref
                if error_code:
                    attributes["s3.error_code"] = error_code
                self.span.set_attributes(attributes)
                if status >= 500:
                    self.span.set_status(Status(StatusCode.ERROR, error_code))
            if metrics_enabled():
                _observe(operation, status, seconds, bytes_in, bytes_out)
            if access_log.isEnabledFor(logging.INFO):
                fields = {
                    "request_id": request.request_id,
                    "trace_id": self.trace_id(),
                    "user": user,
                    "operation": operation,
                    "bucket": request.bucket,
                    "ref": ref,
                    "key": key,
                    "status": status,
                    "error_code": error_code,
                    "bytes_in": bytes_in,
                    "bytes_out": bytes_out,
                    "duration_ms": round(seconds * 1000, 3),
                }
                access_log.info(_text(fields), extra={"fields": fields})
        finally:
            if self.span is not None:
                self.span.end()
            if self._otel_token is not None:
                otel_context.detach(self._otel_token)  # type: ignore[arg-type]
            requestid.current.reset(self._id_token)


def _text(fields: dict[str, Any]) -> str:
    # key=value pairs; free text (keys, names) JSON-quoted so that no line can be forged. The
    # request id is left to the formatter, which appends it to every line of the request.
    return "access " + " ".join(
        f"{k}={json.dumps(v) if isinstance(v, str) else v}" for k, v in fields.items() if v != "" and k != "request_id"
    )


_children: dict[tuple[str, int], Any] = {}
_per_operation: dict[str, tuple[Any, Any, Any]] = {}


def _observe(operation: str, status: int, seconds: float, bytes_in: int, bytes_out: int) -> None:
    counted = _children.get((operation, status))
    if counted is None:
        counted = _children[(operation, status)] = metrics.S3_REQUESTS.labels(operation, str(status))
    counted.inc()
    per = _per_operation.get(operation)
    if per is None:
        per = _per_operation[operation] = (
            metrics.S3_DURATION.labels(operation),
            metrics.S3_RECEIVED.labels(operation),
            metrics.S3_SENT.labels(operation),
        )
    per[0].observe(seconds)
    if bytes_in:
        per[1].inc(bytes_in)
    if bytes_out:
        per[2].inc(bytes_out)
