"""`make bench-tracing-export`: what exporting a finished span costs the serving process.

- `tracing_export.otlp_encode_us_per_span`: the in-process OTLP exporter's work per span in
  the BatchSpanProcessor's thread (encode_spans, then serializing the request, as the gRPC
  call does) — time that competes with requests for the GIL.
- `tracing_export.handoff_us_per_span`: the same batch handed to the export process instead
  (silt/telemetry/spanwire.py: plain values, marshal, one frame) — what remains in the
  serving process when OTLP export runs in a child (telemetry.md).
- `tracing_export.child_us_per_span`: all the export process does with a batch but the gRPC
  call: reading the frame, writing the OTLP request (silt/telemetry/otlp_wire.py), parsing
  it into the exporter's request object and serializing that, as the call does (paid in the
  export process, not the serving one). Before otlp_wire.py, the child rebuilt SDK spans and
  paid `otlp_encode_us_per_span` and more.
- `tracing_export.{sdk,plain}_span_us_per_span`: making the spans themselves, in the request's
  thread: started, given their attributes, ended into a span processor, by the SDK's tracer
  and by silt/telemetry/plain_span.py's PlainTracer; `tracing_export.plain_handoff_us_per_span`
  the handoff of those plain spans.
- `tracing_export.{otlp,process}_export_cpu_us_per_span`: the whole `export(batch)` call, as
  the span processor's thread makes it, in that thread's CPU time: OTLPSpanExporter's encoding
  and gRPC call to a receiver (in this process, its threads not counted) against
  ProcessSpanExporter's handoff and pipe write (the child's work not counted).

Spans are shaped like the gateway's: an S3 server span with its six attributes and two gRPC
client spans with four, in batches of 512 (the SDK's default batch). Best of --repeat.
"""

from __future__ import annotations

import argparse
import marshal
import statistics
import time
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from bench.report import emit
from silt.telemetry.otlp_wire import OtlpWriter
from silt.telemetry.plain_span import PlainTracer
from silt.telemetry.spanwire import HEADER, SPANS, Encoder, frame


class _Ended(SpanProcessor):
    """The SDK's own span objects as a BatchSpanProcessor receives them (not copies)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def gateway_like_spans(count: int) -> list[ReadableSpan]:
    ended = _Ended()
    provider = TracerProvider(resource=Resource.create({"service.name": "silt-gateway"}))
    provider.add_span_processor(ended)
    make_spans(provider.get_tracer("silt"), count)
    provider.shutdown()
    return ended.spans[:count]


def make_spans(tracer: trace.Tracer, count: int) -> None:
    """About count spans as a traced PUT makes them: an S3 server span, two client spans."""
    for i in range((count + 2) // 3):
        with tracer.start_as_current_span("S3 PutObject", kind=SpanKind.SERVER) as root:
            for method in ("Authenticate", "StageEntry"):
                client = tracer.start_span(
                    f"/silt.graveler.v1.GravelerService/{method}",
                    kind=SpanKind.CLIENT,
                    attributes={
                        "rpc.system": "grpc",
                        "rpc.service": "silt.graveler.v1.GravelerService",
                        "rpc.method": method,
                    },
                )
                client.set_attribute("rpc.grpc.status_code", 0)
                client.end()
            root.set_attributes(
                {
                    "s3.operation": "PutObject",
                    "s3.bucket": "repo",
                    "silt.ref": "main",
                    "http.response.status_code": 200,
                    "s3.error_code": "",
                    "silt.request_id": f"{i:032x}",
                }
            )


def span_making_us(count: int, repeat: int) -> tuple[float, float, float]:
    """Thread CPU µs per span made by the SDK's tracer and by a PlainTracer (best of repeat),
    and the handoff per plain span."""
    ended = _Ended()
    provider = TracerProvider(resource=Resource.create({"service.name": "silt-gateway"}))
    provider.add_span_processor(ended)
    sdk = provider.get_tracer("silt")
    plain = PlainTracer(sdk, provider, InstrumentationScope("silt", "", None, None), [ended])
    best = {}
    for name, tracer in (("sdk", sdk), ("plain", plain)):
        samples = []
        for _ in range(repeat):
            ended.spans.clear()
            start = time.thread_time()
            make_spans(tracer, count)
            samples.append(time.thread_time() - start)
        best[name] = min(samples) / len(ended.spans) * 1e6
    encoder = Encoder()
    plain_spans = list(ended.spans)
    handoff = per_span_us(plain_spans, repeat, lambda: frame(SPANS, [encoder.to_wire(s) for s in plain_spans]))
    provider.shutdown()
    return best["sdk"], best["plain"], handoff


def per_span_us(batch: list[ReadableSpan], repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best / len(batch) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    batch = gateway_like_spans(args.batch)
    encoder = Encoder()

    def otlp() -> object:
        return encode_spans(batch).SerializeToString()

    def handoff() -> object:
        return frame(SPANS, [encoder.to_wire(s) for s in batch])

    encoded = frame(SPANS, [encoder.to_wire(s) for s in batch])
    resource = batch[0].resource
    writer = OtlpWriter(dict(resource.attributes), resource.schema_url)

    def child() -> object:
        request = writer.request(marshal.loads(encoded[HEADER.size :]))
        return ExportTraceServiceRequest.FromString(request).SerializeToString()

    otlp_us = per_span_us(batch, args.repeat, otlp)
    handoff_us = per_span_us(batch, args.repeat, handoff)
    emit("tracing_export.otlp_encode_us_per_span", otlp_us, "us", None, 2)
    emit("tracing_export.handoff_us_per_span", handoff_us, "us", None, 2)
    emit("tracing_export.handoff_share_of_encode", 100 * handoff_us / otlp_us, "%", 50.0, 1)
    emit("tracing_export.child_us_per_span", per_span_us(batch, args.repeat, child), "us", None, 2)
    sdk_us, plain_us, plain_handoff_us = span_making_us(args.batch, args.repeat)
    emit("tracing_export.sdk_span_us_per_span", sdk_us, "us", None, 2)
    emit("tracing_export.plain_span_us_per_span", plain_us, "us", None, 2)
    emit("tracing_export.plain_handoff_us_per_span", plain_handoff_us, "us", None, 2)
    emit("tracing_export.frame_bytes_per_span", len(encoded) / len(batch), "B", None, 1)
    otlp_cpu, process_cpu = export_cpu_us(batch, args.repeat)
    emit("tracing_export.otlp_export_cpu_us_per_span", otlp_cpu, "us", None, 2)
    emit("tracing_export.process_export_cpu_us_per_span", process_cpu, "us", None, 2)


def export_cpu_us(batch: list[ReadableSpan], repeat: int) -> tuple[float, float]:
    """Median thread CPU µs per span of export(batch), in-process OTLP and through the child."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from silt.telemetry.export_process import ProcessSpanExporter
    from tests.support.otlp import OtlpReceiver, environment, otel_env

    def cpu(exporter: SpanExporter) -> float:
        exporter.export(batch)  # warm: channel, child started
        if isinstance(exporter, ProcessSpanExporter):
            exporter.force_flush(30_000)
        samples = []
        for _ in range(repeat):
            start = time.thread_time()
            exporter.export(batch)
            samples.append(time.thread_time() - start)
            if isinstance(exporter, ProcessSpanExporter):
                exporter.force_flush(30_000)  # the child keeps up: no batch is dropped
        exporter.shutdown()
        return statistics.median(samples) / len(batch) * 1e6

    with OtlpReceiver() as receiver, environment(otel_env(receiver)):
        return cpu(OTLPSpanExporter()), cpu(ProcessSpanExporter(batch[0].resource))


if __name__ == "__main__":
    main()
