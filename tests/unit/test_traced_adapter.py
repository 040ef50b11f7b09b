"""The traced block adapter: each call of the inner adapter inside one span named for it."""

from __future__ import annotations

import io

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from silt.block.adapter import list_page_size_of
from silt.errors import InvalidArgument, NotFound
from silt.telemetry.block import TracedAdapter
from tests.unit.committed.support import MemoryAdapter


@pytest.fixture
def traced() -> tuple[TracedAdapter, MemoryAdapter, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inner = MemoryAdapter()
    return TracedAdapter(inner, provider.get_tracer("test")), inner, exporter


def _spans(exporter: InMemorySpanExporter) -> list[tuple[str, str]]:
    return [(s.name, str((s.attributes or {})["silt.block.operation"])) for s in exporter.get_finished_spans()]


def test_each_call_is_the_inner_adapters_inside_its_own_span(
    traced: tuple[TracedAdapter, MemoryAdapter, InMemorySpanExporter],
) -> None:
    adapter, inner, exporter = traced
    assert adapter.put("ns", "src", io.BytesIO(b"0123456789")).size == 10
    with adapter.get_range("ns", "src", 2, 4) as stream:
        assert stream.read() == b"234"
    assert adapter.stat("ns", "src").size == 10
    upload = adapter.create_multipart_upload("ns", "joined")
    part = adapter.upload_part_copy("ns", "joined", upload, 1, "ns", "src", (8, 9))
    assert part.part_number == 1
    adapter.complete_multipart_upload("ns", "joined", upload, [part])
    assert inner.objects[("ns", "joined")] == b"89"
    adapter.delete("ns", "src")
    assert ("ns", "src") not in inner.objects
    assert _spans(exporter) == [
        ("block.put", "put"),
        ("block.get_range", "get_range"),
        ("block.stat", "stat"),
        ("block.create_multipart_upload", "create_multipart_upload"),
        # The inner adapter's own copy runs inside the one span, its stat, reads and part write included.
        ("block.upload_part_copy", "upload_part_copy"),
        ("block.complete_multipart_upload", "complete_multipart_upload"),
        ("block.delete", "delete"),
    ]
    assert exporter.get_finished_spans()[0].attributes["silt.block.bytes"] == 10  # type: ignore[index]


def test_an_error_of_the_inner_adapter_passes_unchanged_and_is_recorded(
    traced: tuple[TracedAdapter, MemoryAdapter, InMemorySpanExporter],
) -> None:
    adapter, _, exporter = traced
    with pytest.raises(NotFound):
        adapter.get("ns", "missing")
    with pytest.raises(InvalidArgument):
        adapter.upload_part_copy("ns", "t", "u", 0, "ns", "src")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["block.get", "block.upload_part_copy"]
    assert all(not s.status.is_ok for s in spans)


def test_a_part_the_interface_refuses_never_reaches_the_store(
    traced: tuple[TracedAdapter, MemoryAdapter, InMemorySpanExporter],
) -> None:
    adapter, inner, exporter = traced
    upload = inner.create_multipart_upload("ns", "t")
    with pytest.raises(InvalidArgument):
        adapter.upload_part("ns", "t", upload, 0, io.BytesIO(b"x"))
    with pytest.raises(InvalidArgument):
        adapter.complete_multipart_upload("ns", "t", upload, [])
    assert exporter.get_finished_spans() == ()
    assert inner.uploads[upload] == {}
    part = adapter.upload_part("ns", "t", upload, 1, io.BytesIO(b"x"))
    adapter.complete_multipart_upload("ns", "t", upload, [part])
    assert [s.name for s in exporter.get_finished_spans()] == ["block.upload_part", "block.complete_multipart_upload"]


def test_the_listing_page_size_is_the_inner_adapters(
    traced: tuple[TracedAdapter, MemoryAdapter, InMemorySpanExporter],
) -> None:
    adapter, inner, _ = traced
    assert adapter.list_page_size is None
    adapter.list_page_size = 10
    assert inner.list_page_size == 10 and adapter.list_page_size == 10


@pytest.mark.parametrize("size", [0, -1, 2.5, True, "10"])
def test_a_listing_page_size_that_is_not_a_positive_int_is_refused(size: object) -> None:
    adapter = MemoryAdapter()
    adapter.list_page_size = size  # type: ignore[assignment]
    with pytest.raises(InvalidArgument, match="a listing page holds 1 key or more"):
        list_page_size_of(adapter)
    adapter.list_page_size = 1
    assert list_page_size_of(adapter) == 1
