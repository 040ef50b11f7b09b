"""Spans kept as plain values, for the export process: the SDK's spans made cheaply.

Each traced S3 request starts a server span, and each gRPC call it makes a client span in
the caller and a server span in the callee. The SDK's `Tracer.start_span` and `Span` cost
15 to 20 µs of the request's CPU to make one (the sampler called through the current
context, every attribute value validated through a bounded dict under a lock, a
`ReadableSpan` made again at its end) and 3.3 µs more to hand it to the export process
(`make bench-tracing-export`). `PlainTracer` makes a `PlainSpan` instead, which keeps what
the export needs in slots and writes its wire tuple (spanwire.py) itself: 5.2 to 5.6 µs and
1.3 µs.

It is used only where it makes the span the SDK would make (`PlainTracer.usable`):

- the process's provider is the one `tracing.configure` made, and its only span processors
  are the batch processors in front of the export process, whose `on_start` and
  `_on_ending` do nothing and whose exporter turns spans into wire tuples (the in-process
  and console exporters read an SDK span, so with them every span is the SDK's);
- span limits leave attribute values whole (no `OTEL_*ATTRIBUTE_VALUE_LENGTH_LIMIT`), and
  the SDK's own metrics are off;
- per span: no links, start time or exception options given (those go to the SDK's tracer).

Its ids come from the provider's id generator, its sampling decision from the provider's
sampler (asked as the SDK asks it, except for the default samplers, whose answer is known),
its trace flags and trace state as the SDK sets them, and the attribute, event and link
limits are the provider's. `tests/unit/test_plain_span.py` holds a plain span and
an SDK span, made by the same calls, to the same wire tuple field by field.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, StaticSampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types
from opentelemetry.util._decorator import _agnosticcontextmanager

log = logging.getLogger(__name__)

# Attribute values stored as they are; any other value goes through the SDK's validation.
_PLAIN = frozenset((str, int, float, bool))
_UNSET_CODE = StatusCode.UNSET.value
# The default samplers, whose decision is known without asking them: ALWAYS_ON samples every
# span; ParentBased(ALWAYS_ON) samples a root span and follows a parent's sampled flag.
_ALWAYS_ON = ALWAYS_ON.get_description()
_PARENT_BASED_ALWAYS_ON = ParentBased(ALWAYS_ON).get_description()


def _plain(attributes: Mapping[str, Any]) -> bool:
    return all(type(k) is str and k and type(v) in _PLAIN for k, v in attributes.items())


class PlainTracer(trace.Tracer):
    """The SDK tracer's spans made as PlainSpans where they are the same; see the module's
    docstring. Every other span is the SDK tracer's."""

    def __init__(
        self, sdk: trace.Tracer, provider: TracerProvider, scope: InstrumentationScope, processors: Sequence[Any]
    ) -> None:
        self.sdk = sdk
        self.processors = tuple(processors)
        self.scope = scope
        self.limits = SpanLimits()
        ids = provider.id_generator
        self._trace_id = ids.generate_trace_id
        self._span_id = ids.generate_span_id
        self._random_flag = TraceFlags.RANDOM_TRACE_ID if ids.is_trace_id_random() else 0
        self.sampler: Sampler = provider.sampler
        # By exact type and description, so that a sampler of another kind is always asked.
        description = self.sampler.get_description()
        self._always_on = type(self.sampler) is StaticSampler and description == _ALWAYS_ON
        self._parent_based_always_on = type(self.sampler) is ParentBased and description == _PARENT_BASED_ALWAYS_ON
        self.usable = self.limits.max_span_attribute_length is None

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[trace.Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        if links or start_time is not None or not record_exception or not set_status_on_exception:
            return self.sdk.start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )
        current = trace.get_current_span(context).get_span_context()
        parent = current if current.is_valid else None
        if parent is not None:
            trace_id = parent.trace_id
            random_flag = parent.trace_flags & TraceFlags.RANDOM_TRACE_ID
            trace_state = parent.trace_state
        else:
            trace_id = self._trace_id()
            random_flag = self._random_flag
            trace_state = None
        if self._always_on or (self._parent_based_always_on and (parent is None or parent.trace_flags.sampled)):
            sampled, recording = True, True
        elif self._parent_based_always_on:
            sampled, recording = False, False
        else:
            result = self.sampler.should_sample(context, trace_id, name, kind, attributes, ())
            attributes = result.attributes
            trace_state = result.trace_state
            sampled, recording = result.decision.is_sampled(), result.decision.is_recording()
        flags = TraceFlags((TraceFlags.SAMPLED if sampled else 0) | random_flag)
        span_context = SpanContext(trace_id, self._span_id(), False, flags, trace_state)
        if not recording:
            return trace.NonRecordingSpan(span_context)
        return PlainSpan(self, name, span_context, parent, kind, attributes)

    # The SDK's decorator (not contextlib's), so that, used on a coroutine function, the span
    # covers the coroutine's run and not just its creation.
    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[trace.Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class PlainSpan(trace.Span):
    """A recording span whose end hands it to the provider's batch processors."""

    __slots__ = (
        "_attributes",
        "_dropped_events",
        "_dropped_links",
        "_events",
        "_links",
        "_lock",
        "_tracer",
        "context",
        "end_time",
        "kind",
        "name",
        "parent",
        "start_time",
        "status",
    )

    def __init__(
        self,
        tracer: PlainTracer,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: types.Attributes,
    ) -> None:
        self._tracer = tracer
        # As the SDK's span, every change under a lock: a span may be ended by one thread (a
        # blocking call's client span by gRPC's callback) while another still holds it.
        self._lock = threading.Lock()
        self.name = name
        self.context = context
        self.parent = parent
        self.kind = kind
        limit = tracer.limits.max_span_attributes
        # A plain dict while every key and value is plain and the limit is not reached, as
        # the SDK's bounded dict would hold them; past that, the SDK's bounded dict itself.
        self._attributes: dict[str, Any] | BoundedAttributes
        if not attributes:
            self._attributes = {}
        elif _plain(attributes) and (limit is None or len(attributes) <= limit):
            self._attributes = dict(attributes)
        else:
            self._attributes = BoundedAttributes(limit, attributes, immutable=False, max_value_len=None)
        self._events: list[tuple[str, int, dict[str, Any], int]] = []
        self._dropped_events = 0
        self._links: list[tuple[int, int, int, bool, dict[str, Any], int]] = []
        self._dropped_links = 0
        self.status: Status | None = None
        self.end_time: int | None = None
        self.start_time = time.time_ns()

    # The API's Span.

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_time is None

    def _bounded(self) -> BoundedAttributes:
        held = self._attributes
        if type(held) is dict:
            held = self._attributes = BoundedAttributes(
                self._tracer.limits.max_span_attributes, held, immutable=False, max_value_len=None
            )
        assert isinstance(held, BoundedAttributes)
        return held

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        with self._lock:
            if self.end_time is not None:
                log.warning("Setting attribute on ended span.")
                return
            held = self._attributes
            limit = self._tracer.limits.max_span_attributes
            if type(held) is dict and _plain(attributes) and (limit is None or len(held) + len(attributes) <= limit):
                for key, value in attributes.items():
                    held.pop(key, None)  # a key set again moves to the end, as in the SDK's dict
                    held[key] = value
            else:
                self._bounded()._set_items(attributes)  # what the SDK's span calls

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        with self._lock:
            if self.end_time is not None:
                log.warning("Setting attribute on ended span.")
                return
            held = self._attributes
            limit = self._tracer.limits.max_span_attributes
            if (
                type(held) is dict
                and type(key) is str
                and key
                and type(value) in _PLAIN
                and (limit is None or len(held) < limit)
            ):
                held.pop(key, None)
                held[key] = value
            else:
                self._bounded()[key] = value

    def update_name(self, name: str) -> None:
        with self._lock:
            if self.end_time is None:
                self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        with self._lock:
            if self.end_time is not None or (self.status is not None and self.status.status_code is StatusCode.OK):
                return
            if isinstance(status, Status):
                if status.status_code is not StatusCode.UNSET:
                    self.status = status
            elif status is not StatusCode.UNSET:
                self.status = Status(status, description)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        limits = self._tracer.limits
        bounded = BoundedAttributes(
            limits.max_event_attributes, attributes, max_value_len=limits.max_attribute_length, immutable=True
        )
        event = (name, time.time_ns() if timestamp is None else timestamp, dict(bounded._dict), bounded.dropped)
        with self._lock:
            if self.end_time is not None:
                return
            if limits.max_events is not None and len(self._events) >= limits.max_events:
                # The SDK's bounded list drops the oldest event to make room.
                self._dropped_events += 1
                if not self._events:
                    return
                del self._events[0]
            self._events.append(event)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        # The SDK's rule: an invalid context is still a link if it has attributes or a trace state.
        if not (context and (context.is_valid or attributes or context.trace_state)):
            return
        limits = self._tracer.limits
        bounded = BoundedAttributes(
            limits.max_link_attributes, attributes, max_value_len=limits.max_attribute_length, immutable=True
        )
        link = (
            context.trace_id,
            context.span_id,
            int(context.trace_flags),
            context.is_remote,
            dict(bounded._dict),
            bounded.dropped,
        )
        with self._lock:
            if self.end_time is not None:
                return
            if limits.max_links is not None and len(self._links) >= limits.max_links:
                self._dropped_links += 1
                if not self._links:
                    return
                del self._links[0]
            self._links.append(link)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        # The same event the SDK records.
        module = type(exception).__module__
        qualname = type(exception).__qualname__
        recorded: dict[str, Any] = {
            "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def __exit__(self, exc_type: Any, exc_val: BaseException | None, exc_tb: Any) -> None:
        if exc_val is not None and self.is_recording():
            self.record_exception(exc_val, escaped=True)
            self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        super().__exit__(exc_type, exc_val, exc_tb)

    def end(self, end_time: int | None = None) -> None:
        with self._lock:
            if self.end_time is not None:
                log.warning("Calling end() on an ended span.")
                return
            self.end_time = time.time_ns() if end_time is None else end_time
        for processor in self._tracer.processors:
            processor.on_end(self)

    # What export reads.

    @property
    def scope(self) -> InstrumentationScope:
        return self._tracer.scope

    def to_wire(self, scope: tuple[Any, ...] | None) -> tuple[Any, ...]:
        """The span as spanwire's Encoder.to_wire writes an SDK span, with scope already written."""
        context = self.context
        state = context.trace_state
        status = self.status
        return (
            self.name,
            context.trace_id,
            context.span_id,
            int(context.trace_flags),
            tuple(state.items()) if state else None,
            None if self.parent is None else (self.parent.span_id, self.parent.is_remote),
            self.kind.value,
            self.start_time,
            self.end_time,
            _UNSET_CODE if status is None else status.status_code.value,
            None if status is None else status.description,
            dict(held._dict) if type(held := self._attributes) is BoundedAttributes else held,
            tuple(self._events),
            tuple(self._links),
            scope,
            (held.dropped if type(held) is BoundedAttributes else 0, self._dropped_events, self._dropped_links),
        )
