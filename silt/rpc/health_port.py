"""The plaintext health port: ``grpc.health.v1.Health/Check`` and nothing else, for probes
that cannot speak TLS (Kubernetes' gRPC probe), served by grpc.aio on a thread of its own.

On grpc.aio a call waiting for its request is a coroutine, not a worker thread: a peer that
opens calls and never sends their request takes no thread from the probes. Such calls are still
bounded, as on every port (silt/rpc/limits.py): a Check whose request has not come within the
grace takes a slot of its peer's budget (when the peer or the port has none left, the oldest
slow Check of the peer holding the most is cancelled to make room) and is cancelled at the
receive timeout. A probe sends its request with the call, so it is answered whatever other
peers hold open; past ``max_concurrent_rpcs`` calls in flight, RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2
from grpc_health.v1.health import HealthServicer

from silt.rpc.limits import HEALTH_PORT_LIMITS, HEALTH_SERVICE, Budget, ServerLimits, peer_address


class _Waiter:
    """A Check waiting for its request; slow while it holds a slot of the budget."""

    __slots__ = ("peer", "read", "slow")

    def __init__(self, peer: str, read: asyncio.Future[Any]) -> None:
        self.peer = peer
        self.read = read
        self.slow = False


class HealthPort:
    """start(address) serves health's Check on address, plaintext; stop() ends it."""

    def __init__(self, health: HealthServicer, limits: ServerLimits = HEALTH_PORT_LIMITS) -> None:
        self._health = health
        self._limits = limits
        self._budget: Budget[_Waiter] = Budget(limits.slow_calls_per_peer, limits.slow_calls)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpc.aio.Server | None = None

    def start(self, address: str) -> int:
        """Listen on address (host:port; port 0 picks a free one); return the port."""
        loop = self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._serve, args=(loop,), name="grpc-health-port", daemon=True).start()
        try:
            return asyncio.run_coroutine_threadsafe(self._start(address), loop).result(timeout=30)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            raise

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _start(self, address: str) -> int:
        server = grpc.aio.server(
            options=self._limits.options(), maximum_concurrent_rpcs=self._limits.max_concurrent_rpcs
        )
        check = grpc.stream_unary_rpc_method_handler(
            self._check,
            request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(HEALTH_SERVICE, {"Check": check})])
        try:
            port = server.add_insecure_port(address)
        except RuntimeError:
            port = 0
        if port == 0:
            raise OSError(f"cannot listen on {address}: the address is in use or not this host's")
        await server.start()
        self._server = server
        return port

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop serving (calls in flight get grace seconds); the event is set once stopped."""
        stopped = threading.Event()
        loop, server = self._loop, self._server
        if loop is None or server is None:
            stopped.set()
            return stopped

        def finished(_: Any) -> None:
            loop.call_soon_threadsafe(loop.stop)
            stopped.set()

        asyncio.run_coroutine_threadsafe(server.stop(grace), loop).add_done_callback(finished)
        return stopped

    async def _check(
        self, _requests: AsyncIterator[health_pb2.HealthCheckRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> health_pb2.HealthCheckResponse:
        request = await self._receive(context)
        # Check only sets a code on the context (NOT_FOUND), which the aio context does as well.
        response: health_pb2.HealthCheckResponse = self._health.Check(request, context)  # type: ignore[arg-type]
        return response

    async def _receive(self, context: grpc.aio.ServicerContext[Any, Any]) -> health_pb2.HealthCheckRequest:
        """The call's request, read under the grace, the budget and the receive timeout."""
        limits = self._limits
        read = asyncio.ensure_future(context.read())
        # An ended call fails its read; that is no news, so asyncio need not log it.
        read.add_done_callback(lambda future: future.cancelled() or future.exception())
        waiter = _Waiter(peer_address(context.peer()), read)
        try:
            done, _ = await asyncio.wait((waiter.read,), timeout=limits.receive_grace_seconds)
            if not done:
                victim = self._budget.admit(waiter)
                waiter.slow = True
                if victim is not None:
                    victim.slow = False
                    victim.read.cancel()
                try:
                    remaining = max(limits.receive_timeout_seconds - limits.receive_grace_seconds, 0.0)
                    done, _ = await asyncio.wait((waiter.read,), timeout=remaining)
                finally:
                    if waiter.slow:
                        waiter.slow = False
                        self._budget.release(waiter)
            if not done:
                read.cancel()
                await context.abort(grpc.StatusCode.CANCELLED, "the request did not arrive in time")
            if read.cancelled():
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"too many health checks from {waiter.peer} are waiting for their request",
                )
            request = read.result()
        finally:
            if not read.done():
                read.cancel()
        if request is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        assert isinstance(request, health_pb2.HealthCheckRequest)
        return request
