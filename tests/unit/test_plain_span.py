"""Plain spans (silt/telemetry/plain_span.py) are the SDK's spans made cheaply: the same calls
on the SDK's tracer and on a PlainTracer give the same wire tuple (spanwire.py), field for
field, ids included, only the clock's readings left out."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

from silt.telemetry.plain_span import PlainSpan, PlainTracer
from silt.telemetry.spanwire import Encoder

TRACEPARENT_SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACEPARENT_NOT_SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


class _CountingIds(IdGenerator):
    """Ids in sequence, so that two tracers making the same spans make the same ids."""

    def __init__(self) -> None:
        self._next = itertools.count(0x1000)

    def generate_span_id(self) -> int:
        return next(self._next)

    def generate_trace_id(self) -> int:
        return next(self._next) << 64 | 0xABCDEF


class _Ended(SpanProcessor):
    """A span processor that keeps what ends, as the batch processor hands it on."""

    def __init__(self) -> None:
        self.spans: list[Any] = []

    def on_end(self, span: Any) -> None:
        self.spans.append(span)


def _tracers(
    sampler: Sampler | None = None, ids: Callable[[], IdGenerator] = _CountingIds
) -> tuple[tuple[trace.Tracer, _Ended], tuple[PlainTracer, _Ended]]:
    """(the SDK's tracer, what it ended), (a PlainTracer, what it ended), each on a provider
    of its own with the same sampler and ids in the same sequence."""
    sdk_ended, plain_ended = _Ended(), _Ended()
    sdk_provider = TracerProvider(sampler=sampler, id_generator=ids())
    sdk_provider.add_span_processor(sdk_ended)
    plain_provider = TracerProvider(sampler=sampler, id_generator=ids())
    plain = PlainTracer(
        plain_provider.get_tracer("silt"),
        plain_provider,
        InstrumentationScope("silt", "", None, None),
        [plain_ended],
    )
    return (sdk_provider.get_tracer("silt"), sdk_ended), (plain, plain_ended)


def _wires(ended: _Ended, drop_stacktraces: bool = False) -> list[tuple[Any, ...]]:
    encoder = Encoder()
    out = []
    for span in ended.spans:
        wire = list(encoder.to_wire(span))
        wire[7] = wire[8] = None  # start and end: the clock's
        if drop_stacktraces:  # the frames an exception went through differ between tracers
            wire[12] = tuple(
                (name, 0, {k: v for k, v in attrs.items() if k != "exception.stacktrace"}, dropped)
                for name, _, attrs, dropped in wire[12]
            )
        out.append(tuple(wire))
    return out


def _same(scenario: Callable[[trace.Tracer], None], sampler: Sampler | None = None, **kwargs: bool) -> list[Any]:
    (sdk, sdk_ended), (plain, plain_ended) = _tracers(sampler)
    scenario(sdk)
    scenario(plain)
    assert plain_ended.spans, "the scenario ended no span"
    assert all(type(s) is PlainSpan for s in plain_ended.spans)
    assert all(isinstance(s, ReadableSpan) for s in sdk_ended.spans)
    wires = _wires(plain_ended, **kwargs)
    assert wires == _wires(sdk_ended, **kwargs)
    return wires


def _s3_request(tracer: trace.Tracer) -> None:
    # What the gateway does with an S3 request's span (edge/gateway/observe.py).
    span = tracer.start_span(
        "S3", kind=SpanKind.SERVER, attributes={"http.request.method": "GET", "silt.request_id": "abc"}
    )
    with trace.use_span(span, end_on_exit=False):
        client = tracer.start_span("/silt.graveler.v1.GravelerService/StageEntry", kind=SpanKind.CLIENT)
        client.set_attribute("rpc.grpc.status_code", 14)
        client.set_status(Status(StatusCode.ERROR, "UNAVAILABLE"))
        client.end()
    span.update_name("S3 GetObject")
    span.set_attributes({"s3.operation": "GetObject", "http.response.status_code": 503, "s3.bucket": "b"})
    span.set_status(Status(StatusCode.ERROR, "SlowDown"))
    span.end()


def test_a_request_span_and_the_client_span_under_it_are_the_sdks() -> None:
    wires = _same(_s3_request)
    client, server = wires
    assert server[0] == "S3 GetObject" and server[5] is None  # the root
    assert client[5] == (server[2], False)  # a local child of it
    assert client[1] == server[1]
    assert server[11]["http.response.status_code"] == 503
    assert (server[9], server[10]) == (StatusCode.ERROR.value, "SlowDown")


def _server_call(traceparent: str, tracestate: str = "") -> Callable[[trace.Tracer], None]:
    def scenario(tracer: trace.Tracer) -> None:
        carrier = {"traceparent": traceparent}
        if tracestate:
            carrier["tracestate"] = tracestate
        parent = propagate.extract(carrier)
        span = tracer.start_span(
            "/silt.graveler.v1.GravelerService/StageEntry",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": "silt.graveler.v1.GravelerService"},
        )
        span.set_attribute("rpc.grpc.status_code", 0)
        span.end()

    return scenario


def test_a_server_span_under_a_remote_parent_is_the_sdks_with_its_trace_state() -> None:
    (wire,) = _same(_server_call(TRACEPARENT_SAMPLED, "vendor=v1,other=2"))
    assert wire[1] == 0x0AF7651916CD43DD8448EB211C80319C
    assert wire[5] == (0xB7AD6B7169203331, True)
    assert wire[4] == (("vendor", "v1"), ("other", "2"))


@pytest.mark.parametrize("sampler", [None, ALWAYS_ON, ParentBased(TraceIdRatioBased(0.5))], ids=str)
def test_a_parent_not_sampled_gives_the_same_span_that_is_not_recorded(sampler: Sampler | None) -> None:
    (sdk, sdk_ended), (plain, plain_ended) = _tracers(sampler)
    parent = propagate.extract({"traceparent": TRACEPARENT_NOT_SAMPLED})
    made = [t.start_span("call", context=parent, kind=SpanKind.SERVER) for t in (sdk, plain)]
    assert made[0].is_recording() == made[1].is_recording()
    assert made[0].get_span_context() == made[1].get_span_context()
    for span in made:
        span.end()
    assert len(sdk_ended.spans) == len(plain_ended.spans)


class _SpreadIds(IdGenerator):
    """Trace ids spread over the whole range, as a ratio sampler needs to see both answers."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self._next)

    def generate_trace_id(self) -> int:
        return (next(self._next) * 0x9E3779B97F4A7C15) % (1 << 128)


def test_sampling_by_trace_id_ratio_decides_each_root_span_as_the_sdk_does() -> None:
    def scenario(tracer: trace.Tracer) -> None:
        for i in range(200):
            tracer.start_span(f"root {i}", kind=SpanKind.SERVER).end()

    (sdk, sdk_ended), (plain, plain_ended) = _tracers(ParentBased(TraceIdRatioBased(0.5)), _SpreadIds)
    scenario(sdk)
    scenario(plain)
    assert 40 < len(plain_ended.spans) < 160  # some sampled, some not
    assert _wires(plain_ended) == _wires(sdk_ended)


def test_attributes_past_the_limit_and_invalid_values_are_dropped_as_the_sdk_drops_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "4")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "1")

    def scenario(tracer: trace.Tracer) -> None:
        span = tracer.start_span("S3", attributes={"a": 1, "b": "x", "seq": ["p", "q"], "mixed": [1, "x"]})
        span.set_attribute("none", None)
        span.set_attribute("", "empty key")
        span.set_attributes({"c": 1.5, "d": True, "b": "replaced", "e": (1, 2)})
        for i in range(4):
            span.add_event(f"retry {i}", {"attempt": i, "extra": "dropped"}, timestamp=i)
        span.end()
        span.set_attribute("after", "end")  # ignored once ended
        span.end()

    (wire,) = _same(scenario)
    assert wire[11] == {"c": 1.5, "d": True, "b": "replaced", "e": (1, 2)}
    assert wire[15] == (6, 2, 0)
    assert [(e[0], e[2], e[3]) for e in wire[12]] == [
        ("retry 2", {"extra": "dropped"}, 1),
        ("retry 3", {"extra": "dropped"}, 1),
    ]


def test_a_key_set_again_moves_to_the_end_as_in_the_sdks_dict() -> None:
    def scenario(tracer: trace.Tracer) -> None:
        span = tracer.start_span("S3", attributes={"a": 1, "b": 2})
        span.set_attribute("a", 3)
        span.set_attributes({"b": 4, "c": 5})
        span.end()

    (wire,) = _same(scenario)
    assert list(wire[11].items()) == [("a", 3), ("b", 4), ("c", 5)]


def test_an_exception_in_a_current_span_is_recorded_as_the_sdk_records_it() -> None:
    def scenario(tracer: trace.Tracer) -> None:
        with pytest.raises(KeyError), tracer.start_as_current_span("S3", kind=SpanKind.SERVER) as span:
            span.set_attribute("s3.operation", "GetObject")
            raise KeyError("missing")

    (wire,) = _same(scenario, drop_stacktraces=True)
    (event,) = wire[12]
    assert event[0] == "exception" and event[2]["exception.type"] == "KeyError"
    assert wire[9] == StatusCode.ERROR.value


def test_a_span_used_as_a_context_manager_records_what_escapes_it() -> None:
    def scenario(tracer: trace.Tracer) -> None:
        with pytest.raises(ValueError), tracer.start_span("S3") as span:
            span.add_event("begun", {"n": 1}, timestamp=5)
            raise ValueError("bad")

    (wire,) = _same(scenario, drop_stacktraces=True)
    assert [e[0] for e in wire[12]] == ["begun", "exception"]


def test_a_status_once_ok_stays_ok_and_unset_is_never_set() -> None:
    def scenario(tracer: trace.Tracer) -> None:
        span = tracer.start_span("S3")
        span.set_status(StatusCode.UNSET)
        span.set_status(StatusCode.OK)
        span.set_status(Status(StatusCode.ERROR, "late"))
        span.end()
        other = tracer.start_span("S3 again")
        other.set_status(StatusCode.ERROR, "described")
        other.end()

    first, second = _same(scenario)
    assert first[9] == StatusCode.OK.value
    assert (second[9], second[10]) == (StatusCode.ERROR.value, "described")


def test_links_and_a_start_time_go_to_the_sdks_tracer() -> None:
    (_, _), (plain, plain_ended) = _tracers()
    linked = trace.SpanContext(0x123, 0x456, False, trace.TraceFlags(1))
    plain.start_span("with a link", links=[trace.Link(linked)]).end()
    plain.start_span("with a start time", start_time=1).end()
    assert plain_ended.spans == []  # made by the SDK's tracer, on its own provider's processors


def test_a_length_limit_on_attribute_values_leaves_every_span_to_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "8")
    (_, _), (plain, _) = _tracers()
    assert not plain.usable


@pytest.fixture(autouse=True)
def _no_current_span() -> Iterator[None]:
    assert not trace.get_current_span().get_span_context().is_valid
    yield


def test_a_link_to_an_invalid_context_is_kept_when_it_carries_attributes_or_a_trace_state() -> None:
    def scenario(tracer: trace.Tracer) -> None:
        span = tracer.start_span("S3")
        span.add_link(trace.INVALID_SPAN_CONTEXT, {"reason": "no parent"})
        span.add_link(trace.INVALID_SPAN_CONTEXT)  # neither: dropped
        span.add_link(trace.SpanContext(0x1, 0x2, True, trace.TraceFlags(1)))
        span.end()

    (wire,) = _same(scenario)
    assert [link[4] for link in wire[13]] == [{"reason": "no parent"}, {}]


def test_start_as_current_span_on_a_coroutine_function_covers_its_run() -> None:
    async def run(tracer: trace.Tracer) -> bool:
        @tracer.start_as_current_span("S3 async")
        async def handler() -> bool:
            await asyncio.sleep(0.01)
            return trace.get_current_span().get_span_context().is_valid

        return await handler()

    current = []

    def scenario(tracer: trace.Tracer) -> None:
        current.append(asyncio.run(run(tracer)))

    assert len(_same(scenario)) == 1
    assert current == [True, True]


def test_a_span_ended_by_two_threads_at_once_is_exported_once() -> None:
    (_, _), (plain, ended) = _tracers()
    spans = [plain.start_span(f"call {i}") for i in range(20_000)]
    barrier = threading.Barrier(2)

    def end_all() -> None:
        barrier.wait()
        for span in spans:
            span.end()

    threads = [threading.Thread(target=end_all) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ended.spans) == len(spans)
