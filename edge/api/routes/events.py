"""A branch's history events as a Server-Sent Events stream, for the web UI's live feed
(Silt's own endpoint, docs/design/api.md).

GET /repositories/{repository}/branches/{branch}/events[?since=<unix micros>] answers
`text/event-stream`: each event as `id: <event id>`, `event: history` and one `data:` line of
JSON (silt/history_events/codec.py), a `: keepalive` comment every 15 s, resuming after `Last-Event-ID`.
`follow=false` (a Silt extension for tooling and tests) sends what is stored and ends.

The stream reads graveler with ListEvents, a bounded unary call, never with a graveler stream:
the stored events a page at a time, then the last seconds of the branch once a second. So an
open feed, read or not, holds none of graveler's workers. Feeds are capped per process and per
user (edge/api/live_feed.py: 503 and 429) with a reserve for administrators, a client that
stops reading is dropped, the caller's credential is checked again every
`api.live_feed_reauthorize_seconds` and its permission before every fetch from a decision at
most that old, and a
permanent failure (a deleted repository, a refused request) ends the stream with an
`event: error` instead of retrying.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request

from edge.api.context import Ctx, authenticate
from edge.api.errors import ApiError, bad_request, forbidden
from edge.api.live_feed import WRITE_TIMEOUT_SECONDS, WriteTimedStreamingResponse
from edge.api.objects.write import ensure_branch
from silt.graveler.v1 import events_pb2 as ev
from silt.history_events import layout
from silt.history_events.codec import to_json
from silt.history_events.visibility import shown
from silt.iam_actions import READ_OBJECT, READ_USER, USERS

router = APIRouter()

KEEPALIVE_SECONDS = 15.0
# How often a followed feed asks graveler for new events: under the UI's 2 s promise.
POLL_SECONDS = 0.5
# Events per ListEvents page.
PAGE_EVENTS = 1000
# Events are stored up to a flush (and a send timeout) after they are stamped, so not in id
# order: each poll reads this far back and skips ids it already sent (as graveler's WatchEvents).
LOOKBACK_US = 10_000_000
# A `since` further ahead than this names nothing that can exist: refused, as graveler does.
MAX_SINCE_AHEAD_US = 3_600_000_000
# After graveler was unavailable (a restart) or busy, the feed tries again this much later, doubling.
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 30.0
# Failures worth retrying: graveler restarting (503) or busy (429). Anything else is permanent.
_TRANSIENT = (429, 503)

_KEEPALIVE = b": keepalive\n\n"


def sse_event(event: ev.HistoryEvent) -> bytes:
    data = json.dumps(to_json(event), separators=(",", ":"))
    return f"id: {event.id}\nevent: history\ndata: {data}\n\n".encode()


def sse_error(error: ApiError) -> bytes:
    data = json.dumps({"status": error.status, "message": error.message}, separators=(",", ":"))
    return f"event: error\ndata: {data}\n\n".encode()


def _now_us() -> int:
    return time.time_ns() // 1000


class _Feed:
    """The reading side of one stream: pages of the stored events, then polls of the recent past."""

    def __init__(
        self, ctx: Ctx, repository: str, branch: str, since_us: int, after: str, viewer: str | None = None
    ) -> None:
        self._ctx = ctx
        self._viewer = viewer  # whose reads are sent (silt/history_events/visibility.py); None: all
        self.repository = repository
        self._branch = branch
        self._since_us = since_us
        self._resume_after = after  # nothing at or before the client's Last-Event-ID is sent
        self._cursor = after
        self._sent: dict[str, int] = {}  # id -> timestamp of what was sent within the lookback
        self.caught_up = False

    async def _page(self, since_us: int, after: str) -> ev.ListEventsResponse:
        request = ev.ListEventsRequest(
            repository=self.repository, branch=self._branch, since_us=since_us, after=after, amount=PAGE_EVENTS
        )
        return await self._ctx.backend.call(self._ctx.backend.graveler.ListEvents, request)

    def _fresh(self, events: list[ev.HistoryEvent]) -> list[ev.HistoryEvent]:
        horizon = _now_us() - LOOKBACK_US
        fresh = []
        for event in events:
            if event.id in self._sent or event.id <= self._resume_after:
                continue
            if event.timestamp_us >= horizon:
                self._sent[event.id] = event.timestamp_us
            if shown(event, self._viewer):
                fresh.append(event)
        return fresh

    async def next_events(self) -> list[ev.HistoryEvent]:
        """The next events to send: a page of the stored ones until caught up, then what the
        recent past holds that was not sent. ApiError when graveler fails."""
        if not self.caught_up:
            page = await self._page(self._since_us, self._cursor)
            if page.events:
                self._cursor = page.events[-1].id
            self.caught_up = not page.has_more
            return self._fresh(list(page.events))
        start = max(self._since_us, _now_us() - LOOKBACK_US)
        self._sent = {i: t for i, t in self._sent.items() if t >= start}
        found: list[ev.HistoryEvent] = []
        after = ""
        while True:
            page = await self._page(start, after)
            found.extend(self._fresh(list(page.events)))
            if not page.has_more or not page.events:
                return found
            after = page.events[-1].id


async def _still_authenticated(ctx: Ctx, request: Request) -> None:
    """ApiError (401) once the caller's credential is no longer valid (a logged-out or expired
    session, a deleted key)."""
    caller = await authenticate(request)
    if caller.user_id != ctx.caller.user_id:
        raise ApiError(401, "the stream's credential now names another user")


async def _still_allowed(ctx: Ctx, repository: str) -> None:
    """ApiError 403 once the caller may no longer read the repository, from a decision at most
    one re-authorization interval old (edge/api/live_feed.py, FeedAccess)."""
    # ReadObject on the bare repository: allowed only while every key is (an object Deny added
    # since the stream opened ends it too).
    if not await ctx.backend.feed_access.allowed(ctx.caller.user_id, READ_OBJECT, repository, ctx.source_ip):
        raise forbidden(f"user {ctx.caller.user_id} may no longer {READ_OBJECT} on every key of {repository}")


async def _stream(
    ctx: Ctx, request: Request, feed: _Feed, follow: bool, reauthorize_seconds: float
) -> AsyncIterator[bytes]:
    # The first bytes go out at once, so that the client (and any proxy) sees the stream open.
    yield _KEEPALIVE
    clock = time.monotonic
    reauthorize_at = clock() + reauthorize_seconds
    keepalive_at = clock() + KEEPALIVE_SECONDS
    retry = RETRY_SECONDS
    while True:
        try:
            if clock() >= reauthorize_at:
                await _still_authenticated(ctx, request)
                reauthorize_at = clock() + reauthorize_seconds
            # Before every fetch (mostly a cache hit): nothing stored after the decision expired is sent.
            await _still_allowed(ctx, feed.repository)
            events = await feed.next_events()
        except ApiError as error:
            if error.status not in _TRANSIENT:
                yield sse_error(error)
                return
            await asyncio.sleep(retry)
            retry = min(retry * 2, MAX_RETRY_SECONDS)
            continue
        retry = RETRY_SECONDS
        for event in events:
            yield sse_event(event)
        if events:
            keepalive_at = clock() + KEEPALIVE_SECONDS
        if feed.caught_up:
            if not follow:
                return
            if clock() >= keepalive_at:
                yield _KEEPALIVE
                keepalive_at = clock() + KEEPALIVE_SECONDS
            await asyncio.sleep(POLL_SECONDS)


@router.get("/repositories/{repository}/branches/{branch}/events")
async def branch_events(
    ctx: Ctx,
    request: Request,
    repository: str,
    branch: str,
    since: Annotated[int, Query(ge=0, description="unix microseconds: events from then on")] = 0,
    follow: Annotated[bool, Query(description="keep the stream open for new events (default)")] = True,
    last_event_id: Annotated[str | None, Header(max_length=layout.EVENT_ID_LENGTH)] = None,
) -> WriteTimedStreamingResponse:
    await ctx.authorize_every_key(repository)  # events name the keys read and written
    if since > _now_us() + MAX_SINCE_AHEAD_US:
        raise bad_request(f"since {since} is more than an hour in the future")
    after = last_event_id.strip() if last_event_id else ""
    if after:
        layout.timestamp_of_id(after)  # InvalidArgument (400) for anything that is not an event id
    await ensure_branch(ctx, repository, branch)  # 404 in lakeFS's shape before the stream starts
    # 429 / 503 beyond the caps; administrators have a reserve of their own.
    admin_reserve = await ctx.backend.feed_access.is_admin(ctx.caller.user_id, ctx.source_ip)
    lease = ctx.backend.feeds.take(ctx.caller.user_id, admin_reserve)
    # graveler answers the API every read; a caller who is no administrator gets its own.
    admin = await ctx.backend.allowed(ctx.caller.user_id, READ_USER, USERS, ctx.source_ip)
    feed = _Feed(ctx, repository, branch, since, after, None if admin else ctx.caller.user_id)
    reauthorize: float = request.app.state.feed_reauthorize_seconds
    return WriteTimedStreamingResponse(
        _stream(ctx, request, feed, follow, reauthorize),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        lease=lease,
        write_timeout=WRITE_TIMEOUT_SECONDS,
    )
