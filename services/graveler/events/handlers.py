"""The gRPC handlers of history events, mixed into GravelerServicer: RecordEvents (the gateway's
and the REST API's batches), ListEvents (pages) and WatchEvents (a stream, optionally following)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc

from services.graveler.deadline import Deadline
from services.graveler.events.manager import HistoryEvents
from silt.errors import ResourceExhausted
from silt.graveler.v1 import events_pb2 as ev

# Each followed stream holds one of graveler's worker threads while it polls: a few at a time,
# so that watchers can never take the threads serving reads and writes.
MAX_FOLLOWERS = 8


class HistoryHandlers:
    history: HistoryEvents
    _followers: threading.BoundedSemaphore

    def RecordEvents(self, request: ev.RecordEventsRequest, context: grpc.ServicerContext) -> ev.RecordEventsResponse:
        recorded, skipped = self.history.recorder.record(list(request.events))
        return ev.RecordEventsResponse(recorded=recorded, skipped=skipped)

    def ListEvents(self, request: ev.ListEventsRequest, context: grpc.ServicerContext) -> ev.ListEventsResponse:
        page = self.history.reader.list(
            request.repository, request.branch, request.since_us, request.until_us, request.after, request.amount
        )
        return ev.ListEventsResponse(events=page.events, has_more=page.has_more, next_after=page.next_after)

    def WatchEvents(self, request: ev.WatchEventsRequest, context: grpc.ServicerContext) -> Iterator[ev.HistoryEvent]:
        deadline = Deadline.after(context.time_remaining(), is_active=context.is_active)
        watch = self.history.reader.watch(
            request.repository, request.branch, request.since_us, request.after, request.follow, deadline
        )
        if not request.follow:
            yield from watch
            return
        if not self._followers.acquire(blocking=False):
            raise ResourceExhausted(f"more than {MAX_FOLLOWERS} followed event streams at once; retry later")
        try:
            yield from watch
        finally:
            self._followers.release()
