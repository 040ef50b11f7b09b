"""Bounds and authority of the REST API's live-feed streams (routes/events.py): how many are
open at once, in the process, per user and for whom a reserve is kept; how long a stream may
wait for its client to take what was sent; and how fresh the decision that its caller may still
read must be.

A stream costs the process a task and one unary graveler call a second; one that is opened and
never read would otherwise stay open, holding its buffers, until TCP gives up. It also outlives
the check made when it opened: FeedAccess asks auth again, itself rather than the process's
shared cache (whose age would add to the bound), at most once per re-authorization interval per
user and repository. Design: docs/security.md, "Event streams"."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from starlette.responses import StreamingResponse
from starlette.types import Message, Send

from edge.api.errors import ApiError
from silt.errors import InvalidArgument, Unavailable
from silt.iam_actions import DELETE_USER, user_resource
from silt.rpc.authority import AsyncAuthority, Clock, TTLCache

log = logging.getLogger(__name__)

# Open live feeds per API process, and per user within them.
MAX_FEEDS = 64
MAX_FEEDS_PER_USER = 4
# Of MAX_FEEDS, this many are open to administrators only: other users hold at most
# MAX_FEEDS - ADMIN_RESERVE together, so no number of them can keep an administrator (who can end
# their access) from watching.
ADMIN_RESERVE = 8
# Who counts as an administrator: whoever may delete any user (the Admins preset group does).
ADMIN_ACTION = DELETE_USER
ADMIN_RESOURCE = user_resource("*")
# Decisions kept per process: one per (user, action, resource) of open feeds.
MAX_DECISIONS = 10_000
# A client that takes none of the stream's bytes for this long is dropped.
WRITE_TIMEOUT_SECONDS = 30.0


class FeedLease:
    """One open feed; released once, however many times release() is called."""

    def __init__(self, slots: FeedSlots, user: str, reserved: bool = False) -> None:
        self._slots = slots
        self._user = user
        self._reserved = reserved
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._slots.give_back(self._user, self._reserved)


class FeedSlots:
    """At most `total` feeds, `per_user` of them by one user, and `total - admin_reserve` (the
    shared part) by users who are not administrators, together. An administrator's feed takes a
    reserved place while one is free, else a shared one, so the reserve is never spent while
    others could use the shared part."""

    def __init__(self, total: int = MAX_FEEDS, per_user: int = MAX_FEEDS_PER_USER, admin_reserve: int = 0) -> None:
        self.total = total
        self.per_user = per_user
        self.admin_reserve = admin_reserve
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._reserved = 0  # feeds in reserved places

    def take(self, user: str, admin: bool = False) -> FeedLease:
        """A lease, or the API's 429 (this user has too many) or 503 (the process has, or only
        places kept for administrators are left)."""
        with self._lock:
            held = sum(self._held.values())
            if self._held.get(user, 0) >= self.per_user:
                raise ApiError(429, f"user {user} has {self.per_user} live feeds open: close one first")
            if held >= self.total:
                raise ApiError(503, f"{self.total} live feeds are open on this server: retry later")
            reserved = admin and self._reserved < self.admin_reserve
            if not reserved and held - self._reserved >= self.total - self.admin_reserve:
                raise ApiError(
                    503,
                    f"{self.total - self.admin_reserve} live feeds are open on this server and the other "
                    f"{self.admin_reserve} are kept for administrators: retry later",
                )
            self._held[user] = self._held.get(user, 0) + 1
            self._reserved += int(reserved)
        return FeedLease(self, user, reserved)

    def give_back(self, user: str, reserved: bool = False) -> None:
        with self._lock:
            left = self._held.get(user, 0) - 1
            if left > 0:
                self._held[user] = left
            else:
                self._held.pop(user, None)
            self._reserved -= int(reserved)

    def open(self, user: str = "") -> int:
        with self._lock:
            return self._held.get(user, 0) if user else sum(self._held.values())


class FeedAccess:
    """Whether open feeds' users may still do what opening them needed: asked of auth itself,
    each decision kept for `ttl` seconds (the re-authorization interval) and shared by every
    feed of that user on that resource, so feeds cost auth at most one call per interval each."""

    def __init__(self, authority: AsyncAuthority, ttl: float, clock: Clock = time.monotonic) -> None:
        self._authority = authority
        self._decisions: TTLCache[tuple[str, str, str, str], bool] = TTLCache(ttl, MAX_DECISIONS, clock)

    async def allowed(self, user: str, action: str, resource: str, source_ip: str = "") -> bool:
        """ApiError 503 while auth cannot answer (the feed retries; it sends nothing meanwhile).
        source_ip: the feed's client address ("" unknown), for policy conditions."""
        key = (user, action, resource, source_ip)
        decision: bool | None = self._decisions.get(key)
        if decision is None:
            try:
                decision = (await self._authority.allowed_many(user, action, [resource], source_ip))[0]
            except Unavailable as exc:
                raise ApiError(503, f"auth: {exc}") from None
            except InvalidArgument as exc:
                raise ApiError(400, str(exc)) from None
            self._decisions.put(key, decision)
        return decision

    async def is_admin(self, user: str, source_ip: str = "") -> bool:
        return await self.allowed(user, ADMIN_ACTION, ADMIN_RESOURCE, source_ip)


class WriteTimedStreamingResponse(StreamingResponse):
    """A StreamingResponse that gives up on a client taking none of its bytes for
    `write_timeout` seconds (the server waits on flow control while a client does not read),
    and then releases `lease`; the lease is released when the response ends in any way."""

    def __init__(self, *args: object, lease: FeedLease, write_timeout: float, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._lease = lease
        self._write_timeout = write_timeout

    async def stream_response(self, send: Send) -> None:
        async def timed_send(message: Message) -> None:
            await asyncio.wait_for(send(message), self._write_timeout)

        try:
            await super().stream_response(timed_send)
        except TimeoutError:
            log.info("live feed: the client took nothing for %.0f s; closing the stream", self._write_timeout)
        finally:
            self._lease.release()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()
