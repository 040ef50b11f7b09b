"""A KV Store that records spans and metrics around another Store, whatever its driver
(chosen by silt.telemetry.stores where services open their stores)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from silt.errors import NotFound, PredicateFailed
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import SCAN_CHUNK, CheckedBatch, Entry, Pair, Predicate, Store, ValueWithPredicate
from silt.telemetry import metrics

_Item = TypeVar("_Item")
_OPERATIONS = ("get", "get_many", "set", "set_if", "delete", "apply", "scan")


def _partition(partition: bytes) -> str:
    # Partition names are ids (repository-unique ids, staging tokens), not user data.
    return partition[:128].decode("utf-8", "replace")


class InstrumentedStore(ForwardingStore):
    """Every call of the Store timed, counted and traced; an apply from its checked batch on (the
    arguments of an apply that Store.apply refuses never reach the driver)."""

    def __init__(self, inner: Store, driver: str, tracer: trace.Tracer | None, with_metrics: bool) -> None:
        super().__init__(inner)
        self.driver = driver
        self._tracer = tracer
        self._metrics = with_metrics
        # Label children bound once: a labels() lookup per call would cost more than the counter.
        self._count = {op: metrics.KV_OPERATIONS.labels(driver, op) for op in _OPERATIONS}
        self._errors = {op: metrics.KV_ERRORS.labels(driver, op) for op in _OPERATIONS}
        self._latency = {op: metrics.KV_DURATION.labels(driver, op) for op in _OPERATIONS}
        self._conflicts = metrics.KV_CONFLICTS.labels(driver)

    def _call(self, op: str, partition: bytes, fn: Any, *args: Any) -> Any:
        """fn(*args), the call of op on partition, timed, counted and traced."""
        started = time.perf_counter()
        span = None
        if self._tracer is not None:
            span = self._tracer.start_span(
                f"kv.{op}",
                kind=trace.SpanKind.CLIENT,
                attributes={
                    "db.system.name": self.driver,
                    "db.operation.name": op,
                    "silt.kv.partition": _partition(partition),
                },
            )
        try:
            # The span is not made current: drivers start no spans of their own, and
            # attaching a context costs as much as the span.
            return fn(*args)
        except NotFound:
            raise
        except PredicateFailed:
            if self._metrics:
                self._conflicts.inc()
            if span is not None:
                span.set_attribute("silt.kv.conflict", True)
            raise
        except Exception as exc:
            if self._metrics:
                self._errors[op].inc()
            if span is not None:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            if self._metrics:
                self._count[op].inc()
                self._latency[op].observe(time.perf_counter() - started)
            if span is not None:
                span.end()

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        value: ValueWithPredicate = self._call("get", partition, self.inner.get, partition, key)
        return value

    def get_many(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = self._call("get_many", partition, self.inner.get_many, partition, keys)
        return found

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self._call("set", partition, self.inner.set, partition, key, value)

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        self._call("set_if", partition, self.inner.set_if, partition, key, value, predicate)

    def delete(self, partition: bytes, key: bytes) -> None:
        self._call("delete", partition, self.inner.delete, partition, key)

    def apply_checked(self, batch: CheckedBatch) -> None:
        self._call("apply", batch.partition, self.apply_inner, batch)

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        # A scan is lazy: its span and latency cover the whole iteration, page fetches included.
        # The span's parent is whatever was current when the scan was asked for.
        return self._scan(self.inner.scan, partition, start, otel_context.get_current())

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        return self._scan(
            lambda partition, start: self.inner.scan_chunks(partition, start, size),
            partition,
            start,
            otel_context.get_current(),
        )

    def _scan(
        self,
        scan: Callable[[bytes, bytes], Iterator[_Item]],
        partition: bytes,
        start: bytes,
        parent: otel_context.Context,
    ) -> Iterator[_Item]:
        started = time.perf_counter()
        span = None
        if self._tracer is not None:
            span = self._tracer.start_span(
                "kv.scan",
                context=parent,
                kind=trace.SpanKind.CLIENT,
                attributes={
                    "db.system.name": self.driver,
                    "db.operation.name": "scan",
                    "silt.kv.partition": _partition(partition),
                },
            )
        try:
            yield from scan(partition, start)
        except Exception as exc:
            if self._metrics:
                self._errors["scan"].inc()
            if span is not None:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            if self._metrics:
                self._count["scan"].inc()
                self._latency["scan"].observe(time.perf_counter() - started)
            if span is not None:
                span.end()

    def __getattr__(self, name: str) -> Any:
        # Driver-specific extras (none in the interface) stay reachable.
        return getattr(self.inner, name)
