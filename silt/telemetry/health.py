"""gRPC health (grpc.health.v1.Health) backed by periodic, bounded probes of what a service
needs: SERVING only while every probe answers in time; a failed or hung probe flips the
status to NOT_SERVING until the next probe that succeeds."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from grpc_health.v1 import health, health_pb2

from silt.block.adapter import BlockAdapter
from silt.errors import NotFound, Unavailable
from silt.kv.store import Store

log = logging.getLogger(__name__)

Probe = Callable[[], None]
PROBE_PARTITION = b"silt-health"
PROBE_KEY = b"probe"


def kv_probe(store: Store) -> Probe:
    """A read of a key nobody writes: answered (NotFound) means the KV is up."""
    raw = getattr(store, "inner", store)  # unwrapped: probes are not worth a span or a metric

    def probe() -> None:
        with contextlib.suppress(NotFound):
            raw.get(PROBE_PARTITION, PROBE_KEY)

    return probe


def block_probe(adapter: BlockAdapter) -> Probe:
    """The local object store's directory is usable; other stores are probed by their use."""
    raw = getattr(adapter, "inner", adapter)
    root = getattr(raw, "_root", None)

    def probe() -> None:
        if root is not None and not os.access(root, os.R_OK | os.W_OK | os.X_OK):
            raise Unavailable(f"object store directory {root} is not accessible")

    return probe


class HealthMonitor:
    """Owns the servicer to register on a gRPC server and the thread that probes."""

    def __init__(
        self, services: list[str], probes: Mapping[str, Probe], interval_seconds: float, timeout_seconds: float
    ) -> None:
        self.servicer = health.HealthServicer()
        self._services = ["", *services]  # "": the server as a whole
        self._probes = dict(probes)
        self._interval = interval_seconds
        self._timeout = timeout_seconds
        self._stop = threading.Event()
        # One thread per probe: a hung probe never delays the others, and is not started
        # again while it hangs (so hung probes cannot pile up threads).
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self._probes)), thread_name_prefix="health")
        self._pending: dict[str, Future[None]] = {}
        self._thread = threading.Thread(target=self._run, name="health-monitor", daemon=True)
        self.failing: list[str] = list(self._probes)
        self._set(health_pb2.HealthCheckResponse.NOT_SERVING)

    def _set(self, status: int) -> None:
        for name in self._services:
            self.servicer.set(name, status)

    def check_once(self) -> list[str]:
        """Run every probe (bounded by the timeout); return the names of those that failed."""
        for name, probe in self._probes.items():
            if name not in self._pending or self._pending[name].done():
                self._pending[name] = self._pool.submit(probe)
        failing = []
        for name, future in self._pending.items():
            try:
                future.result(timeout=self._timeout)
            except FutureTimeout:
                failing.append(name)
            except Exception as exc:
                failing.append(name)
                log.debug("health probe %s failed: %s", name, exc)
        if failing != self.failing:
            if failing:
                log.warning("not serving: %s not answering", ", ".join(failing))
            else:
                log.info("serving: every dependency answers")
        self.failing = failing
        serving = health_pb2.HealthCheckResponse.NOT_SERVING if failing else health_pb2.HealthCheckResponse.SERVING
        self._set(serving)
        return failing

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.check_once()
            except Exception:
                log.warning("health check failed", exc_info=True)
            self._stop.wait(self._interval)

    def start(self) -> HealthMonitor:
        self.check_once()  # an answer from the first probe on, not after one interval
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.servicer.enter_graceful_shutdown()
        self._pool.shutdown(wait=False, cancel_futures=True)
