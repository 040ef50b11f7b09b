"""Serving history events: a page at a time (ListEvents) or as a stream that follows new ones
(WatchEvents), both over silt/history_events/reader.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.core.deadline import Deadline
from engine.core.refs import RefManager
from engine.core.validation import validate_ref_name
from silt.errors import InvalidArgument
from silt.graveler.v1 import events_pb2 as ev
from silt.history_events import layout
from silt.history_events.reader import scan_partition_events
from silt.journal.store import raw_store
from silt.paging import take_page

# How often a followed stream looks for new events in the current hour's partition: well
# under the live feed's 2 s, and at most 4 small scans a second per watcher.
POLL_INTERVAL_SECONDS = 0.25
# A stream longer than this ends and the client resumes from the last id it saw: no call
# holds a graveler thread for ever.
MAX_FOLLOW_SECONDS = 3600.0
# Events are stamped by the process that saw them and stored up to a flush (and a send timeout)
# later, so they do not arrive in id order: each poll reads this far back and skips ids it sent.
FOLLOW_LOOKBACK_US = 10_000_000
# A `since` further ahead than this names no event that can exist (and past year 9999, no hour).
MAX_SINCE_AHEAD_US = 3_600_000_000


@dataclass(frozen=True)
class EventPage:
    events: list[ev.HistoryEvent]
    has_more: bool

    @property
    def next_after(self) -> str:
        return self.events[-1].id if self.events else ""


def _check(branch: str, since_us: int, after: str) -> None:
    validate_ref_name(branch)
    if since_us < 0:
        raise InvalidArgument("since_us must not be negative")
    if since_us > time.time_ns() // 1000 + MAX_SINCE_AHEAD_US:
        raise InvalidArgument(f"since_us {since_us} is more than an hour in the future")
    if after:
        layout.timestamp_of_id(after)


class EventReader:
    def __init__(self, refs: RefManager, sleep: Callable[[float], None] = time.sleep) -> None:
        self._refs = refs
        self._sleep = sleep

    def list(self, repository: str, branch: str, since_us: int, until_us: int, after: str, amount: int) -> EventPage:
        _check(branch, since_us, after)
        if until_us < 0:
            raise InvalidArgument("until_us must not be negative")
        repo = self._refs.repository(repository)
        events = scan_partition_events(
            raw_store(self._refs.kv), repo.partition, branch, since_us, until_us or None, after
        )
        return EventPage(*take_page(events, amount))

    def watch(
        self,
        repository: str,
        branch: str,
        since_us: int,
        after: str,
        follow: bool,
        deadline: Deadline,
        check: Callable[[], None] = lambda: None,
    ) -> Iterator[ev.HistoryEvent]:
        """Every event from since_us (or after the id `after`) on; with follow, then new ones as
        they are stored, until the deadline passes or the client goes away.

        `check` runs before every event and after every poll, so that what it raises (the
        caller's right withdrawn) ends the stream promptly even while no event comes."""
        _check(branch, since_us, after)
        repo = self._refs.repository(repository)
        kv = raw_store(self._refs.kv)
        ends = time.monotonic() + MAX_FOLLOW_SECONDS
        sent: dict[str, int] = {}  # id -> timestamp of what was sent within the lookback window
        events = scan_partition_events(kv, repo.partition, branch, since_us, None, after)
        while True:
            horizon = time.time_ns() // 1000 - FOLLOW_LOOKBACK_US
            for event in events:
                # Ids sort as text (fixed-width hex): nothing at or before `after` is sent again.
                if event.id in sent or event.id <= after:
                    continue
                if event.timestamp_us >= horizon:
                    sent[event.id] = event.timestamp_us
                check()
                yield event
            if not follow or deadline.expired() or time.monotonic() >= ends:
                return
            remaining = deadline.remaining()
            self._sleep(POLL_INTERVAL_SECONDS if remaining is None else min(POLL_INTERVAL_SECONDS, remaining))
            check()
            start = max(since_us, time.time_ns() // 1000 - FOLLOW_LOOKBACK_US)
            sent = {i: t for i, t in sent.items() if t >= start}
            events = scan_partition_events(kv, repo.partition, branch, start, None, "")
