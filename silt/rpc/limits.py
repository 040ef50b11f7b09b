"""What a caller without credentials can make a gRPC server spend: bounded, so that nobody
can hang a service's port before authentication.

grpcio's synchronous server runs every call on a worker thread from the moment it starts,
including the wait for the request message, and serves at most ``max_workers`` calls at once.
Left alone, that lets anyone who reaches the port take every worker: by opening
``Health/Watch`` streams (each held a worker for as long as it stayed open), or by starting
calls whose request never comes. A signature covers the request, so nothing can tell an
honest call from a forged one before the request has arrived. So:

* **Health answers Check only**, with no interceptor around it: ``Watch`` is not registered
  (Kubernetes' probes and ``silt doctor`` use Check), so it is refused before any worker runs.
* **Calls that cannot be signed are refused before their request is read**: on a server that
  authenticates, a call whose signature headers are missing or malformed (key id shape, date
  within the clock skew, scope of that day and of this service, nonce, signature length) is
  answered UNAUTHENTICATED at once, without waiting for its message.
* **Waiting for a request is budgeted per peer address.** Honest clients send a unary
  request together with its headers, so it is read within milliseconds (tens under load). A
  call whose request has not come within ``receive_grace`` is *slow* and takes a slot of its
  budget: ``slow_calls_per_peer`` per peer address, ``slow_calls`` per server. With no slot
  left, the oldest slow call of the peer holding the most is cancelled to make room (see
  ``Budget``); a slow call is cancelled ``receive_timeout`` after it started. A peer whose
  calls stalled repeatedly gets ``suspect_grace`` instead (see ``Suspects``). Health checks
  have their own budget (``slow_health_checks``), so a flood of stalled Checks takes nothing
  from signed calls nor from probes of other peers. Nothing is refused for its peer before its
  grace, so a signed call from the machine a flood comes from is still read and judged by its
  signature. The peer is the address without its port (a port costs an attacker nothing; an
  IPv6 address is taken as its /64): see ``peer_address``.
* **At most ``max_concurrent_rpcs`` calls at a time**; past that, RESOURCE_EXHAUSTED at once
  instead of an unbounded queue.
* **Requests larger than the API needs are refused by gRPC itself** (RESOURCE_EXHAUSTED)
  before they are parsed, per service (``max_receive_bytes``).
* **Connections**: idle ones are closed, dead peers are found by keepalive pings, and a
  handshake has a deadline. (No per-connection stream cap: a client opening more streams than
  the cap before it hears of it gets them reset, and the bound that matters is per server.)

So stalled calls hold at most ``slow_calls + slow_health_checks`` workers past the grace, and
one peer at most ``slow_calls_per_peer`` of them; a peer can occupy more only by opening calls
at a rate of (free workers / grace) per second, about 1,100 a second once it is suspect: a
flood, the rate at which the server answers calls at all. The plaintext health port runs on
grpc.aio instead (silt/rpc/health_port.py), where a waiting call holds no thread at all.

With ``tls.require_client_cert`` (the prod overlay), a peer without a certificate from Silt's
CA cannot even open a connection; these bounds are what remains for a peer that can.
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import grpc
from grpc_health.v1 import health_pb2

from silt.grpc_handlers import HandlerInterceptor, reading_requests, refusal

log = logging.getLogger(__name__)

HEALTH_SERVICE = "grpc.health.v1.Health"

KiB = 1024
MiB = 1024 * KiB

# Checks the signature headers of a call before its request is read; raises an exception
# whose message says what is wrong (silt/rpc/interceptor.py AuthInterceptor.check_headers).
HeaderCheck = Callable[[Sequence[Any]], object]


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
    # Responses are pages capped at 8 MiB (engine/core/paging.py) plus their framing.
    max_send_bytes: int = 64 * MiB
    # A call's request may take this long to arrive before the call counts as slow: an honest
    # unary request is sent with the call's headers and is read within milliseconds (a few MiB
    # under load, well within this).
    receive_grace_seconds: float = 0.5
    # The grace of a peer that stalled stalls_to_suspect calls within suspect_seconds (its
    # calls were cancelled for want of a request): its honest calls still arrive in time. At
    # least SUSPECT_GRACE_FACTOR times the delays requests have now, up to receive_grace_seconds.
    suspect_grace_seconds: float = 0.02
    stalls_to_suspect: int = 8
    suspect_seconds: float = 10.0
    # A slow call is cancelled this long after it started: 4 MiB within a cluster take well
    # under a second.
    receive_timeout_seconds: float = 2.0
    # Slow calls allowed to wait at once, from one peer address and in all (a quarter of the
    # workers); past that, the oldest of the peer holding most is cancelled (see Budget).
    slow_calls_per_peer: int = 8
    slow_calls: int = 8
    # The same for grpc.health.v1.Health/Check (a request of a few bytes), per peer and in all.
    slow_health_checks: int = 2
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
            # gRPC sets SO_REUSEPORT by default, so a second server binding a port another already
            # listens on succeeds, and the kernel then splits connections between the two: a
            # client of one gets the other's "Method not found". Without it the second bind fails.
            ("grpc.so_reuseport", 0),
        ]


DEFAULT_LIMITS = ServerLimits()
# Per service: the largest request each API takes.
AUTH_LIMITS = ServerLimits(max_receive_bytes=4 * MiB)
GRAVELER_LIMITS = ServerLimits(max_receive_bytes=4 * MiB)
# Trigger and GetStatus carry a repository and a branch name.
COMPACTOR_LIMITS = ServerLimits(max_receive_bytes=64 * KiB)
# The plaintext health port (grpc.aio, silt/rpc/health_port.py; no worker threads): a
# HealthCheckRequest names a service. A waiting call there costs a coroutine, not a thread, so
# many may be in flight; every call is a health check, under slow_calls_per_peer / slow_calls.
HEALTH_PORT_LIMITS = ServerLimits(
    max_concurrent_rpcs=1024,
    max_receive_bytes=4 * KiB,
    max_send_bytes=4 * KiB,
    slow_calls_per_peer=2,
    slow_calls=64,
)


def is_health(method: str) -> bool:
    return method.startswith(f"/{HEALTH_SERVICE}/")


def health_check_handler(check: Callable[[Any, Any], Any]) -> grpc.GenericRpcHandler:
    """grpc.health.v1.Health with Check only: Watch is answered UNIMPLEMENTED by gRPC itself.
    check may be a function or, for a grpc.aio server, a coroutine function."""
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


def peer_address(peer: str) -> str:
    """Whom a call's budget is counted for, from ``context.peer()``: the address without the
    port, since one machine opens connections from as many ports as it likes. An IPv6 address
    counts as its /64, the block one host is usually given; an IPv4-mapped one as the IPv4
    address. Anything else (a Unix socket) is one peer per kind."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return kind
    host = rest.rpartition(":")[0] or rest
    host = host.strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class Waiter(Protocol):
    peer: str


_W = TypeVar("_W", bound=Waiter)


class Budget(Generic[_W]):
    """The slow calls (waiting for their request past the grace) a server lets wait at once:
    ``per_peer`` from one peer address, ``total`` in all.

    A call that becomes slow always gets a slot. When its peer already holds ``per_peer``, the
    peer's oldest slow call makes room; when the server holds ``total``, the oldest slow call
    of the peer holding the most does. An honest request arrives soon after it became slow; a
    stalled call never does, so the oldest slow calls are the stalled ones, and a flood of them
    from one peer cycles through that peer's slots without taking slots from anybody else.

    Not locked: the watchdog uses it under its own lock, the health port from its event loop.
    """

    def __init__(self, per_peer: int, total: int) -> None:
        if per_peer < 1 or total < 1:
            raise ValueError("a budget needs at least one slot per peer and in all")
        self.per_peer = per_peer
        self.total = total
        self.count = 0
        self._by_peer: dict[str, list[_W]] = {}  # each peer's slow calls, oldest first

    def admit(self, waiter: _W) -> _W | None:
        """Give waiter a slot; return the call that lost its slot for it (to cancel), if any."""
        mine = self._by_peer.get(waiter.peer, [])
        victim = None
        if len(mine) >= self.per_peer:
            victim = mine[0]
        elif self.count >= self.total:
            victim = max(self._by_peer.values(), key=len)[0]
        if victim is not None:
            self.release(victim)
        self._by_peer.setdefault(waiter.peer, []).append(waiter)
        self.count += 1
        return victim

    def release(self, waiter: _W) -> None:
        """waiter's slot is free (its request arrived, or it was cancelled)."""
        mine = self._by_peer[waiter.peer]
        mine.remove(waiter)
        if not mine:
            del self._by_peer[waiter.peer]
        self.count -= 1

    def held_by(self, peer: str) -> int:
        return len(self._by_peer.get(peer, ()))


class _Ticket:
    """A call waiting for its request. context is None once the request arrived or the call
    was cancelled; slow while it holds a slot of its budget."""

    __slots__ = ("budget", "context", "grace_until", "peer", "slow", "started", "until")

    def __init__(
        self, context: Any, peer: str, budget: Budget[_Ticket], started: float, grace_until: float, until: float
    ) -> None:
        self.context = context
        self.peer = peer
        self.budget = budget
        self.started = started
        self.grace_until = grace_until
        self.until = until
        self.slow = False


class Refusals:
    """Counts calls cancelled for want of a request, by peer, and logs them at most once per
    interval (a flood must not become a flood of log lines). One thread adds."""

    MAX_PEERS = 1000

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._pending: collections.Counter[str] = collections.Counter()
        self._last = -interval

    def add(self, peer: str, reason: str) -> None:
        key = f"{peer} ({reason})"
        if key in self._pending or len(self._pending) < self.MAX_PEERS:
            self._pending[key] += 1
        now = self._clock()
        if now - self._last >= self._interval:
            self._last = now
            counts = ", ".join(f"{n} from {who}" for who, n in self._pending.most_common(5))
            log.warning("cancelled calls whose request did not arrive in time: %s", counts)
            self._pending.clear()


class Suspects:
    """Peers whose calls stalled lately: ``stalls`` or more cancelled for want of a request
    within a window of ``window`` seconds (this one or the last), while none of its calls that
    outlived the grace went on to be authenticated (``vouched``). Their calls get a short grace.

    An honest peer's calls are cancelled that way only when it sends large requests into an
    overloaded server, and then most of its slow calls still arrive and authenticate; a peer
    that stalls calls on purpose is found within its first few, and cannot vouch for itself
    without credentials. At most ``max_peers`` are remembered; past that, a new peer is not
    (it keeps the long grace, and the budgets still bound it)."""

    def __init__(self, stalls: int, window: float, max_peers: int = 10_000) -> None:
        self._stalls = stalls
        self._window = window
        self._max = max_peers
        # peer -> [start of its current window, stalls, vouched; the same in the window before]
        self._peers: dict[str, list[float]] = {}

    def _entry(self, peer: str, now: float) -> list[float] | None:
        entry = self._peers.get(peer)
        if entry is None:
            if len(self._peers) >= self._max:
                self._peers = {p: e for p, e in self._peers.items() if now - e[0] < 2 * self._window}
                if len(self._peers) >= self._max:
                    return None
            entry = self._peers[peer] = [now, 0, 0, 0, 0]
        elapsed = now - entry[0]
        if elapsed >= 2 * self._window:
            entry[:] = [now, 0, 0, 0, 0]
        elif elapsed >= self._window:
            entry[:] = [entry[0] + self._window, 0, 0, entry[1], entry[2]]
        return entry

    def stalled(self, peer: str, now: float) -> None:
        entry = self._entry(peer, now)
        if entry is not None:
            entry[1] += 1

    def vouched(self, peer: str, now: float) -> None:
        entry = self._entry(peer, now)
        if entry is not None:
            entry[2] += 1

    def suspect(self, peer: str, now: float) -> bool:
        if peer not in self._peers:
            return False
        entry = self._entry(peer, now)
        assert entry is not None
        return max(entry[1], entry[3]) >= self._stalls and entry[2] + entry[4] == 0


class DeliveryDelays:
    """How long requests take to arrive now: the longest delay among calls whose request came
    within their grace, over the last ``window`` seconds (this window and the one before).

    A stalled call never arrives, so only requests that were sent count. A peer can raise the
    figure by sending its requests late on purpose, but never past the grace its calls had, so
    never past the long grace (what every peer gets anyway)."""

    def __init__(self, window: float = 1.0) -> None:
        self._window = window
        self._start = -window
        self._current = 0.0
        self._previous = 0.0

    def _roll(self, now: float) -> None:
        elapsed = now - self._start
        if elapsed >= 2 * self._window:
            self._start, self._current, self._previous = now, 0.0, 0.0
        elif elapsed >= self._window:
            self._start, self._current, self._previous = self._start + self._window, 0.0, self._current

    def add(self, delay: float, now: float) -> None:
        self._roll(now)
        self._current = max(self._current, delay)

    def recent(self, now: float) -> float:
        self._roll(now)
        return max(self._current, self._previous)


# A watchdog waking this much later than it asked to was not running: see _Watchdog.
LATE_WAKE_SECONDS = 0.02
# A watchdog with no call to watch for this long ends its thread (the next call starts one):
# a stopped server's watchdog has nothing left to watch, and a process that builds servers
# one after another (a restart, a test run) would otherwise keep a thread for each.
IDLE_EXIT_SECONDS = 5.0
# A suspect peer's calls get at least this many times the time requests take to arrive now
# (DeliveryDelays), so that its honest calls still arrive within their grace on a loaded server.
SUSPECT_GRACE_FACTOR = 4.0


class _Watchdog:
    """One thread for a server: gives each call whose request has not arrived within its grace
    a slot of its budget (which may cancel an older slow call), and cancels a slow call at its
    deadline. Peers whose calls stalled lately get the short grace (Suspects).

    The long grace and the timeout are the same for every call, so their deadlines come in
    order and a deque per grace suffices. The short grace follows how long requests take to
    arrive now (an honest call from a suspect peer must not count as stalled because the
    server is loaded); when it shrinks, a call may wait behind an older one with a later
    deadline, which only lengthens its grace, never past the long one.

    When the watchdog itself wakes late (a garbage collection or a busy interpreter stopped
    every thread), the thread that delivers requests was held up as long: calls get that much
    longer before they count as slow, so a pause does not make honest calls look stalled.
    """

    def __init__(self, limits: ServerLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self._graces = (limits.receive_grace_seconds, limits.suspect_grace_seconds)
        self._timeout = max(limits.receive_timeout_seconds, *self._graces)
        self._clock = clock
        # Calls within their grace, one deque per grace (long, short), and slow calls.
        self._young: tuple[collections.deque[_Ticket], ...] = (collections.deque(), collections.deque())
        self._slow: collections.deque[_Ticket] = collections.deque()
        self._suspects = Suspects(limits.stalls_to_suspect, limits.suspect_seconds)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._refusals = Refusals()
        self._hold_until = 0.0  # no call becomes slow before (after the watchdog woke late)
        self._delays = DeliveryDelays()

    def _grace(self, short: bool, now: float) -> float:
        long_grace, short_grace = self._graces
        if not short:
            return long_grace
        return min(long_grace, max(short_grace, SUSPECT_GRACE_FACTOR * self._delays.recent(now)))

    def watch(self, context: grpc.ServicerContext, peer: str, budget: Budget[_Ticket]) -> _Ticket:
        with self._wake:
            now = self._clock()
            short = self._suspects.suspect(peer, now)
            ticket = _Ticket(context, peer, budget, now, now + self._grace(short, now), now + self._timeout)
            young = self._young[int(short)]
            young.append(ticket)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="grpc-receive-watchdog", daemon=True)
                self._thread.start()
            elif len(young) == 1:
                self._wake.notify()
        return ticket

    def arrived(self, ticket: _Ticket, received: bool = True) -> bool:
        """The call's request arrived (received) or the call ended; whether it had been slow."""
        with self._wake:
            arrived_in_time = received and ticket.context is not None and not ticket.slow
            ticket.context = None  # skipped from now on, and not kept alive
            slow = ticket.slow
            if slow:
                ticket.slow = False
                ticket.budget.release(ticket)
            elif arrived_in_time:
                now = self._clock()
                self._delays.add(now - ticket.started, now)
            return slow

    def vouch(self, peer: str) -> None:
        """A call of peer's that had been slow was authenticated: peer is not stalling calls."""
        with self._wake:
            self._suspects.vouched(peer, self._clock())

    def _cancel(self, ticket: _Ticket, reason: str, now: float, cancel: list[tuple[Any, str, str]]) -> None:
        cancel.append((ticket.context, ticket.peer, reason))
        ticket.context = None
        self._suspects.stalled(ticket.peer, now)

    def _expired(self, now: float) -> list[tuple[Any, str, str]]:
        """Under the lock: the calls to cancel now, after giving those past their grace a slot."""
        cancel: list[tuple[Any, str, str]] = []
        held = now < self._hold_until
        for young in self._young:
            while young and (young[0].context is None or (young[0].grace_until <= now and not held)):
                ticket = young.popleft()
                if ticket.context is None:
                    continue
                victim = ticket.budget.admit(ticket)
                ticket.slow = True
                self._slow.append(ticket)
                if victim is not None:
                    victim.slow = False
                    self._cancel(victim, "made room for a newer one", now, cancel)
        while self._slow and (self._slow[0].context is None or self._slow[0].until <= now):
            ticket = self._slow.popleft()
            if ticket.context is None:
                continue
            ticket.slow = False
            ticket.budget.release(ticket)
            self._cancel(ticket, "timeout", now, cancel)
        return cancel

    def _until_next(self, now: float) -> float | None:
        deadlines = [max(young[0].grace_until, self._hold_until) for young in self._young if young]
        if self._slow:
            deadlines.append(self._slow[0].until)
        return max(min(deadlines) - now, 0.0) if deadlines else None

    def _run(self) -> None:
        while True:
            with self._wake:
                now = self._clock()
                cancel = self._expired(now)
                if not cancel:
                    timeout = self._until_next(now)
                    if timeout is None:
                        # Nothing to watch: wait for a call, and end if none comes (watch(),
                        # under the same lock, starts a thread again when it finds none).
                        if not self._wake.wait(IDLE_EXIT_SECONDS) and self._until_next(self._clock()) is None:
                            self._thread = None
                            return
                        continue
                    if not self._wake.wait(timeout):
                        late = self._clock() - (now + timeout)
                        if late > LATE_WAKE_SECONDS:
                            self._hold_until = self._clock() + min(late, self._timeout)
                    continue
            for context, peer, reason in cancel:
                self._refusals.add(peer, reason)
                context.cancel()


class AdmissionInterceptor(HandlerInterceptor):
    """Outermost interceptor: refuses calls whose signature headers cannot be valid before
    reading anything, and reads each call's request under the budgets above.

    It turns every unary-request handler into a streaming-request one. gRPC waits for a unary
    request on the worker thread with no way out; a streaming-request handler gets the call's
    context first, so the watchdog can cancel it, and can refuse a call without reading it.
    """

    def __init__(self, limits: ServerLimits, check_headers: HeaderCheck | None = None) -> None:
        self._watchdog = _Watchdog(limits)
        self._check_headers = check_headers
        self._calls: Budget[_Ticket] = Budget(limits.slow_calls_per_peer, limits.slow_calls)
        self._health: Budget[_Ticket] = Budget(limits.slow_health_checks, limits.slow_health_checks)

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        if handler.request_streaming:
            return handler  # read as a stream already (unknown methods gRPC refuses without a worker)
        method: str = details.method
        health = is_health(method)
        if self._check_headers is not None and not health:
            # Runs on gRPC's polling thread, before any worker: no lookup, no I/O.
            try:
                self._check_headers(details.invocation_metadata or ())
            except Exception as exc:  # the check's refusal: its message says why
                return refusal(handler, grpc.StatusCode.UNAUTHENTICATED, str(exc))
        budget = self._health if health else self._calls
        if handler.unary_stream is not None:
            return reading_requests(handler, self._stream(handler.unary_stream, budget))
        assert handler.unary_unary is not None  # a unary request has one behaviour or the other
        return reading_requests(handler, self._unary(handler.unary_unary, budget))

    def _receive(
        self, requests: Iterator[Any], context: grpc.ServicerContext, budget: Budget[_Ticket]
    ) -> tuple[Any, str | None]:
        """The call's one request, and its peer if the request came late (vouched for once the
        call is authenticated, see Suspects); ends the call when the request does not come."""
        peer = peer_address(context.peer())
        ticket = self._watchdog.watch(context, peer, budget)
        late = received = False
        try:
            request = next(requests)
            received = True
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")
        except grpc.RpcError:
            # Cancelled, by the watchdog or by the client: nobody reads this status.
            context.abort(grpc.StatusCode.CANCELLED, "the request did not arrive in time")
        finally:
            late = self._watchdog.arrived(ticket, received)
        # A health check proves nothing: it is not authenticated.
        return request, (peer if late and budget is self._calls else None)

    def _vouch(self, late_peer: str | None, context: grpc.ServicerContext) -> None:
        if late_peer is not None and context.code() != grpc.StatusCode.UNAUTHENTICATED:  # type: ignore[attr-defined]
            self._watchdog.vouch(late_peer)

    def _unary(
        self, behavior: Callable[[Any, Any], Any], budget: Budget[_Ticket]
    ) -> Callable[[Iterator[Any], Any], Any]:
        def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            request, late_peer = self._receive(requests, context, budget)
            try:
                return behavior(request, context)
            finally:
                self._vouch(late_peer, context)

        return handle

    def _stream(
        self, behavior: Callable[[Any, Any], Iterator[Any]], budget: Budget[_Ticket]
    ) -> Callable[[Iterator[Any], Any], Iterator[Any]]:
        def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            request, late_peer = self._receive(requests, context, budget)
            try:
                yield from behavior(request, context)
            finally:
                self._vouch(late_peer, context)

        return handle
