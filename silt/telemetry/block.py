"""A block adapter that records a span around each call of another adapter (telemetry.trace_storage_calls)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from opentelemetry import trace

from silt.block.adapter import BlockAdapter, ListedObject, PartInfo, PresignedURL, PresignMethod, PutResult


class TracedAdapter(BlockAdapter):
    def __init__(self, inner: BlockAdapter, tracer: trace.Tracer) -> None:
        self.inner = inner
        self.scheme = inner.scheme
        self._tracer = tracer

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

    def get(self, namespace: str, key: str) -> BinaryIO:
        with self._span("get"):
            return self.inner.get(namespace, key)

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        with self._span("get_range"):
            return self.inner.get_range(namespace, key, start, end)

    def stat(self, namespace: str, key: str) -> Any:
        with self._span("stat"):
            return self.inner.stat(namespace, key)

    def delete(self, namespace: str, key: str) -> None:
        with self._span("delete"):
            self.inner.delete(namespace, key)

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        with self._span("copy"):
            return self.inner.copy(src_namespace, src_key, dst_namespace, dst_key)

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        # One span for opening the listing: its pages are read as the caller goes.
        with self._span("list_objects"):
            return self.inner.list_objects(namespace, prefix, after)

    def create_multipart_upload(self, namespace: str, key: str) -> str:
        with self._span("create_multipart_upload"):
            return self.inner.create_multipart_upload(namespace, key)

    def upload_part(
        self, namespace: str, key: str, upload_id: str, part_number: int, stream: BinaryIO, size: int | None = None
    ) -> PartInfo:
        with self._span("upload_part"):
            return self.inner.upload_part(namespace, key, upload_id, part_number, stream, size)

    def upload_part_copy(
        self,
        namespace: str,
        key: str,
        upload_id: str,
        part_number: int,
        src_namespace: str,
        src_key: str,
        src_range: tuple[int, int] | None = None,
    ) -> PartInfo:
        with self._span("upload_part_copy"):
            return self.inner.upload_part_copy(
                namespace, key, upload_id, part_number, src_namespace, src_key, src_range
            )

    def complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        with self._span("complete_multipart_upload"):
            return self.inner.complete_multipart_upload(namespace, key, upload_id, parts)

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        with self._span("abort_multipart_upload"):
            self.inner.abort_multipart_upload(namespace, key, upload_id)

    def __getattr__(self, name: str) -> Any:
        # Adapter-specific extras (a client, a root path) stay reachable.
        return getattr(self.inner, name)
