"""Faults between an edge and graveler whose outcome the edge cannot see: graveler applies a
staging write and the answer is lost, graveler's own store fails with a misleading message, or
graveler does not serve a method (an older version during a rolling upgrade).

* `CallFaults`, a server interceptor of graveler's gRPC server, arms a fault for a method's next
  calls: run the handler and then lose the answer (by a hook, such as stopping the TCP proxy the
  edge reaches graveler through, or by answering UNAVAILABLE as a connection failure would), or
  answer UNIMPLEMENTED as a graveler without the method does.
* `StagingWriteFaults`, a KV store wrapper under graveler, makes writes of staged values fail
  with Unavailable carrying Cassandra's "connection refused", after applying them or without.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from silt.errors import Unavailable
from silt.kv import Store
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import AllOf, Condition, Timestamp

SERVICE = "/silt.graveler.v1.GravelerService/"
# What a failed connection says, word for word: the text the edge once trusted.
REFUSED_TEXT = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1: connection refused"


@dataclass
class _Fault:
    kind: str  # "after" (run, then lose the answer), "before" (answer UNAVAILABLE unrun), "unimplemented"
    times: int  # calls still to fault; -1: every call
    then: Callable[[], None] | None  # run after the handler, before the answer is lost


class CallFaults(grpc.ServerInterceptor):
    """Faults armed per method (its bare name, "StageEntry"); calls counted per method."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._finished = threading.Condition(self._lock)
        self._faults: dict[str, _Fault] = {}
        self.calls: dict[str, int] = {}
        self.applied: dict[str, int] = {}  # handler runs that completed under a fault
        self.done: dict[str, int] = {}  # calls whose handler returned or raised

    def wait_done(self, method: str, count: int, timeout: float = 30.0) -> None:
        """Wait until `count` calls of method have finished in graveler (whatever their client saw)."""
        with self._finished:
            if not self._finished.wait_for(lambda: self.done.get(method, 0) >= count, timeout):
                raise TimeoutError(f"{count} calls of {method} did not finish within {timeout} s")

    def lose_answer(self, method: str, times: int = 1, then: Callable[[], None] | None = None) -> None:
        """The next `times` calls of method are applied, then answered UNAVAILABLE (after
        `then`, e.g. cutting the connection): the edge cannot tell that they were applied."""
        with self._lock:
            self._faults[method] = _Fault("after", times, then)

    def refuse_unapplied(self, method: str, times: int = 1) -> None:
        """The next `times` calls of method are answered UNAVAILABLE without being applied."""
        with self._lock:
            self._faults[method] = _Fault("before", times, None)

    def unimplemented(self, method: str) -> None:
        """method is answered UNIMPLEMENTED, as by a graveler that does not serve it."""
        with self._lock:
            self._faults[method] = _Fault("unimplemented", -1, None)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take(self, method: str) -> _Fault | None:
        with self._lock:
            self.calls[method] = self.calls.get(method, 0) + 1
            fault = self._faults.get(method)
            if fault is None:
                return None
            if fault.times > 0:
                fault.times -= 1
                if fault.times == 0:
                    del self._faults[method]
            return fault

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        path: str = handler_call_details.method
        if handler is None or handler.unary_unary is None or not path.startswith(SERVICE):
            return handler
        method = path.removeprefix(SERVICE)
        inner = handler.unary_unary

        def counted(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return faulted(request, context)
            finally:
                with self._finished:
                    self.done[method] = self.done.get(method, 0) + 1
                    self._finished.notify_all()

        def faulted(request: Any, context: grpc.ServicerContext) -> Any:
            fault = self._take(method)
            if fault is None:
                return inner(request, context)
            if fault.kind == "unimplemented":
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
            if fault.kind == "before":
                context.abort(grpc.StatusCode.UNAVAILABLE, REFUSED_TEXT)
            answer = inner(request, context)
            with self._lock:
                self.applied[method] = self.applied.get(method, 0) + 1
            if fault.then is not None:
                fault.then()
            context.abort(grpc.StatusCode.UNAVAILABLE, REFUSED_TEXT)
            return answer  # not reached: abort raises

        return grpc.unary_unary_rpc_method_handler(
            counted,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class StagingWriteFaults(ForwardingStore):
    """inner, except that while armed every write of a staged value (a key under ``key/``)
    raises Unavailable with Cassandra's "connection refused" text: after applying it
    (`applied`), as when the store answers wrongly after the write landed, or without."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed: bool | None = None  # None: off; else whether the write lands first
        self.faulted = 0

    def arm(self, applied: bool) -> None:
        self.armed = applied

    def disarm(self) -> None:
        self.armed = None

    def _fault(self, keys: Sequence[bytes], write: Callable[[], None]) -> None:
        armed = self.armed
        if armed is None or not any(key.startswith(b"key/") for key in keys):
            write()
            return
        if armed:
            write()
        self.faulted += 1
        raise Unavailable("Cassandra: Unable to connect to any servers: connection refused")

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self._fault([key], lambda: self.inner.set(partition, key, value))

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        self._fault([key for key, _ in puts], lambda: self.inner.apply(partition, puts, deletes, condition, timestamp))
