"""OTLP trace export requests written as protobuf bytes, straight from wire spans.

The export process used to make the SDK's spans again from each wire span (spanwire.py) and
have the OTLP exporter's encoder build a protobuf object per span, attribute and value, about
19 to 27 µs a span in Python: on a 2-core machine that CPU is taken from the requests, and it was
the largest part of what tracing a 4 KiB GET cost. Writing the request's bytes here takes
about a tenth of that; the exporter parses them into its request object (in C) and sends it
as before, with every OTEL_EXPORTER_OTLP_* setting, retry and timeout of its own.

What is written is what the SDK's encoder (opentelemetry-exporter-otlp-proto-common's
`encode_spans`) builds from the same spans, field for field:
`tests/unit/test_otlp_wire.py` parses both and compares them, over spans that use every
field and every kind of attribute value. The message and field numbers are OTLP's
(opentelemetry/proto/trace/v1/trace.proto, common/v1/common.proto, resource/v1/
resource.proto; stable since OTLP 1.0). Like the SDK's encoder, an attribute whose value
cannot be encoded (an integer outside int64, a type OTLP has no value for, a string UTF-8
cannot carry) is logged and left out, not the span; a span that cannot be written at all (a
name UTF-8 cannot carry) is logged and left out, not the batch.
"""

from __future__ import annotations

import logging
import marshal
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from silt.protobuf_wire import length_varint, varint
from silt.telemetry.spanwire import WireSpan

log = logging.getLogger(__name__)

_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# Span.flags: the low byte is the W3C trace flags, which the SDK's encoder does not set; bit 8
# says whether the parent's is_remote is known, bit 9 that it is remote.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
# Attribute pairs met again and again (an operation's name, a method, a bucket), written once;
# bounded, since values such as request ids never repeat.
_PAIR_CACHE_LIMIT = 4096


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, message) with its one-byte or two-byte tag."""
    return varint(tag << 3 | 2) + length_varint(len(payload)) + payload


def _string(tag: int, value: str | None) -> bytes:
    """A proto3 string field: nothing for the empty string, the default."""
    return _field(tag, value.encode()) if value else b""


def _uint(tag: int, value: int) -> bytes:
    return varint(tag << 3) + varint(value) if value else b""


class _Unencodable(ValueError):
    pass


def _any_value(value: Any) -> bytes:
    """An AnyValue's fields. Its value is a oneof, so a default (0, "", False) is still written.
    The checks go in the SDK encoder's order (a bool is an int, a str a sequence)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        encoded = value.encode()
        return b"\x0a" + varint(len(encoded)) + encoded
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise _Unencodable(f"integer out of int64's range: {value}")
        return b"\x18" + varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE(value)
    if isinstance(value, bytes):
        return _field(7, value)
    if isinstance(value, Sequence):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    if isinstance(value, Mapping):
        return _field(6, b"".join(_field(1, _key_value(str(k), v)) for k, v in value.items()))
    raise _Unencodable(f"no OTLP value for {type(value).__name__}")


def _key_value(key: str, value: Any) -> bytes:
    return _string(1, key) + _field(2, _any_value(value))


def _scope_key(scope: tuple[Any, ...]) -> Any:
    """What tells two instrumentation scopes apart, as InstrumentationScope's equality does:
    name, version, schema URL and attributes, whatever their order."""
    name, version, schema_url, attributes = scope
    try:
        return (name, version, schema_url, frozenset(attributes.items()) if attributes else None)
    except TypeError:  # a value that cannot be hashed: told apart by its exact form
        return (name, version, schema_url, marshal.dumps(attributes))


class OtlpWriter:
    """Writes ExportTraceServiceRequest bytes for one resource (the serving process's)."""

    def __init__(self, resource_attributes: Mapping[str, Any], resource_schema_url: str | None) -> None:
        self._resource = _field(1, self._attributes(1, resource_attributes))
        self._resource_schema_url = _string(3, resource_schema_url)
        self._pairs: dict[tuple[str, type, Any], bytes] = {}
        self._scopes: dict[Any, tuple[bytes, bytes]] = {}

    def _attributes(self, tag: int, attributes: Mapping[str, Any]) -> bytes:
        out = []
        for key, value in attributes.items():
            try:
                out.append(_field(tag, _key_value(key, value)))
            except Exception as exc:  # as the SDK's encoder: the attribute is lost, not the span
                log.warning("span attribute %r left out: %s", key, exc)
        return b"".join(out)

    def _span_attributes(self, attributes: Mapping[str, Any]) -> bytes:
        pairs = self._pairs
        out = []
        for key, value in attributes.items():
            kind = type(value)
            # Not floats: 0.0 and -0.0 are equal keys with different bytes.
            cacheable = kind is str or kind is int or kind is bool
            cached = pairs.get((key, kind, value)) if cacheable else None
            if cached is None:
                try:
                    cached = _field(9, _key_value(key, value))
                except Exception as exc:  # as the SDK's encoder: the attribute is lost, not the span
                    log.warning("span attribute %r left out: %s", key, exc)
                    continue
                if cacheable:
                    if len(pairs) >= _PAIR_CACHE_LIMIT:
                        pairs.clear()
                    pairs[(key, kind, value)] = cached
            out.append(cached)
        return b"".join(out)

    def _span(self, wire: WireSpan) -> bytes:
        (
            name,
            trace_id,
            span_id,
            _flags,
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
            _scope,
            dropped,
        ) = wire
        parts = [b"\x0a\x10", trace_id.to_bytes(16, "big"), b"\x12\x08", span_id.to_bytes(8, "big")]
        if state:
            parts.append(_string(3, ",".join(f"{k}={v}" for k, v in state)))
        if parent is not None:
            parts += (b"\x22\x08", parent[0].to_bytes(8, "big"))
        parts += (_string(5, name), _uint(6, kind + 1))  # OTLP's kinds start at 1 (0: unspecified)
        if start:
            parts += (b"\x39", _FIXED64(start))
        if end:
            parts += (b"\x41", _FIXED64(end))
        if attributes:
            parts.append(self._span_attributes(attributes))
        parts.append(_uint(10, dropped[0]))
        for event_name, timestamp, event_attributes, event_dropped in events:
            body = (b"\x09" + _FIXED64(timestamp) if timestamp else b"") + _string(2, event_name)
            body += self._attributes(3, event_attributes) + _uint(4, event_dropped)
            parts.append(_field(11, body))
        parts.append(_uint(12, dropped[1]))
        for link_trace, link_span, _link_flags, remote, link_attributes, link_dropped in links:
            body = b"\x0a\x10" + link_trace.to_bytes(16, "big") + b"\x12\x08" + link_span.to_bytes(8, "big")
            body += self._attributes(4, link_attributes) + _uint(5, link_dropped)
            body += b"\x35" + _FIXED32(_HAS_IS_REMOTE | (_IS_REMOTE if remote else 0))
            parts.append(_field(13, body))
        parts.append(_uint(14, dropped[2]))
        parts.append(_field(15, _string(2, status_description) + _uint(3, status_code)))
        remote_parent = parent is not None and parent[1]
        parts += (b"\x85\x01", _FIXED32(_HAS_IS_REMOTE | (_IS_REMOTE if remote_parent else 0)))
        return _field(2, b"".join(parts))

    def request(self, wires: Iterable[WireSpan]) -> bytes:
        """The ExportTraceServiceRequest holding wires: one ResourceSpans, a ScopeSpans per
        instrumentation scope in the order first met, as the SDK's encoder groups them."""
        by_scope: dict[Any, list[bytes]] = {}
        scopes: dict[Any, tuple[Any, ...] | None] = {}
        for wire in wires:
            try:
                written = self._span(wire)
            except Exception:  # one span the encoder cannot write is lost, not the batch
                log.exception("span %r left out of the export", wire[0] if wire else None)
                continue
            scope = wire[14]
            key = None if scope is None else _scope_key(scope)
            spans = by_scope.get(key)
            if spans is None:
                spans = by_scope[key] = []
                scopes[key] = scope
            spans.append(written)
        if not by_scope:
            return b""
        scope_spans = []
        for key, spans in by_scope.items():
            scope_field, schema_url = self._scope_fields(scopes[key])
            scope_spans.append(_field(2, scope_field + b"".join(spans) + schema_url))
        return _field(1, self._resource + b"".join(scope_spans) + self._resource_schema_url)

    def _scope_fields(self, scope: tuple[Any, ...] | None) -> tuple[bytes, bytes]:
        """A ScopeSpans' scope and schema_url fields, as the SDK's encoder writes them (an empty
        scope message when the span had none)."""
        if scope is None:
            return b"\x0a\x00", b""
        key = _scope_key(scope)
        written = self._scopes.get(key)
        if written is None:
            name, version, schema_url, attributes = scope
            body = _string(1, name) + _string(2, version) + self._attributes(3, attributes or {})
            written = self._scopes[key] = (_field(1, body), _string(3, schema_url))
        return written
