"""A block adapter that records a span around each call of another adapter (telemetry.trace_storage_calls)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

from opentelemetry import trace

from silt.block.adapter import BlockAdapter, PartInfo, PresignedURL, PresignMethod, PutResult, UploadPart


def _traced(op: str) -> Callable[..., Any]:
    """The method `op` of the inner adapter, called inside a span named for it: every traced call
    is the same wrapping, so it is written once."""

    def call(self: TracedAdapter, *args: Any, **kwargs: Any) -> Any:
        with self._span(op):
            return getattr(self.inner, op)(*args, **kwargs)

    call.__name__ = call.__qualname__ = op
    return call


class TracedAdapter(BlockAdapter):
    def __init__(self, inner: BlockAdapter, tracer: trace.Tracer) -> None:
        self.inner = inner
        self.scheme = inner.scheme
        self._tracer = tracer

    # The inner adapter lists, so its page size is the one that counts.
    @property
    def list_page_size(self) -> int | None:
        return self.inner.list_page_size

    @list_page_size.setter
    def list_page_size(self, value: int | None) -> None:
        self.inner.list_page_size = value

    def _span(self, op: str) -> Any:
        # Only the adapter and the operation: namespaces and keys are the users' data.
        return self._tracer.start_as_current_span(
            f"block.{op}",
            kind=trace.SpanKind.CLIENT,
            attributes={"silt.block.adapter": self.scheme, "silt.block.operation": op},
        )

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        with self._span("put") as span:
            result = self.inner.put(namespace, key, stream, size)
            span.set_attribute("silt.block.bytes", result.size)
            return result

    def put_if_absent(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        with self._span("put_if_absent") as span:
            result = self.inner.put_if_absent(namespace, key, stream, size)
            span.set_attribute("silt.block.bytes", result.size)
            return result

    def presign(
        self, namespace: str, key: str, method: PresignMethod, expires_in: int, filename: str | None = None
    ) -> PresignedURL | None:
        # No span: computed locally, without a call to the store.
        return self.inner.presign(namespace, key, method, expires_in, filename)

    def presign_part(
        self, namespace: str, key: str, upload_id: str, part_number: int, expires_in: int
    ) -> PresignedURL | None:
        return self.inner.presign_part(namespace, key, upload_id, part_number, expires_in)

    get = _traced("get")
    get_range = _traced("get_range")
    stat = _traced("stat")
    delete = _traced("delete")
    delete_many = _traced("delete_many")
    copy = _traced("copy")
    # One span for opening a listing: its pages are read as the caller goes.
    list_objects = _traced("list_objects")
    create_multipart_upload = _traced("create_multipart_upload")
    # The inner adapter's own, checks included: it may copy a part inside its store.
    upload_part_copy = _traced("upload_part_copy")
    abort_multipart_upload = _traced("abort_multipart_upload")
    # Spans of the calls that pass the interface's checks (a refused part number or parts list
    # never reaches the store); the inner adapter checks again, as any caller's call.
    _complete_multipart_upload = _traced("complete_multipart_upload")

    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        with self._span("upload_part"):
            return self.inner.upload_part(part.namespace, part.key, part.upload_id, part.number, stream, size)

    def __getattr__(self, name: str) -> Any:
        # Adapter-specific extras (a client, a root path) stay reachable.
        return getattr(self.inner, name)
