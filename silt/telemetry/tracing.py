"""OpenTelemetry tracing set up from the standard OTEL_* environment variables.

Read here: OTEL_SDK_DISABLED, OTEL_SERVICE_NAME (default ``silt-<service>``),
OTEL_TRACES_EXPORTER (``otlp`` — the default —, ``console``, ``none``, or a comma list),
OTEL_EXPORTER_OTLP_PROTOCOL (``grpc`` only). The SDK itself reads the rest: the sampler
(OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG), the OTLP endpoint and headers
(OTEL_EXPORTER_OTLP_ENDPOINT, ...), batching (OTEL_BSP_*), propagation (OTEL_PROPAGATORS:
W3C tracecontext and baggage by default) and OTEL_RESOURCE_ATTRIBUTES.

OTLP export runs in a child process (export_process.py) unless SILT_TRACES_EXPORT_PROCESS=0:
then the serving process encodes and sends spans itself, as the SDK does by default. The
console exporter, a debugging aid, always writes from the process itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from silt.errors import ConfigError
from silt.telemetry.plain_span import PlainTracer

TRACER_NAME = "silt"
EXPORT_PROCESS_ENV = "SILT_TRACES_EXPORT_PROCESS"
_tracer: trace.Tracer | None = None


def export_process_enabled() -> bool:
    return os.environ.get(EXPORT_PROCESS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _exporters(resource: Resource | None = None) -> list[SpanExporter]:
    """The exporters OTEL_TRACES_EXPORTER names; with resource, OTLP through the export process."""
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    out: list[SpanExporter] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            out.append(ConsoleSpanExporter())
        elif name == "otlp":
            protocol = os.environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            )
            if protocol != "grpc":
                raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: only grpc is supported, got {protocol!r}")
            if resource is not None:
                from silt.telemetry.export_process import ProcessSpanExporter

                out.append(ProcessSpanExporter(resource))
                continue
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            out.append(OTLPSpanExporter())
        else:
            raise ConfigError(f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (expected otlp, console or none)")
    return out


def _processor(exporter: SpanExporter) -> SpanProcessor:
    from silt.telemetry.export_process import FlushingBatchSpanProcessor, ProcessSpanExporter

    if isinstance(exporter, ProcessSpanExporter):
        return FlushingBatchSpanProcessor(exporter)
    return BatchSpanProcessor(exporter)


def configure(service: str) -> bool:
    """Install the tracer provider for this process; False if the SDK is disabled."""
    global _tracer
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    name = os.environ.get("OTEL_SERVICE_NAME") or f"silt-{service}"
    resource = Resource.create({"service.name": name, "service.namespace": "silt"})
    provider = TracerProvider(resource=resource)
    processors = [_processor(exporter) for exporter in _exporters(resource if export_process_enabled() else None)]
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    _tracer = _plain_tracer(trace.get_tracer(TRACER_NAME), provider, processors)
    return True


def _plain_tracer(sdk: trace.Tracer, provider: TracerProvider, processors: list[SpanProcessor]) -> trace.Tracer:
    """The SDK's tracer, or a PlainTracer over it when every span goes to the export process."""
    from silt.telemetry.export_process import FlushingBatchSpanProcessor

    if trace.get_tracer_provider() is not provider or not processors:
        return sdk  # another provider was installed first: its tracer makes the spans
    if not all(type(p) is FlushingBatchSpanProcessor for p in processors):
        return sdk
    if os.environ.get("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "").strip().lower() == "true":
        return sdk  # the SDK's tracer counts the spans it starts; plain spans would not
    # The scope the provider gives get_tracer(TRACER_NAME).
    plain = PlainTracer(sdk, provider, InstrumentationScope(TRACER_NAME, "", None, None), processors)
    return plain if plain.usable else sdk


def tracer() -> trace.Tracer | None:
    """The process's tracer, or None when tracing is off (callers then skip spans entirely)."""
    return _tracer


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any] | None = None) -> Iterator[trace.Span | None]:
    """A current span named name, or nothing at all when tracing is off."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


def shutdown() -> None:
    """Flush what is still batched (the SDK also does this at interpreter exit)."""
    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if flush is not None:
        flush(5000)
