"""What a caller without credentials can make a gRPC server spend: bounded, so that nobody
can hang a service's port before authentication.

grpcio's synchronous server runs every call on a worker thread from the moment it starts,
including the wait for the request message, and serves at most ``max_workers`` calls at once.
Left alone, that lets anyone who reaches the port take every worker: by opening
``Health/Watch`` streams (each held a worker for as long as it stayed open), or by starting
calls whose request never comes. So:

* **Health answers Check only**, with no interceptor around it: ``Watch`` is not registered
  (Kubernetes' probes and ``silt doctor`` use Check), so it is refused before any worker runs.
* **Unsigned calls are refused before their request is read**: a call that lacks the signature
  headers is answered UNAUTHENTICATED at once, without waiting for its message.
* **A request must arrive within ``receive_timeout``** of the call's start, or the call is
  cancelled: a stalled caller holds a worker only that long.
* **At most ``max_concurrent_rpcs`` calls at a time**; past that, RESOURCE_EXHAUSTED at once
  instead of an unbounded queue.
* **Requests larger than the API needs are refused by gRPC itself** (RESOURCE_EXHAUSTED)
  before they are parsed, per service (``max_receive_bytes``).
* **Connections**: idle ones are closed, dead peers are found by keepalive pings, and a
  handshake has a deadline. (No per-connection stream cap: a client opening more streams than
  the cap before it hears of it gets them reset, and the bound that matters is per server.)

With ``tls.require_client_cert`` (the prod overlay), a peer without a certificate from Silt's
CA cannot even open a connection; these bounds are what remains for a peer that can.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

log = logging.getLogger(__name__)

HEALTH_SERVICE = "grpc.health.v1.Health"

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class ServerLimits:
    """Bounds of one gRPC server; the defaults fit Silt's services (each passes its message size)."""

    max_workers: int = 32
    # Calls beyond the workers wait in the executor's queue; beyond this many, refused at once.
    max_concurrent_rpcs: int = 128
    # Largest request accepted. Silt's requests are names, entries (graveler caps one at
    # 64 KiB) and bounded lists (1,000 resources of 1 KiB in AuthorizeMany, 100 policy
    # statements, 1,000 retention rules): a few MiB at most.
    max_receive_bytes: int = 4 * MiB
    # Responses are pages capped at 8 MiB (services/graveler/paging.py) plus their framing.
    max_send_bytes: int = 64 * MiB
    receive_timeout_seconds: float = 10.0
    idle_connection_seconds: float = 300.0
    keepalive_seconds: float = 60.0
    keepalive_timeout_seconds: float = 20.0
    handshake_timeout_seconds: float = 20.0

    def options(self) -> list[tuple[str, Any]]:
        return [
            ("grpc.max_receive_message_length", self.max_receive_bytes),
            ("grpc.max_send_message_length", self.max_send_bytes),
            # A connection without calls for this long is closed (clients reconnect on their
            # next call), so idle connections cannot pile up.
            ("grpc.max_connection_idle_ms", int(self.idle_connection_seconds * 1000)),
            # The server pings every connection; a peer that stops answering is dropped with its calls.
            ("grpc.keepalive_time_ms", int(self.keepalive_seconds * 1000)),
            ("grpc.keepalive_timeout_ms", int(self.keepalive_timeout_seconds * 1000)),
            ("grpc.server_handshake_timeout_ms", int(self.handshake_timeout_seconds * 1000)),
        ]


DEFAULT_LIMITS = ServerLimits()
# Per service: the largest request each API takes.
AUTH_LIMITS = ServerLimits(max_receive_bytes=4 * MiB)
GRAVELER_LIMITS = ServerLimits(max_receive_bytes=4 * MiB)
# Trigger and GetStatus carry a repository and a branch name.
COMPACTOR_LIMITS = ServerLimits(max_receive_bytes=64 * KiB)
# The plaintext health port: a HealthCheckRequest names a service.
HEALTH_PORT_LIMITS = ServerLimits(
    max_workers=2, max_concurrent_rpcs=16, max_receive_bytes=4 * KiB, max_send_bytes=4 * KiB
)


def is_health(method: str) -> bool:
    return method.startswith(f"/{HEALTH_SERVICE}/")


def health_check_handler(check: Callable[[Any, grpc.ServicerContext], Any]) -> grpc.GenericRpcHandler:
    """grpc.health.v1.Health with Check only: Watch is answered UNIMPLEMENTED by gRPC itself."""
    return grpc.method_handlers_generic_handler(
        HEALTH_SERVICE,
        {
            "Check": grpc.unary_unary_rpc_method_handler(
                check,
                request_deserializer=health_pb2.HealthCheckRequest.FromString,
                response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
            )
        },
    )


class _Watchdog:
    """One thread for a server: cancels each call whose request has not arrived by its deadline.

    The timeout is the same for every call, so deadlines come in order and a deque suffices.
    """

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._timeout = timeout
        self._clock = clock
        # [deadline, context or None once the request arrived]
        self._pending: collections.deque[list[Any]] = collections.deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, context: grpc.ServicerContext) -> list[Any]:
        ticket = [self._clock() + self._timeout, context]
        with self._wake:
            self._pending.append(ticket)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="grpc-receive-watchdog", daemon=True)
                self._thread.start()
            elif len(self._pending) == 1:
                self._wake.notify()
        return ticket

    @staticmethod
    def arrived(ticket: list[Any]) -> None:
        ticket[1] = None  # the watchdog skips it and the context is not kept alive

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending:
                    self._wake.wait()
                deadline, context = self._pending[0]
                wait = deadline - self._clock()
                if wait > 0 and context is not None:
                    self._wake.wait(wait)
                    continue
                self._pending.popleft()
            if context is not None:
                log.info("cancelled a call whose request did not arrive within %.0f s", self._timeout)
                context.cancel()


class AdmissionInterceptor(grpc.ServerInterceptor):
    """Outermost interceptor: reads each call's request under a deadline, and refuses unsigned
    calls before reading anything.

    It turns every unary-request handler into a streaming-request one. gRPC waits for a unary
    request on the worker thread with no way out; a streaming-request handler gets the call's
    context first, so the watchdog can cancel it, and can refuse a call without reading it.
    """

    def __init__(self, receive_timeout: float, required_headers: Collection[str] = ()) -> None:
        self._watchdog = _Watchdog(receive_timeout)
        self._required = frozenset(required_headers)

    def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None or handler.request_streaming:
            return handler  # unknown methods are refused by gRPC without a worker
        method: str = details.method
        if self._required and not is_health(method):
            present = {key for key, _ in details.invocation_metadata or ()}
            missing = sorted(self._required - present)
            if missing:
                return _refusal(handler, f"missing credentials ({', '.join(missing)}): sign calls with an access key")
        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(
                self._stream(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_unary_rpc_method_handler(
            self._unary(handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _receive(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        """The call's one request; ends the call when it does not come."""
        ticket = self._watchdog.watch(context)
        try:
            return next(requests)
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        except grpc.RpcError:
            # Cancelled, by the watchdog or by the client: nobody reads this status.
            context.abort(grpc.StatusCode.CANCELLED, "the request did not arrive in time")
        finally:
            self._watchdog.arrived(ticket)

    def _unary(self, behavior: Callable[[Any, Any], Any]) -> Callable[[Iterator[Any], Any], Any]:
        def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            return behavior(self._receive(requests, context), context)

        return handle

    def _stream(self, behavior: Callable[[Any, Any], Iterator[Any]]) -> Callable[[Iterator[Any], Any], Iterator[Any]]:
        def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            yield from behavior(self._receive(requests, context), context)

        return handle


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler that answers UNAUTHENTICATED without reading the request."""

    def refuse(_requests: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    factory = (
        grpc.stream_stream_rpc_method_handler if handler.response_streaming else grpc.stream_unary_rpc_method_handler
    )
    return factory(
        refuse, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )
