"""History events in one graveler process: the writer every stored event goes through, the
recorder of callers' batches and of graveler's own events, the reader, and retention."""

from __future__ import annotations

from engine.core.refs import RefManager
from engine.features.history_events.reading import EventReader
from engine.features.history_events.recorder import EventRecorder, OwnEvents
from engine.features.history_events.retention import HistoryRetention, RetentionPolicy
from engine.features.history_events.streams import StreamLimits
from engine.features.history_events.writer import EventWriter
from silt.journal.store import raw_store


class HistoryEvents:
    def __init__(
        self,
        refs: RefManager,
        policy: RetentionPolicy | None = None,
        flush_interval: float = 0.2,
        enabled: bool = True,
        streams: StreamLimits | None = None,
    ) -> None:
        """enabled: False (graveler.history.enabled) records no ref events of graveler's own;
        streams: the bounds and re-authorization interval of WatchEvents (graveler.history.*)."""
        self.streams = streams or StreamLimits()
        self.writer = EventWriter(raw_store(refs.kv))
        self.recorder = EventRecorder(refs, self.writer)
        self.own = OwnEvents(self.recorder, interval=flush_interval, enabled=enabled)
        self.reader = EventReader(refs)
        self.retention = HistoryRetention(refs, self.writer, policy or RetentionPolicy())

    def start(self) -> HistoryEvents:
        self.own.start()
        return self

    def close(self) -> None:
        self.own.close()
