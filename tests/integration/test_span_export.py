"""OTLP export through the export process (silt/telemetry/export_process.py), against a real
OTLP receiver: what arrives, that force_flush delivers, that a stopped or killed child costs
dropped spans and never a blocked export, and that the child dies with its parent."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
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

from silt.telemetry import export_process
from silt.telemetry.export_process import FlushingBatchSpanProcessor, ProcessSpanExporter
from tests.support.otlp import OtlpReceiver, environment, otel_env

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = Resource.create({"service.name": "silt-test", "service.namespace": "silt", "deployment": "ci"})


def _every_field() -> list[ReadableSpan]:
    """Spans using everything OTLP carries: remote parent, trace state, links, events, error
    status, attributes of each type, dropped attributes, a scope with version and schema."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE, span_limits=SpanLimits(max_span_attributes=5))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("silt", "1.2.3", schema_url="https://opentelemetry.io/schemas/1.21.0")
    remote = SpanContext(0xABC, 0xDEF, True, TraceFlags(1), TraceState([("vendor", "v1")]))
    linked = SpanContext(0x123, 0x456, False, TraceFlags(1))
    with tracer.start_as_current_span(
        "S3 GetObject",
        context=set_span_in_context(NonRecordingSpan(remote)),
        kind=SpanKind.SERVER,
        links=[Link(linked, {"link.why": "batch"})],
        attributes={"s": "x", "i": 7, "f": 1.5, "b": True, "seq": ("a", "b"), "over": 1, "limit": 2},
    ) as span:
        span.add_event("retry", {"attempt": 2})
        span.set_status(Status(StatusCode.ERROR, "NoSuchKey"))
        tracer.start_span("/silt.graveler.v1.GravelerService/GetEntry", kind=SpanKind.CLIENT).end()
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running, environment(otel_env(running)):
        yield running


def test_the_child_exports_the_spans_field_for_field_and_force_flush_delivers(receiver: OtlpReceiver) -> None:
    spans = _every_field()
    OTLPSpanExporter().export(spans)
    in_process = receiver.requests()
    exporter = ProcessSpanExporter(RESOURCE)
    processor = FlushingBatchSpanProcessor(exporter)  # schedule delay 5 s: only the flush sends
    try:
        for span in spans:
            processor.on_end(span)
        assert processor.force_flush(10_000)
        # Delivered when force_flush returns: no waiting for the receiver.
        through_child = receiver.requests()[len(in_process) :]
    finally:
        processor.shutdown()
    assert len(in_process) == len(through_child) == 1
    assert through_child[0] == in_process[0]  # every field of resource, scope and spans
    spans_sent = in_process[0].resource_spans[0].scope_spans[0].spans
    assert {s.dropped_attributes_count for s in spans_sent} == {0, 2}
    assert exporter.dropped == 0


def test_a_stopped_child_costs_dropped_spans_not_a_blocked_export(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_process, "WRITE_TIMEOUT", 0.2)
    spans = _every_field() * 256
    exporter = ProcessSpanExporter(RESOURCE)
    try:
        exporter.export(spans[:1])
        assert exporter.force_flush(10_000)
        child = exporter._child
        assert child is not None
        os.kill(child.proc.pid, signal.SIGSTOP)
        start = time.monotonic()
        assert not exporter.force_flush(200)
        assert time.monotonic() - start < 1.0
        slowest = 0.0
        for _ in range(20):  # several times what the pipe holds
            start = time.monotonic()
            exporter.export(spans)
            slowest = max(slowest, time.monotonic() - start)
        assert exporter.dropped > 0
        assert slowest < 1.0  # at most one WRITE_TIMEOUT, then the stuck child is killed
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.proc.pid, signal.SIGKILL)
        # Given up on or killed, the child is reaped (no zombie) and, once RESTART_INTERVAL
        # has passed, the next batch starts a new child, which delivers.
        monkeypatch.setattr(export_process, "RESTART_INTERVAL", 0.0)
        before = len(receiver.requests())
        exporter.export(spans[:2])
        assert exporter._child is not child
        assert child.proc.returncode is not None
        exporter.export(spans[:2])
        assert exporter.force_flush(10_000)
        assert len(receiver.requests()) > before
    finally:
        exporter.shutdown()


PARENT = textwrap.dedent(
    """
    import sys, time
    from opentelemetry.sdk.resources import Resource
    from silt.telemetry.export_process import ProcessSpanExporter
    exporter = ProcessSpanExporter(Resource.create({}))
    exporter.export([])
    print(exporter._child.proc.pid, flush=True)
    time.sleep(60)
    """
)


def test_the_child_exits_when_its_parent_is_killed(receiver: OtlpReceiver) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait(5)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child_pid}").exists()


def test_a_fork_child_exports_through_its_own_child_and_lets_go_of_the_parents(receiver: OtlpReceiver) -> None:
    exporter = ProcessSpanExporter(RESOURCE)
    processor = FlushingBatchSpanProcessor(exporter)
    span, other = _every_field()
    processor.on_end(span)
    assert processor.force_flush(10_000)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the fork child
        processor.on_end(other)
        os._exit(0 if processor.force_flush(10_000) else 1)
    assert os.waitpid(pid, 0)[1] == 0
    start = time.monotonic()
    processor.shutdown()
    assert time.monotonic() - start < export_process.EXIT_TIMEOUT / 2  # the EOF came: no fork child held the pipe
    assert len(receiver.requests()) == 2


def test_the_child_starts_without_the_servers_secrets(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-of-the-server"
    for name in ("SILT_AUTH_ENCRYPT_SECRET_KEY", "AWS_SECRET_ACCESS_KEY", "SILT_CREDENTIALS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, secret)
    exporter = ProcessSpanExporter(RESOURCE)
    try:
        exporter.export(_every_field()[:1])
        assert exporter.force_flush(10_000)  # delivered: the child's exporter found its OTEL_* settings
        child = exporter._child
        assert child is not None
        environ = Path(f"/proc/{child.proc.pid}/environ").read_bytes()
    finally:
        exporter.shutdown()
    names = {item.split(b"=", 1)[0] for item in environ.split(b"\0") if item}
    assert secret.encode() not in environ
    assert not any(name.startswith((b"SILT_", b"AWS_")) for name in names), names
    assert b"OTEL_EXPORTER_OTLP_ENDPOINT" in names
