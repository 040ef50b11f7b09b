"""Server limits (silt/rpc/limits.py) on a real gRPC server: a call whose request never comes
is cancelled after the receive timeout, so stalled callers cannot keep the workers; calls past
max_concurrent_rpcs are refused at once instead of queueing; stalled calls beyond their peer's
budget are cancelled after the grace, and sooner from a peer that stalls calls; the plaintext
health port (grpc.aio) answers probes whatever other peers hold open."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import HealthServicer

from silt.rpc import limits as limits_module
from silt.rpc.health_port import HealthPort
from silt.rpc.limits import Budget, DeliveryDelays, ServerLimits, Suspects, _Watchdog, peer_address
from silt.rpc.server import bind, build_server
from tests.support.wait import wait_until

ECHO = "/test.Limits/Echo"
CHECK = "/grpc.health.v1.Health/Check"


class Arrivals(grpc.ServerInterceptor):
    """Counts the calls the server has taken: gRPC looks up a call's handler, through its
    interceptors, when it admits the call (past max_concurrent_rpcs it refuses it instead)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        with self._lock:
            self.count += 1
        return continuation(details)


class Running:
    def __init__(self, limits: ServerLimits) -> None:
        self.arrivals = Arrivals()
        self.server = build_server([self.arrivals], limits=limits)

        def echo(request: StringValue, context: Any) -> StringValue:
            return request

        handler = grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
        )
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Limits", {"Echo": handler})])
        self.address = f"127.0.0.1:{bind(self.server, '127.0.0.1:0')}"
        self.server.start()
        self.release = threading.Event()
        self.channels: list[grpc.Channel] = []

    def channel(self) -> grpc.Channel:
        channel = grpc.insecure_channel(self.address)
        self.channels.append(channel)
        return channel

    def stall(self, count: int) -> list[Any]:
        """Calls that start and never send their request (until released)."""

        def never_sends() -> Iterator[StringValue]:
            self.release.wait(30)
            return
            yield StringValue()

        channel = self.channel()
        grpc.channel_ready_future(channel).result(timeout=5)
        calls: list[Any] = []
        taken = self.arrivals.count
        for _ in range(count):
            call = channel.stream_unary(
                ECHO, request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
            )
            calls.append(call.future(never_sends(), timeout=30))
        wait_until(lambda: self.arrivals.count >= taken + count, 10, "the stalled calls reaching the server")
        return calls

    def echo(self, value: str, timeout: float) -> str:
        call = self.channel().unary_unary(
            ECHO, request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
        )
        return str(call(StringValue(value=value), timeout=timeout).value)

    def close(self) -> None:
        self.release.set()
        for channel in self.channels:
            channel.close()
        self.server.stop(None)


@pytest.fixture
def running(request: pytest.FixtureRequest) -> Iterator[Running]:
    server = Running(request.param)
    yield server
    server.close()


@pytest.mark.parametrize(
    "running", [ServerLimits(max_workers=2, max_concurrent_rpcs=16, receive_timeout_seconds=0.5)], indirect=True
)
def test_a_call_whose_request_never_comes_is_cancelled_and_frees_its_worker(running: Running) -> None:
    stalled = running.stall(4)  # twice the workers
    started = time.monotonic()
    assert running.echo("hello", timeout=5) == "hello"
    assert time.monotonic() - started < 3.0
    for call in stalled:
        error = call.exception(timeout=5)
        assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.CANCELLED


@pytest.mark.parametrize(
    "running", [ServerLimits(max_workers=2, max_concurrent_rpcs=3, receive_timeout_seconds=20)], indirect=True
)
def test_calls_past_the_concurrency_limit_are_refused_at_once(running: Running) -> None:
    stalled = running.stall(3)  # kept: a call whose future is collected is cancelled
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as refused:
        running.echo("one too many", timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not any(call.done() for call in stalled)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("running", [ServerLimits()], indirect=True)
def test_requests_arriving_normally_are_served(running: Running) -> None:
    assert [running.echo(str(i), timeout=5) for i in range(20)] == [str(i) for i in range(20)]


# --- who waits for a request, and how long ---------------------------------------------------


def test_a_peer_is_its_address_without_the_port() -> None:
    # One machine opens connections from as many ports as it likes: they are one peer.
    assert peer_address("ipv4:10.1.2.3:51234") == peer_address("ipv4:10.1.2.3:40000") == "10.1.2.3"
    # An IPv6 host is usually given a /64; a mapped IPv4 address is that address.
    assert peer_address("ipv6:[2001:db8:1:2:aaaa::1]:443") == "2001:db8:1:2::/64"
    assert peer_address("ipv6:[2001:db8:1:2:bbbb::9]:80") == "2001:db8:1:2::/64"
    assert peer_address("ipv6:[::ffff:10.1.2.3]:5") == "10.1.2.3"
    assert peer_address("unix:/run/silt.sock") == "unix"


class _Call:
    def __init__(self, peer: str) -> None:
        self.peer = peer


def test_a_full_budget_cancels_the_oldest_slow_call_of_the_peer_holding_the_most() -> None:
    budget: Budget[_Call] = Budget(per_peer=2, total=3)
    a1, a2, a3, b1, c1 = _Call("a"), _Call("a"), _Call("a"), _Call("b"), _Call("c")
    assert budget.admit(a1) is None and budget.admit(a2) is None
    assert budget.admit(a3) is a1  # a holds its two: its oldest makes room
    assert budget.admit(b1) is None  # three in all
    assert budget.admit(c1) is a2  # the server is full: the oldest of a, which holds the most
    assert (budget.held_by("a"), budget.held_by("b"), budget.held_by("c"), budget.count) == (1, 1, 1, 3)
    budget.release(b1)
    assert budget.held_by("b") == 0 and budget.count == 2


def test_a_peer_stalling_calls_is_suspect_unless_its_late_calls_authenticate() -> None:
    suspects = Suspects(stalls=3, window=10)
    for _ in range(2):
        suspects.stalled("mallory", 0)
    assert not suspects.suspect("mallory", 1)
    suspects.stalled("mallory", 1)
    assert suspects.suspect("mallory", 2)
    assert suspects.suspect("mallory", 15)  # the window before counts too
    assert not suspects.suspect("mallory", 25)  # forgotten two windows later
    assert not suspects.suspect("nobody", 25)
    # A peer overloading the server with large requests: some were cancelled, but its late
    # calls that arrived were authenticated.
    for _ in range(5):
        suspects.stalled("gateway", 30)
    suspects.vouched("gateway", 30)
    assert not suspects.suspect("gateway", 31)


STALLING = ServerLimits(
    max_workers=4,
    max_concurrent_rpcs=64,
    receive_grace_seconds=0.2,
    receive_timeout_seconds=30,
    slow_calls_per_peer=1,
    slow_calls=1,
    stalls_to_suspect=1000,
)


@pytest.mark.parametrize("running", [STALLING], indirect=True)
def test_stalled_calls_past_the_budget_are_cancelled_after_the_grace_and_free_their_workers(
    running: Running,
) -> None:
    stalled = running.stall(6)  # more than the workers, from one peer with one slow slot
    wait_until(lambda: sum(call.done() for call in stalled) >= 5, 10, "five stalled calls cancelled")
    # Deliberate: the one left must outlast its grace (0.2 s), twice over, to show it keeps the
    # slot; nothing happens that a test could wait for.
    time.sleep(0.4)
    ended = [call for call in stalled if call.done()]
    assert len(ended) == 5, "one stalled call keeps the peer's slot until the receive timeout"
    for call in ended:
        error = call.exception()
        assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.CANCELLED
    started = time.monotonic()
    assert running.echo("still served", timeout=5) == "still served"
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "running", [ServerLimits(receive_grace_seconds=0.1, receive_timeout_seconds=10)], indirect=True
)
def test_a_request_arriving_after_the_grace_is_served_while_its_peer_has_a_slot(running: Running) -> None:
    def late() -> Iterator[StringValue]:
        # Deliberate: the request must come after the grace (0.1 s) has run out, with room for
        # the watchdog to wake; the server shows no sign of a call having become slow.
        time.sleep(0.3)
        yield StringValue(value="late")

    call = running.channel().stream_unary(
        ECHO, request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
    )
    assert call(late(), timeout=5).value == "late"


SUSPICIOUS = ServerLimits(
    max_workers=8,
    receive_grace_seconds=1.0,
    suspect_grace_seconds=0.05,
    stalls_to_suspect=2,
    receive_timeout_seconds=30,
    slow_calls_per_peer=1,
    slow_calls=1,
)


@pytest.mark.parametrize("running", [SUSPICIOUS], indirect=True)
def test_a_peer_whose_calls_stalled_gets_the_short_grace(running: Running) -> None:
    first = running.stall(3)
    # Past the long grace: one holds the slot, two were cancelled.
    wait_until(lambda: sum(call.done() for call in first) >= 2, 10, "two of the first calls cancelled")
    assert sum(call.done() for call in first) == 2
    opened = time.monotonic()
    second = running.stall(2)  # the peer is suspect now: 50 ms for its requests to arrive
    wait_until(lambda: sum(call.done() for call in first + second) >= 4, 10, "the second calls cancelled")
    assert time.monotonic() - opened < 1.0, "the long grace would still be running"
    assert sum(call.done() for call in first + second) == 4


def test_delivery_delays_remember_the_longest_over_the_last_window() -> None:
    delays = DeliveryDelays(window=1.0)
    assert delays.recent(10.0) == 0.0
    delays.add(0.05, 10.0)
    delays.add(0.01, 10.5)
    assert delays.recent(10.9) == 0.05
    assert delays.recent(11.5) == 0.05  # the window before still counts
    delays.add(0.02, 11.6)
    assert delays.recent(12.2) == 0.02  # the 50 ms one is two windows old
    assert delays.recent(14.5) == 0.0


class _Context:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def test_an_idle_watchdog_ends_its_thread_and_the_next_call_starts_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that builds server after server (a test run, a restart in place) must not keep
    a watchdog thread for each: with nothing left to watch the thread ends, and a call after that
    is watched by a new one, which still cancels it at its deadline."""
    monkeypatch.setattr(limits_module, "IDLE_EXIT_SECONDS", 0.2)
    limits = ServerLimits(receive_grace_seconds=0.1, suspect_grace_seconds=0.1, receive_timeout_seconds=0.3)
    watchdog = _Watchdog(limits)
    budget: Budget[Any] = Budget(8, 8)
    first = watchdog.watch(_Context(), "10.0.0.1", budget)  # type: ignore[arg-type]
    thread = watchdog._thread
    assert thread is not None and thread.is_alive()
    watchdog.arrived(first)
    thread.join(5)
    assert not thread.is_alive() and watchdog._thread is None
    context = _Context()
    watchdog.watch(context, "10.0.0.1", budget)  # type: ignore[arg-type]
    again = watchdog._thread
    assert again is not None and again is not thread and again.is_alive()
    wait_until(lambda: context.cancelled, 5, "the stalled call cancelled at its deadline")
    again.join(5)
    assert not again.is_alive()


def test_a_suspect_peers_grace_grows_with_how_long_requests_take_to_arrive() -> None:
    """On a loaded server honest requests take longer to arrive: a suspect peer's honest calls
    must still arrive within their grace, so the short grace follows the delays measured, up to
    the long grace; a call that never sent its request is not measured."""
    now = [100.0]
    limits = ServerLimits()
    watchdog = _Watchdog(limits, clock=lambda: now[0])
    watchdog._thread = threading.Thread()  # never started: the test moves the clock itself
    budget: Budget[Any] = Budget(8, 8)
    for _ in range(limits.stalls_to_suspect):
        watchdog._suspects.stalled("10.0.0.9", now[0])

    def grace(peer: str) -> float:
        ticket = watchdog.watch(object(), peer, budget)  # type: ignore[arg-type]
        return ticket.grace_until - ticket.started

    assert grace("10.0.0.9") == pytest.approx(limits.suspect_grace_seconds)
    assert grace("10.0.0.1") == pytest.approx(limits.receive_grace_seconds)
    never_sent = watchdog.watch(object(), "10.0.0.2", budget)  # type: ignore[arg-type]
    honest = watchdog.watch(object(), "10.0.0.1", budget)  # type: ignore[arg-type]
    now[0] += 0.06
    watchdog.arrived(never_sent, received=False)
    assert grace("10.0.0.9") == pytest.approx(limits.suspect_grace_seconds)
    assert watchdog.arrived(honest) is False
    assert grace("10.0.0.9") == pytest.approx(0.24)
    slowest = watchdog.watch(object(), "10.0.0.1", budget)  # type: ignore[arg-type]
    now[0] += 0.3
    watchdog.arrived(slowest)
    assert grace("10.0.0.9") == pytest.approx(limits.receive_grace_seconds)
    now[0] += 2.5  # two windows on, the server is quick again
    assert grace("10.0.0.9") == pytest.approx(limits.suspect_grace_seconds)


def test_the_health_port_answers_probes_while_others_stall_checks() -> None:
    health = HealthServicer()
    # The checks holding the two slots stay stalled for the whole test (receive timeout past it):
    # on a loaded machine the 100 calls arrive over seconds, and a holder cancelled at the default
    # 2 s would hand its slot to a late arrival, which then is not refused.
    limits = ServerLimits(receive_grace_seconds=0.2, receive_timeout_seconds=30, slow_calls_per_peer=2, slow_calls=8)
    port = HealthPort(health, limits)
    address = f"127.0.0.1:{port.start('127.0.0.1:0')}"
    release = threading.Event()

    def never_sends() -> Iterator[bytes]:
        release.wait(30)
        return
        yield b""

    channels = [grpc.insecure_channel(address) for _ in range(10)]
    try:
        stalled = [
            channels[i % 10]
            .stream_unary(CHECK, request_serializer=bytes, response_deserializer=bytes)
            .future(never_sends(), timeout=30)
            for i in range(100)
        ]
        wait_until(lambda: sum(call.done() for call in stalled) >= 98, 10, "the stalled checks past the slots refused")
        with grpc.insecure_channel(address) as probe:
            stub = health_pb2_grpc.HealthStub(probe)
            started = time.monotonic()
            reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=2)  # type: ignore[attr-defined]
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            assert time.monotonic() - started < 1.0
            with pytest.raises(grpc.RpcError) as unknown:
                stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=2)  # type: ignore[attr-defined]
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
            other: Any = probe.unary_unary("/silt.auth.v1.AuthService/WhoAmI")
            with pytest.raises(grpc.RpcError) as unimplemented:
                other(b"", timeout=2)
            assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # Past the peer's two slots, stalled checks were refused as soon as newer ones needed room.
        codes = [getattr(call.exception(timeout=0), "code", lambda: None)() for call in stalled if call.done()]
        assert len(codes) == 98 and set(codes) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    finally:
        release.set()
        for channel in channels:
            channel.close()
        assert port.stop(None).wait(5)


@pytest.mark.parametrize("running", [ServerLimits()], indirect=True)
def test_a_second_server_cannot_bind_a_port_a_server_listens_on(running: Running) -> None:
    # gRPC's default SO_REUSEPORT would let both bind and split connections between them, so
    # a client of one could be answered "Method not found" by the other.
    port = int(running.address.rsplit(":", 1)[1])
    other = build_server()
    with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:"):
        bind(other, f"127.0.0.1:{port}")
    other.stop(grace=None)
    health = HealthPort(HealthServicer())
    with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:"):
        health.start(f"127.0.0.1:{port}")
    health.stop().wait(5)
