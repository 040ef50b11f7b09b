"""OTLP export from a child process: the serving process hands finished spans over a pipe.

Encoding spans to OTLP protobuf is Python work that, in-process, competes with requests for
the GIL (about 24 µs a span, against 4.5 µs to hand it over: bench/tracing_export.py). Here
the BatchSpanProcessor's thread converts a batch to plain values (spanwire.py) and writes one
frame to the stdin of `python -m silt.telemetry.export_worker`, which rebuilds the spans and
exports them with the SDK's OTLPSpanExporter (so every OTEL_EXPORTER_OTLP_* variable applies).

Bounded: the pipe is non-blocking. A batch that finds it full is dropped (the child is behind
or stuck), never waited for; a frame begun is finished within WRITE_TIMEOUT or the child is
killed (a half-written frame would corrupt the stream). Drops are counted (`dropped`) and
logged once per outage. A dead child is reaped and started again on the next batch, at most
once per RESTART_INTERVAL; meanwhile batches are dropped.

The child is started as silt/child_process.py starts one, with a minimal environment
(silt/sandbox/process.py: the exporter's OTEL_*
settings, TLS roots and proxies; no credentials or SILT_* settings) and makes itself
non-dumpable first thing (export_worker.py), so its memory and /proc files are root's.

Lifecycle: the child is started by the first batch (a process that never ends a span never
starts one; a fork child starts its own), exits on EOF of its stdin, which shutdown() closes
and then waits for, and exits by itself when this process dies (silt/lifeline.py), even by
SIGKILL. force_flush() returns once the child has exported everything handed to it so far.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from silt.child_process import start_module
from silt.sandbox import process as sandbox
from silt.telemetry.spanwire import ACK, FLUSH, RESOURCE, SPANS, Encoder, frame

log = logging.getLogger(__name__)

WRITE_TIMEOUT = 2.0  # seconds to finish a frame already begun
RESTART_INTERVAL = 5.0  # seconds between starts of the child
EXIT_TIMEOUT = 10.0  # seconds shutdown waits for the child to send what it has
PIPE_BYTES = 1 << 20  # room for a few thousand spans between the two processes
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, missing from Python 3.11's fcntl
# Environment variables the export process keeps: the OTLP exporter's settings, where TLS roots
# are, the proxies it may have to go through.
_EXPORTER_ENV = (
    "OTEL_",
    "GRPC_",
    "SSL_CERT_",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


class _Child:
    """One export process and our ends of its pipes."""

    def __init__(self, resource: Resource) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where `silt` is importable from
        pythonpath = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        # What the exporter reads (OTEL_*, TLS roots, proxies), none of the server's secrets.
        env = sandbox.minimal_env(
            {name: value for name, value in os.environ.items() if name.startswith(_EXPORTER_ENV)},
            code_root=pythonpath,
        )
        # Its own session: a terminal's Ctrl-C reaches the service, whose shutdown then
        # flushes through the child, instead of killing the child first.
        self.proc = start_module("silt.telemetry.export_worker", env, new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.stdin, _F_SETPIPE_SZ, PIPE_BYTES)
        os.set_blocking(self.stdin, False)
        self.pid = os.getpid()
        self.acks = b""

    def write(self, data: bytes) -> bool | None:
        """True: written. False: the pipe was full, nothing written. None: the child is gone."""
        view = memoryview(data)
        deadline = None
        while view:
            try:
                view = view[os.write(self.stdin, view) :]
            except BlockingIOError:
                if deadline is None and len(view) == len(data):
                    return False
                deadline = deadline or time.monotonic() + WRITE_TIMEOUT
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([], [self.stdin], [], remaining)[1]:
                    log.warning("span export process stuck mid-frame for %g s: killing it", WRITE_TIMEOUT)
                    return None
            except OSError:  # BrokenPipeError: it exited
                return None
        return True

    def wait_ack(self, seq: int, deadline: float) -> bool:
        while True:
            while len(self.acks) >= ACK.size:
                (got,) = ACK.unpack_from(self.acks)
                self.acks = self.acks[ACK.size :]
                if got >= seq:
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.stdout], [], [], remaining)[0]:
                return False
            chunk = os.read(self.stdout, 4096)
            if not chunk:
                return False
            self.acks += chunk

    def close(self, timeout: float) -> int | None:
        """EOF to the child, then wait for it to exit (killed after timeout); its exit code."""
        # Through the file objects, which own the descriptors (closing the numbers behind their
        # back would let their finalizers close whatever reuses them).
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        if self.pid != os.getpid():
            return None  # inherited through fork: our parent's child, not ours to wait for
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(EXIT_TIMEOUT)  # SIGKILL: gone at once, even if stopped


class ProcessSpanExporter(SpanExporter):
    """Hands each batch to the export process; see the module's docstring."""

    def __init__(self, resource: Resource) -> None:
        self._resource = resource
        self._encoder = Encoder()
        self._lock = threading.Lock()  # export thread and force_flush callers write frames
        self._child: _Child | None = None
        self._started = float("-inf")
        self._seq = 0
        self._shut = False
        self.dropped = 0
        self._outage = False
        if hasattr(os, "register_at_fork"):
            after = weakref.WeakMethod(self._after_fork)
            os.register_at_fork(after_in_child=lambda: (method := after()) is not None and method())

    def _after_fork(self) -> None:
        # The fork may have happened while the export thread held the lock: a thread the fork
        # child does not have. The child starts an export process of its own (on its first
        # batch) and lets go of the parent's pipe at once, or the parent's export process would
        # never see EOF while this process lives.
        self._lock = threading.Lock()
        child, self._child = self._child, None
        self._started = float("-inf")
        if child is not None:
            child.close(0)

    def _running(self) -> _Child | None:
        child = self._child
        if child is not None and child.proc.poll() is not None:
            self._lost(child, f"exited with code {child.proc.returncode}")
            child = None
        if child is None and not self._shut and time.monotonic() - self._started >= RESTART_INTERVAL:
            self._started = time.monotonic()
            try:
                child = _Child(self._resource)
            except OSError as exc:
                log.warning("cannot start the span export process: %s; spans are dropped", exc)
                return None
            resource = frame(RESOURCE, (dict(self._resource.attributes), self._resource.schema_url))
            if not child.write(resource):
                child.close(0)
                return None
            self._child = child
        return child

    def _lost(self, child: _Child, why: str, wait: float = 1.0) -> None:
        self._child = None
        code = child.close(wait)
        log.warning("span export process %s (code %s); started again in at most %g s", why, code, RESTART_INTERVAL)

    def _drop(self, count: int, why: str) -> None:
        self.dropped += count
        if not self._outage:
            self._outage = True
            log.warning("dropping spans: %s (logged once until export resumes)", why)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        data = frame(SPANS, [self._encoder.to_wire(s) for s in spans])
        with self._lock:
            child = self._running()
            if child is None:
                self._drop(len(spans), "no span export process")
                return SpanExportResult.FAILURE
            written = child.write(data)
            if written is None:
                self._lost(child, "stopped taking spans", wait=0.0)
            if not written:
                self._drop(len(spans), "the span export process is behind")
                return SpanExportResult.FAILURE
        self._outage = False
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """True once the child has exported every span handed to it before this call."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._lock:
            child = self._child
            if child is None:
                return True  # nothing handed over that is still on its way
            self._seq += 1
            seq = self._seq
            if not child.write(frame(FLUSH, seq)):
                return False
            return child.wait_ack(seq, deadline)

    def shutdown(self, timeout_millis: float = 30000) -> None:
        with self._lock:
            self._shut = True
            child, self._child = self._child, None
            if child is not None:
                code = child.close(min(EXIT_TIMEOUT, timeout_millis / 1000))
                if code:
                    log.warning("span export process exited with code %s at shutdown", code)


class FlushingBatchSpanProcessor(BatchSpanProcessor):
    """BatchSpanProcessor whose force_flush also waits for the exporter (the SDK's does not ask
    it): with a ProcessSpanExporter, flushed means received by the collector, as in-process."""

    def __init__(self, exporter: SpanExporter) -> None:
        super().__init__(exporter)
        self._flush_exporter = exporter

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        timeout = 30000 if timeout_millis is None else timeout_millis
        deadline = time.monotonic() + timeout / 1000
        if not super().force_flush(timeout):
            return False
        remaining = max(0, int((deadline - time.monotonic()) * 1000))
        return self._flush_exporter.force_flush(remaining)
