"""Bounds and authority of WatchEvents streams in one graveler process: how many run at once, in
all, per caller and for whom a reserve is kept; how long one may wait for its client to take the
next event; and how often the caller's right to read is asked again while it runs.

A streaming handler holds one of graveler's worker threads for as long as it runs, and the
thread blocks in send while the client does not read (HTTP/2 flow control). Without these bounds
a few streams that are opened and never read would take every worker, and with them every read
and write of every repository.

A stream outlives the check made when it was opened, so the caller's ReadRepo is asked again
while it runs (``StreamAccess``): before every event it forwards and at every poll, from a
decision at most `reauthorize_seconds` old that is asked of auth itself, not of the
interceptor's cache (whose age would add to the bound). A stream whose caller lost the right
ends with PERMISSION_DENIED within that interval plus one poll. Design: docs/security.md,
"Event streams"."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import grpc

from silt.errors import PermissionDenied, ResourceExhausted
from silt.iam_actions import DELETE_USER, user_resource
from silt.rpc.authority import Authority, CachedAuthority, Clock, TTLCache
from silt.rpc.interceptor import AuthInterceptor

# Well under graveler's 32 workers (silt/rpc/limits.py): the rest always serve reads and writes.
MAX_STREAMS = 8
# One caller (a user, a service) holds at most this many of them.
MAX_STREAMS_PER_CALLER = 2
# Of MAX_STREAMS, this many are open to administrators only: callers without that right hold at
# most MAX_STREAMS - ADMIN_RESERVE together (3 callers' worth), so no number of them can keep an
# administrator, who can end their access, from watching.
ADMIN_RESERVE = 2
# An open stream's right to read is at most this old (asked of auth at most once per interval per
# caller and repository, however many events flow).
REAUTHORIZE_SECONDS = 2.0
# A stream whose client takes no event for this long is cancelled, releasing its thread: an
# honest client reads an event (at most 64 KiB) within milliseconds.
WRITE_TIMEOUT_SECONDS = 10.0
# Who counts as an administrator for the reserve: whoever may delete any user, i.e. can end any
# stream-holder's access (the Admins preset group holds it).
ADMIN_ACTION = DELETE_USER
ADMIN_RESOURCE = user_resource("*")
# Decisions kept per process: one per (caller, action, resource) of open streams, so few.
MAX_DECISIONS = 10_000

T = TypeVar("T")


@dataclass(frozen=True)
class StreamLimits:
    """graveler.history.* stream settings (silt/config.py)."""

    total: int = MAX_STREAMS
    per_caller: int = MAX_STREAMS_PER_CALLER
    admin_reserve: int = ADMIN_RESERVE
    reauthorize_seconds: float = REAUTHORIZE_SECONDS
    write_timeout_seconds: float = WRITE_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not 0 <= self.admin_reserve < self.total:
            raise ValueError(
                f"the admin reserve ({self.admin_reserve}) must leave other callers at least one of "
                f"{self.total} streams"
            )
        if self.per_caller < 1 or self.reauthorize_seconds <= 0 or self.write_timeout_seconds <= 0:
            raise ValueError("per_caller must be at least 1, reauthorize_seconds and write_timeout_seconds positive")


class StreamSlots:
    """At most `total` streams at once, at most `per_caller` of them by one caller, and at most
    `total - admin_reserve` (the shared part) by callers who are not administrators, together.
    An administrator's stream takes a reserved slot while one is free, else a shared one, so the
    reserve is never spent while others could use the shared part."""

    def __init__(
        self, total: int = MAX_STREAMS, per_caller: int = MAX_STREAMS_PER_CALLER, admin_reserve: int = 0
    ) -> None:
        self._total = total
        self._per_caller = per_caller
        self._reserve = admin_reserve
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._reserved = 0  # streams in reserved slots

    @contextmanager
    def hold(self, caller: str, admin: bool = False) -> Iterator[None]:
        """A slot for the stream's lifetime; ResourceExhausted when none is free to this caller."""
        with self._lock:
            held = sum(self._held.values())
            if self._held.get(caller, 0) >= self._per_caller:
                raise ResourceExhausted(f"more than {self._per_caller} event streams of {caller!r} at once")
            if held >= self._total:
                raise ResourceExhausted(f"more than {self._total} event streams at once; retry later")
            reserved = admin and self._reserved < self._reserve
            if not reserved and held - self._reserved >= self._total - self._reserve:
                raise ResourceExhausted(
                    f"{self._total - self._reserve} event streams are open and the other {self._reserve} are "
                    "kept for administrators; retry later"
                )
            self._held[caller] = self._held.get(caller, 0) + 1
            self._reserved += int(reserved)
        try:
            yield
        finally:
            with self._lock:
                left = self._held[caller] - 1
                if left:
                    self._held[caller] = left
                else:
                    del self._held[caller]
                self._reserved -= int(reserved)


class StreamAccess:
    """Whether the callers of open streams may still do what opening them needed, asked of auth
    itself and each decision kept for `ttl` seconds: a stream forwarding thousands of events a
    second costs auth one call per interval, and all streams of one caller on one repository
    share it."""

    def __init__(
        self, authority: Authority | None, ttl: float = REAUTHORIZE_SECONDS, clock: Clock = time.monotonic
    ) -> None:
        """authority: None when graveler is served without auth (embedded use, tests), where
        nothing was checked when the stream opened either."""
        self._authority = authority
        self._decisions: TTLCache[tuple[str, str, str, str], bool] = TTLCache(ttl, MAX_DECISIONS, clock)

    def allowed(self, user: str, action: str, resource: str, source_ip: str = "") -> bool:
        """source_ip: where the stream's caller is ("" unknown), for policy conditions."""
        if self._authority is None:
            return True
        key = (user, action, resource, source_ip)
        decision: bool | None = self._decisions.get(key)
        if decision is None:
            decision = self._authority.allowed_many(user, action, [resource], source_ip)[0]
            self._decisions.put(key, decision)
        return decision

    def is_admin(self, user: str, source_ip: str = "") -> bool:
        return self._authority is not None and self.allowed(user, ADMIN_ACTION, ADMIN_RESOURCE, source_ip)

    def checker(self, user: str, action: str, resource: str, source_ip: str = "") -> Callable[[], None]:
        """A check to call before each event: PermissionDenied once `user` lost the right (and
        auth's own failure, Unavailable, as it comes: a stream is not served blind)."""

        def check() -> None:
            if not self.allowed(user, action, resource, source_ip):
                raise PermissionDenied(f"user {user!r} may no longer {action} on {resource!r}; the stream ends")

        return check


class EventStreams:
    """The slots and the re-authorization of one graveler process's WatchEvents streams."""

    def __init__(self, limits: StreamLimits, authority: Authority | None, clock: Clock = time.monotonic) -> None:
        self.limits = limits
        self.slots = StreamSlots(limits.total, limits.per_caller, limits.admin_reserve)
        self.access = StreamAccess(authority, limits.reauthorize_seconds, clock)


def stream_authority(interceptors: Sequence[grpc.ServerInterceptor]) -> Authority | None:
    """The uncached authority behind the auth interceptor among `interceptors` (None: served
    without one): a stream's decisions are kept by StreamAccess for its own, shorter interval."""
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)
    if auth is None:
        return None
    authority = auth.authority
    return authority.inner if isinstance(authority, CachedAuthority) else authority


class WriteWatchdog:
    """Calls `cancel` when an armed send takes longer than `seconds`: one thread per stream,
    waiting on a condition rather than started per event."""

    def __init__(self, cancel: Callable[[], object], seconds: float = WRITE_TIMEOUT_SECONDS) -> None:
        self._cancel = cancel
        self._seconds = seconds
        self._condition = threading.Condition()
        self._armed_until: float | None = None
        self._closed = False
        self.fired = False
        self._thread = threading.Thread(target=self._run, name="event-stream-watchdog", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        with self._condition:
            self._armed_until = time.monotonic() + self._seconds
            self._condition.notify()

    def disarm(self) -> None:
        with self._condition:
            self._armed_until = None

    def stop(self) -> None:
        """Does not fire from now on (a cancel already under way still happens). Returns at once:
        gRPC runs it on its polling thread when the call ends, where blocking would stall every
        call. Without it, a generator that gRPC stops reading mid-send (the client gone) and that
        is not closed at once (held in a reference cycle) keeps its watchdog armed and its thread
        alive until it is collected, and the watchdog then cancels a call that has ended."""
        with self._condition:
            self._closed = True
            self._condition.notify()

    def close(self) -> None:
        self.stop()
        self._thread.join(timeout=self._seconds)

    def _run(self) -> None:
        with self._condition:
            while not self._closed:
                if self._armed_until is None:
                    self._condition.wait()
                    continue
                left = self._armed_until - time.monotonic()
                if left > 0:
                    self._condition.wait(left)
                    continue
                self.fired = True
                self._armed_until = None
                break
        if self.fired:
            self._cancel()


def sent_within_deadline(
    items: Iterator[T],
    cancel: Callable[[], object],
    seconds: float,
    on_call_end: Callable[[Callable[[], None]], bool] | None = None,
) -> Generator[T, None, None]:
    """items, cancelling the call when the client takes longer than `seconds` to take one: the
    time between a yield and the next request for an item is the send of the item yielded.
    on_call_end (the servicer context's add_callback) stops the watchdog when the call ends,
    whether or not the generator is ever resumed or closed."""
    watchdog = WriteWatchdog(cancel, seconds)
    if on_call_end is not None and not on_call_end(watchdog.stop):
        watchdog.stop()  # the call has ended already
    try:
        for item in items:
            watchdog.arm()
            yield item
            watchdog.disarm()
    finally:
        watchdog.close()
