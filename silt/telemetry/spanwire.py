"""Finished spans as plain values, for handing them to the export process (export_process.py).

The serving process pays for to_wire and marshal.dumps only; writing them as an OTLP request
(otlp_wire.py) happens in the export process. A wire span carries every field the OTLP
encoder reads from a ReadableSpan (a PlainSpan writes its own, plain_span.py), so a span
exported through the child is the span exported in-process, field for field (tests compare
them).

A frame on the pipe is a kind byte, a little-endian u32 length and a marshal payload.
marshal, not pickle: the payload is only tuples, dicts, strings and numbers (what span
attributes may hold), which marshal writes faster, and the reader is our own child.
"""

from __future__ import annotations

import marshal
import struct
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from silt.telemetry.plain_span import PlainSpan

HEADER = struct.Struct("<cI")
RESOURCE = b"R"  # (attributes, schema_url), once, before any spans
SPANS = b"S"  # a list of wire spans: one batch of the parent's BatchSpanProcessor
FLUSH = b"F"  # a sequence number the child writes back (u64) once everything before it is exported
ACK = struct.Struct("<Q")

WireSpan = tuple[Any, ...]


def frame(kind: bytes, value: Any) -> bytes:
    payload = marshal.dumps(value)
    return HEADER.pack(kind, len(payload)) + payload


def _attrs(attributes: Any) -> dict[str, Any]:
    if isinstance(attributes, BoundedAttributes):
        # Its dict copied in C: 20 times faster than going through the Mapping methods.
        return dict(attributes._dict)
    return dict(attributes) if attributes else {}


class Encoder:
    """to_wire, with each instrumentation scope converted once (spans share a few scopes)."""

    def __init__(self) -> None:
        self._scopes: dict[int, tuple[InstrumentationScope | None, tuple[Any, ...] | None]] = {}

    def _scope(self, scope: InstrumentationScope | None) -> tuple[Any, ...] | None:
        cached = self._scopes.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1]
        wire = None if scope is None else (scope.name, scope.version, scope.schema_url, _attrs(scope.attributes))
        self._scopes[id(scope)] = (scope, wire)  # keeps scope alive, so its id is not reused
        return wire

    def to_wire(self, span: ReadableSpan | PlainSpan) -> WireSpan:
        if type(span) is PlainSpan:
            return span.to_wire(self._scope(span.scope))
        assert isinstance(span, ReadableSpan)
        context = span.context
        assert context is not None  # a finished SDK span always has one
        parent = span.parent
        state = context.trace_state
        status = span.status
        events, links = span.events, span.links
        return (
            span.name,
            context.trace_id,
            context.span_id,
            int(context.trace_flags),
            tuple(state.items()) if state else None,
            None if parent is None else (parent.span_id, parent.is_remote),
            span.kind.value,
            span.start_time,
            span.end_time,
            status.status_code.value,
            status.description,
            # The SDK's own attributes, not the read-only view .attributes wraps them in.
            _attrs(getattr(span, "_attributes", None) or span.attributes),
            tuple((e.name, e.timestamp, _attrs(e.attributes), e.dropped_attributes) for e in events) if events else (),
            tuple(
                (
                    link.context.trace_id,
                    link.context.span_id,
                    int(link.context.trace_flags),
                    link.context.is_remote,
                    _attrs(link.attributes),
                    link.dropped_attributes,
                )
                for link in links
            )
            if links
            else (),
            self._scope(span.instrumentation_scope),
            (span.dropped_attributes, span.dropped_events, span.dropped_links),
        )
