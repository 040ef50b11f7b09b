"""The export process's OTLP requests (silt/telemetry/otlp_wire.py) are the SDK encoder's:
spans made by the SDK, written through their wire tuples, parse to the message that
`encode_spans` builds from the same spans, field for field."""

from __future__ import annotations

import logging
import math

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from silt.telemetry.otlp_wire import OtlpWriter
from silt.telemetry.spanwire import Encoder

RESOURCE = Resource(
    {"service.name": "silt-gateway", "service.namespace": "silt", "host.count": 3, "ready": True},
    "https://opentelemetry.io/schemas/1.21.0",
)


class _Ended(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _provider(limits: SpanLimits | None = None) -> tuple[TracerProvider, _Ended]:
    ended = _Ended()
    provider = TracerProvider(resource=RESOURCE, span_limits=limits)
    provider.add_span_processor(ended)
    return provider, ended


def _written(spans: list[ReadableSpan], resource: Resource = RESOURCE) -> ExportTraceServiceRequest:
    encoder = Encoder()
    writer = OtlpWriter(dict(resource.attributes), resource.schema_url)
    return ExportTraceServiceRequest.FromString(writer.request([encoder.to_wire(s) for s in spans]))


def _same(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    written = _written(spans)
    assert written == encode_spans(spans)
    # Equal as messages, and so as bytes once both are serialized by the same library.
    assert written.SerializeToString(deterministic=True) == encode_spans(spans).SerializeToString(deterministic=True)
    return written


def test_every_field_of_a_span_is_written_as_the_sdks_encoder_writes_it() -> None:
    provider, ended = _provider(SpanLimits(max_span_attributes=6, max_event_attributes=1))
    tracer = provider.get_tracer("silt", "1.2.3", schema_url="https://opentelemetry.io/schemas/1.21.0")
    remote = SpanContext(0xABC, 0xDEF, True, TraceFlags(1), TraceState([("vendor", "v1"), ("other", "2")]))
    linked = SpanContext(0x123, 0x456, True, TraceFlags(1))
    local_link = SpanContext(0x789, 0x10, False, TraceFlags(0))
    with tracer.start_as_current_span(
        "S3 GetObject",
        context=set_span_in_context(NonRecordingSpan(remote)),
        kind=SpanKind.SERVER,
        links=[Link(linked, {"link.why": "batch"}), Link(local_link)],
        attributes={
            "s": "x",
            "empty": "",
            "i": -7,
            "zero": 0,
            "big": (1 << 63) - 1,
            "f": 1.5,
            "b": False,
            "seq": ("a", "b"),
            "over": 1,
        },
    ) as span:
        span.add_event("retry", {"attempt": 2, "why": "throttled"})
        span.add_event("no attributes")
        span.set_status(Status(StatusCode.ERROR, "NoSuchKey"))
        for kind in (SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER):
            tracer.start_span(f"/silt.graveler.v1.GravelerService/{kind.name}", kind=kind).end()
    ok = tracer.start_span("ok", attributes={"ints": (1, -2, 3), "floats": (0.5, -0.0), "bools": (True, False)})
    ok.set_status(Status(StatusCode.OK))
    ok.end()
    provider.shutdown()
    written = _same(ended.spans)
    (resource_spans,) = written.resource_spans
    (scope_spans,) = resource_spans.scope_spans
    server = scope_spans.spans[4]
    assert server.parent_span_id == (0xDEF).to_bytes(8, "big") and server.flags == 0x300
    assert server.trace_state == "vendor=v1,other=2"
    assert server.dropped_attributes_count == 3 and server.events[0].dropped_attributes_count == 1
    assert [link.flags for link in server.links] == [0x300, 0x100]


def test_spans_of_several_scopes_and_of_none_are_grouped_as_the_sdks_encoder_groups_them() -> None:
    provider, ended = _provider()
    first, second = provider.get_tracer("silt"), provider.get_tracer("silt.kv", "2", schema_url="u")
    for tracer in (first, second, first, second, first):
        tracer.start_span("call").end()
    provider.shutdown()
    scopeless = ReadableSpan(
        name="no scope",
        context=SpanContext(0x1, 0x2, False, TraceFlags(1)),
        resource=RESOURCE,
        start_time=5,
        end_time=6,
    )
    spans = [*ended.spans, scopeless]
    written = _same(spans)
    assert [len(s.spans) for s in written.resource_spans[0].scope_spans] == [3, 2, 1]


def test_a_resource_without_attributes_or_schema_and_an_empty_batch() -> None:
    bare = Resource({})
    assert OtlpWriter({}, None).request([]) == b""
    assert ExportTraceServiceRequest.FromString(b"") == encode_spans([])
    span = ReadableSpan(name="", context=SpanContext(0x1, 0x2, False), resource=bare, start_time=1, end_time=2)
    assert _written([span], bare) == encode_spans([span])


def test_a_value_otlp_cannot_carry_is_left_out_with_a_warning_as_the_sdks_encoder_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    span = ReadableSpan(
        name="S3",
        context=SpanContext(0x1, 0x2, False),
        resource=RESOURCE,
        attributes={"fine": 1, "too big": 1 << 64, "nested too big": (1, 1 << 70), "after": "kept"},
        start_time=1,
        end_time=2,
    )
    with caplog.at_level(logging.WARNING):
        written = _written([span])
    assert written == encode_spans([span])
    keys = [kv.key for kv in written.resource_spans[0].scope_spans[0].spans[0].attributes]
    assert keys == ["fine", "after"]
    assert "too big" in caplog.text


def test_repeated_attribute_pairs_are_written_the_same_each_time_and_the_cache_stays_bounded() -> None:
    provider, ended = _provider()
    tracer = provider.get_tracer("silt")
    for i in range(5000):
        tracer.start_span("S3", attributes={"op": "GetObject", "id": f"{i:08x}", "n": i % 3, "x": 1.0}).end()
    provider.shutdown()
    encoder = Encoder()
    writer = OtlpWriter(dict(RESOURCE.attributes), RESOURCE.schema_url)
    wires = [encoder.to_wire(s) for s in ended.spans]
    first = ExportTraceServiceRequest.FromString(writer.request(wires))
    again = ExportTraceServiceRequest.FromString(writer.request(wires))
    assert first == again == encode_spans(ended.spans)
    assert len(writer._pairs) <= 4096
    # 1 and 1.0 and True are equal in Python but not in OTLP: the cache keeps them apart.
    mixed = ReadableSpan(
        name="m", context=SpanContext(0x1, 0x2, False), resource=RESOURCE, attributes={"x": True}, end_time=2
    )
    assert _written([mixed]) == encode_spans([mixed])
    value = _written([mixed]).resource_spans[0].scope_spans[0].spans[0].attributes[0].value
    assert value.WhichOneof("value") == "bool_value"


def test_special_doubles_are_written_bit_for_bit() -> None:
    span = ReadableSpan(
        name="d",
        context=SpanContext(0x1, 0x2, False),
        resource=RESOURCE,
        attributes={"inf": math.inf, "neg": -math.inf, "tiny": 5e-324, "nan": math.nan},
        end_time=2,
    )
    ours = _written([span]).SerializeToString(deterministic=True)
    assert ours == encode_spans([span]).SerializeToString(deterministic=True)


def test_scopes_that_differ_only_in_attributes_are_kept_apart_in_every_batch() -> None:
    first = InstrumentationScope("lib", "1", None, {"shard": "a"})
    second = InstrumentationScope("lib", "1", None, {"shard": "b"})
    spans = [
        ReadableSpan(
            name=name, context=SpanContext(1, i + 2, False), resource=RESOURCE, instrumentation_scope=scope, end_time=2
        )
        for i, (name, scope) in enumerate([("A", first), ("B", second)])
    ]
    encoder = Encoder()
    writer = OtlpWriter(dict(RESOURCE.attributes), RESOURCE.schema_url)
    both = ExportTraceServiceRequest.FromString(writer.request([encoder.to_wire(s) for s in spans]))
    assert both == encode_spans(spans)
    assert len(both.resource_spans[0].scope_spans) == 2
    later = ExportTraceServiceRequest.FromString(writer.request([encoder.to_wire(spans[1])]))
    assert later == encode_spans(spans[1:])


def test_a_string_utf8_cannot_carry_costs_its_attribute_or_its_span_never_the_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    surrogate = "bad \udcff"  # what os.fsdecode makes of a byte that is not UTF-8
    kept = ReadableSpan(
        name="S3",
        context=SpanContext(0x1, 0x2, False),
        resource=RESOURCE,
        attributes={"path": surrogate, "ok": "yes"},
        end_time=2,
    )
    with caplog.at_level(logging.WARNING):
        written = _written([kept])
    assert written == encode_spans([kept])
    assert [kv.key for kv in written.resource_spans[0].scope_spans[0].spans[0].attributes] == ["ok"]
    unwritable = ReadableSpan(name=surrogate, context=SpanContext(0x1, 0x3, False), resource=RESOURCE, end_time=2)
    with caplog.at_level(logging.ERROR):
        written = _written([unwritable, kept])
    assert [s.name for s in written.resource_spans[0].scope_spans[0].spans] == ["S3"]
    assert "left out of the export" in caplog.text


def test_zero_and_negative_zero_keep_their_own_bytes_whichever_comes_first() -> None:
    spans = [
        ReadableSpan(
            name=str(i), context=SpanContext(0x1, 0x2 + i, False), resource=RESOURCE, attributes={"d": d}, end_time=2
        )
        for i, d in enumerate((0.0, -0.0, 0.0))
    ]
    ours = _written(spans).SerializeToString(deterministic=True)
    assert ours == encode_spans(spans).SerializeToString(deterministic=True)
