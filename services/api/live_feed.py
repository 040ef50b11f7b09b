"""Bounds of the REST API's live-feed streams (routes/events.py): how many are open at once, in
the process and per user, and how long a stream may wait for its client to take what was sent.

A stream costs the process a task and one unary graveler call a second; one that is opened and
never read would otherwise stay open, holding its buffers, until TCP gives up."""

from __future__ import annotations

import asyncio
import logging
import threading

from starlette.responses import StreamingResponse
from starlette.types import Message, Send

from services.api.errors import ApiError

log = logging.getLogger(__name__)

# Open live feeds per API process, and per user within them.
MAX_FEEDS = 64
MAX_FEEDS_PER_USER = 4
# A client that takes none of the stream's bytes for this long is dropped.
WRITE_TIMEOUT_SECONDS = 30.0


class FeedLease:
    """One open feed; released once, however many times release() is called."""

    def __init__(self, slots: FeedSlots, user: str) -> None:
        self._slots = slots
        self._user = user
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._slots.give_back(self._user)


class FeedSlots:
    def __init__(self, total: int = MAX_FEEDS, per_user: int = MAX_FEEDS_PER_USER) -> None:
        self.total = total
        self.per_user = per_user
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, user: str) -> FeedLease:
        """A lease, or the API's 429 (this user has too many) or 503 (the process has)."""
        with self._lock:
            if self._held.get(user, 0) >= self.per_user:
                raise ApiError(429, f"user {user} has {self.per_user} live feeds open: close one first")
            if sum(self._held.values()) >= self.total:
                raise ApiError(503, f"{self.total} live feeds are open on this server: retry later")
            self._held[user] = self._held.get(user, 0) + 1
        return FeedLease(self, user)

    def give_back(self, user: str) -> None:
        with self._lock:
            left = self._held.get(user, 0) - 1
            if left > 0:
                self._held[user] = left
            else:
                self._held.pop(user, None)

    def open(self, user: str = "") -> int:
        with self._lock:
            return self._held.get(user, 0) if user else sum(self._held.values())


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
