"""The gRPC handlers of history events, mixed into GravelerServicer: RecordEvents (the gateway's
and the REST API's batches), ListEvents (pages) and WatchEvents (a stream, optionally following)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from engine.core.deadline import Deadline
from engine.features.history_events.manager import HistoryEvents
from engine.features.history_events.streams import EventStreams, sent_within_deadline
from services.graveler.permissions import TABLE
from silt.errors import SiltError
from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.visibility import May, reads_viewer, shown_to
from silt.rpc.interceptor import current_principal


def _caller() -> str:
    try:
        return current_principal().user_id
    except SiltError:  # served without the auth interceptor (embedded use, tests): one caller
        return ""


def _caller_source() -> str:
    """Where the caller is, for policy conditions ("" unknown, also without the interceptor)."""
    try:
        return current_principal().source_ip
    except SiltError:
        return ""


class HistoryHandlers:
    history: HistoryEvents
    _may: May
    _streams: EventStreams

    def RecordEvents(self, request: ev.RecordEventsRequest, context: grpc.ServicerContext) -> ev.RecordEventsResponse:
        recorded, skipped = self.history.recorder.record(list(request.events))
        return ev.RecordEventsResponse(recorded=recorded, skipped=skipped)

    def ListEvents(self, request: ev.ListEventsRequest, context: grpc.ServicerContext) -> ev.ListEventsResponse:
        page = self.history.reader.list(
            request.repository, request.branch, request.since_us, request.until_us, request.after, request.amount
        )
        # Others' reads are left out after paging: next_after still moves past them.
        events = shown_to(page.events, reads_viewer(self._may, request.repository))
        return ev.ListEventsResponse(events=events, has_more=page.has_more, next_after=page.next_after)

    def WatchEvents(self, request: ev.WatchEventsRequest, context: grpc.ServicerContext) -> Iterator[ev.HistoryEvent]:
        """Every stream, followed or not, holds a slot (engine/features/history_events/streams.py), is
        cancelled when its client stops reading, and ends with PERMISSION_DENIED once its caller
        may no longer do what opening it needed."""
        caller, source_ip = _caller(), _caller_source()
        action, field = TABLE["WatchEvents"]
        still_allowed = self._streams.access.checker(caller, action, getattr(request, field), source_ip)
        deadline = Deadline.after(context.time_remaining(), is_active=context.is_active)
        watch = self.history.reader.watch(
            request.repository, request.branch, request.since_us, request.after, request.follow, deadline, still_allowed
        )
        with self._streams.slots.hold(caller, admin=self._streams.access.is_admin(caller, source_ip)):
            shown = shown_to(watch, reads_viewer(self._may, request.repository))
            yield from sent_within_deadline(
                shown, context.cancel, self._streams.limits.write_timeout_seconds, context.add_callback
            )
