"""Finished spans as plain values, for handing them to the export process (export_process.py).

The serving process pays for to_wire and marshal.dumps only; building the SDK's spans again
(from_wire) and encoding them to OTLP protobuf happen in the export process. A wire span
carries every field the OTLP encoder reads from a ReadableSpan, so a span exported through
the child is the span exported in-process, field for field (tests compare them).

A frame on the pipe is a kind byte, a little-endian u32 length and a marshal payload.
marshal, not pickle: the payload is only tuples, dicts, strings and numbers (what span
attributes may hold), which marshal writes faster, and the reader is our own child.
"""

from __future__ import annotations

import marshal
import struct
from collections.abc import Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

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

    def to_wire(self, span: ReadableSpan) -> WireSpan:
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


class _WireReadableSpan(ReadableSpan):
    """A ReadableSpan whose dropped counts are the ones the serving process recorded."""

    def __init__(self, dropped: tuple[int, int, int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._dropped = dropped

    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped[2]


def _bounded(attributes: dict[str, Any], dropped: int) -> dict[str, Any] | BoundedAttributes:
    """The attributes as the SDK reports them: BoundedAttributes only to carry a dropped count
    (building one validates every value again, which the serving process already did)."""
    if not dropped:
        return attributes
    bounded = BoundedAttributes(maxlen=None, attributes=attributes, immutable=True)
    bounded.dropped = dropped
    return bounded


_KINDS = {kind.value: kind for kind in SpanKind}
_STATUS_CODES = {code.value: code for code in StatusCode}
_UNSET = Status(StatusCode.UNSET)


class Decoder:
    """from_wire, in the export process: SDK spans with the serving process's resource."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self._scopes: dict[tuple[Any, ...], InstrumentationScope] = {}

    def _scope(self, wire: tuple[Any, ...] | None) -> InstrumentationScope | None:
        if wire is None:
            return None
        key = wire[:3]
        scope = self._scopes.get(key)
        if scope is None:
            name, version, schema_url, attributes = wire
            scope = self._scopes[key] = InstrumentationScope(name, version, schema_url, attributes or None)
        return scope

    def from_wire(self, wire: WireSpan) -> ReadableSpan:
        (
            name,
            trace_id,
            span_id,
            flags,
            state,
            parent,
            kind,
            start,
            end,
            status_code,
            status_description,
            attributes,
            events,
            links,
            scope,
            dropped,
        ) = wire
        context = SpanContext(
            trace_id, span_id, False, TraceFlags(flags), TraceState(list(state)) if state is not None else None
        )
        return _WireReadableSpan(
            dropped,
            name=name,
            context=context,
            parent=None if parent is None else SpanContext(trace_id, parent[0], parent[1]),
            resource=self.resource,
            attributes=_bounded(attributes, dropped[0]),
            events=[Event(n, _bounded(a, d), ts) for n, ts, a, d in events],
            links=[Link(SpanContext(t, s, remote, TraceFlags(f)), _bounded(a, d)) for t, s, f, remote, a, d in links],
            kind=_KINDS[kind],
            status=_UNSET if status_code == 0 else Status(_STATUS_CODES[status_code], status_description),
            start_time=start,
            end_time=end,
            instrumentation_scope=self._scope(scope),
        )

    def spans(self, wires: Sequence[WireSpan]) -> list[ReadableSpan]:
        return [self.from_wire(w) for w in wires]
