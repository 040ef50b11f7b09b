"""The span export process: `python -m silt.telemetry.export_worker <parent pid>`.

Reads frames (spanwire.py) from stdin: the parent's resource first, then batches of spans,
each written as an OTLP request (otlp_wire.py) and exported at once with the SDK's
OTLPSpanExporter — the parent's BatchSpanProcessor already batched them (OTEL_BSP_*), and
while an export is slow the pipe fills and the parent drops, so nothing here queues without
bound. A flush frame is answered on stdout once everything before it is exported. Exits at
EOF (the parent shut down or died) and, through silt/lifeline.py, the moment the parent is
gone.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import signal
import sys
from typing import Any, BinaryIO

from silt.child_process import set_not_dumpable
from silt.lifeline import die_with_parent
from silt.telemetry.otlp_wire import OtlpWriter
from silt.telemetry.spanwire import ACK, FLUSH, HEADER, RESOURCE, SPANS

log = logging.getLogger("silt.telemetry.export_worker")


def _read(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def serve(source: BinaryIO, acks: BinaryIO) -> None:
    # Imported here: the gRPC exporter is the heavy import, and only this process needs it.
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    class WrittenRequestExporter(OTLPSpanExporter):
        """The SDK's OTLP exporter (its settings, channel, retries, timeout), handed requests
        otlp_wire.py wrote instead of spans to encode: `export((request bytes, span count))`."""

        def _translate_data(self, data: Any) -> ExportTraceServiceRequest:
            return ExportTraceServiceRequest.FromString(data[0])

        def _count_data(self, data: Any) -> int:
            return int(data[1])

    exporter = WrittenRequestExporter()
    writer = OtlpWriter({}, None)
    try:
        while (header := _read(source, HEADER.size)) is not None:
            kind, size = HEADER.unpack(header)
            payload = _read(source, size)
            if payload is None:
                break
            value = marshal.loads(payload)
            if kind == SPANS:
                if value:
                    exporter.export((writer.request(value), len(value)))  # type: ignore[arg-type]
            elif kind == RESOURCE:
                attributes, schema_url = value
                writer = OtlpWriter(attributes, schema_url)
            elif kind == FLUSH:
                acks.write(ACK.pack(value))
                acks.flush()
    finally:
        exporter.shutdown()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when export ends (EOF)
    die_with_parent(int(sys.argv[1]))
    # Its memory holds spans (request paths, attributes): another process of the same user may
    # neither read it nor ptrace it.
    set_not_dumpable()
    # BrokenPipeError: the parent stopped reading flush answers; it is going away.
    with contextlib.suppress(BrokenPipeError):
        serve(sys.stdin.buffer, sys.stdout.buffer)
    # Skip interpreter teardown (gRPC's threads can make it slow): everything is exported.
    os._exit(0)


if __name__ == "__main__":
    main()
