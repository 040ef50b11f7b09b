"""A branch's history events as a Server-Sent Events stream, for the web UI's live feed
(Silt's own endpoint, docs/design/api.md).

GET /repositories/{repository}/branches/{branch}/events[?since=<unix micros>] answers
`text/event-stream`: each event as `id: <event id>`, `event: history` and one `data:` line of
JSON (silt/history/codec.py), a `: keepalive` comment every 15 s, resuming after `Last-Event-ID`.
It follows graveler's WatchEvents and ends when the client goes away. `follow=false` (a Silt
extension for tooling and tests) sends what is stored and ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated

import grpc
import grpc.aio
from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from services.api.context import Ctx
from services.api.objects_write import ensure_branch
from silt.actions import READ_REPO
from silt.graveler.v1 import events_pb2 as ev
from silt.history import layout
from silt.history.codec import to_json

log = logging.getLogger(__name__)
router = APIRouter()

KEEPALIVE_SECONDS = 15.0
# One WatchEvents call lasts at most this long; the stream then continues with a new one from
# the last id sent, so that no graveler call outlives its deadline.
WATCH_CALL_SECONDS = 300.0
# Events read ahead of a slow client: past this, reading from graveler waits for the client.
BUFFERED_EVENTS = 1000
# After graveler failed (a restart), the stream tries again this much later.
RETRY_SECONDS = 1.0

_KEEPALIVE = b": keepalive\n\n"
_END = object()


def sse_event(event: ev.HistoryEvent) -> bytes:
    data = json.dumps(to_json(event), separators=(",", ":"))
    return f"id: {event.id}\nevent: history\ndata: {data}\n\n".encode()


async def _watch(
    graveler: object, request: ev.WatchEventsRequest, out: asyncio.Queue[ev.HistoryEvent | object]
) -> None:
    """Feed out from graveler's WatchEvents: with follow, call after call (each bounded) until
    cancelled; without, one call."""
    after = request.after
    while True:
        call = graveler.WatchEvents(  # type: ignore[attr-defined]
            ev.WatchEventsRequest(
                repository=request.repository,
                branch=request.branch,
                since_us=request.since_us,
                after=after,
                follow=request.follow,
            ),
            timeout=WATCH_CALL_SECONDS,
        )
        try:
            async for event in call:
                after = event.id
                await out.put(event)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                log.info("event stream of %s/%s: graveler failed: %s", request.repository, request.branch, exc)
                if not request.follow:
                    break
                await asyncio.sleep(RETRY_SECONDS)
        if not request.follow:
            break
    await out.put(_END)


async def _stream(ctx: Ctx, request: ev.WatchEventsRequest) -> AsyncIterator[bytes]:
    out: asyncio.Queue[ev.HistoryEvent | object] = asyncio.Queue(BUFFERED_EVENTS)
    watcher = asyncio.create_task(_watch(ctx.backend.graveler, request, out))
    try:
        # The first bytes go out at once, so that the client (and any proxy) sees the stream open.
        yield _KEEPALIVE
        while True:
            try:
                item = await asyncio.wait_for(out.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield _KEEPALIVE
                continue
            if item is _END:
                return
            assert isinstance(item, ev.HistoryEvent)
            yield sse_event(item)
    finally:
        # The client went away (or the stream ended): the graveler call is cancelled with it.
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@router.get("/repositories/{repository}/branches/{branch}/events")
async def branch_events(
    ctx: Ctx,
    repository: str,
    branch: str,
    since: Annotated[int, Query(ge=0, description="unix microseconds: events from then on")] = 0,
    follow: Annotated[bool, Query(description="keep the stream open for new events (default)")] = True,
    last_event_id: Annotated[str | None, Header(max_length=layout.EVENT_ID_LENGTH)] = None,
) -> StreamingResponse:
    await ctx.authorize(READ_REPO, repository)
    after = last_event_id.strip() if last_event_id else ""
    if after:
        layout.timestamp_of_id(after)  # InvalidArgument (400) for anything that is not an event id
    await ensure_branch(ctx, repository, branch)  # 404 in lakeFS's shape before the stream starts
    request = ev.WatchEventsRequest(repository=repository, branch=branch, since_us=since, after=after, follow=follow)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(_stream(ctx, request), media_type="text/event-stream", headers=headers)
