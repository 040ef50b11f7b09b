"""What a process emits history events with: `emit` builds an event and queues it, without
waiting for anything. In a serving process (the S3 gateway, the REST API) a task on the process's
event loop flushes the queue to graveler's RecordEvents in batches (flush.py); graveler's own
events are flushed to its recorder by a thread (engine/features/history_events/recorder.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.flush import FLUSH_INTERVAL_SECONDS, SEND_TIMEOUT_SECONDS, run_async_flusher
from silt.history_events.queue import EventQueue


class QueuedEmitter:
    """Emits one source's events into a queue, for a flusher to take them out."""

    def __init__(
        self, source: ev.HistoryEventSource.ValueType, queue: EventQueue | None = None, enabled: bool = True
    ) -> None:
        """enabled: False (graveler.history.enabled) makes emit do nothing."""
        self.source = source
        self.enabled = enabled
        self.queue = queue or EventQueue()

    def emit(
        self,
        event_type: ev.HistoryEventType.ValueType,
        repository: str,
        branch: str,
        path: str,
        user: str,
        size: int = 0,
        *,
        commit_id: str = "",
        message: str = "",
    ) -> None:
        """Queue the event, stamped now; one that cannot be built is counted, never raised."""
        if not self.enabled:
            return
        try:
            event = ev.HistoryEvent(
                timestamp_us=time.time_ns() // 1000,
                repository=repository,
                branch=branch,
                type=event_type,
                path=path,
                user=user,
                source=self.source,
                size=size,
                commit_id=commit_id,
                message=message,
            )
        except (ValueError, TypeError):  # a name protobuf cannot carry (not UTF-8): never the request's problem
            self.queue.lost_one("invalid")
            return
        self.queue.emit(event)


class EventEmitter(QueuedEmitter):
    def __init__(
        self,
        source: ev.HistoryEventSource.ValueType,
        graveler: Any,
        queue: EventQueue | None = None,
        enabled: bool = True,
    ) -> None:
        """graveler: a grpc.aio GravelerService stub, signed as the process's service user."""
        super().__init__(source, queue, enabled)
        self._graveler = graveler
        self._task: asyncio.Task[None] | None = None

    def start(self, interval: float = FLUSH_INTERVAL_SECONDS) -> None:
        """Start flushing on the running event loop (an ASGI lifespan's)."""
        self._task = asyncio.create_task(run_async_flusher(self.queue, self._send, interval))

    async def close(self) -> None:
        """Stop flushing after one last bounded flush."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _send(self, batch: list[ev.HistoryEvent]) -> None:
        await self._graveler.RecordEvents(ev.RecordEventsRequest(events=batch), timeout=SEND_TIMEOUT_SECONDS)
