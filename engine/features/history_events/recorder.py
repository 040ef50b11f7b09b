"""Storing batches of history events: those the gateway and the REST API send (RecordEvents),
checked as any caller's input, and graveler's own ref events, queued and flushed like theirs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from engine.core.refs import RefManager
from engine.core.refs.manager import RepoHandle
from engine.core.validation import validate_ref_name
from engine.features.history_events.writer import EventWriter
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.emitter import QueuedEmitter
from silt.history_events.flush import ThreadFlusher
from silt.history_events.queue import MAX_BATCH, EventQueue
from silt.names import validate_repository_name

MAX_PATH_BYTES = 1024  # S3's longest key
MAX_USER_BYTES = 256
MAX_MESSAGE_BYTES = 4096
MAX_COMMIT_ID_BYTES = 128  # a commit id is 64 hex digits
# Events arrive within a flush interval of happening; accepting only recent ones keeps an hour
# that retention has dropped from coming back, and a caller's clock from writing the future.
MAX_AGE_SECONDS = 3600.0
MAX_AHEAD_SECONDS = 300.0
# graveler's own messages are commit messages: what an event keeps of them.
OWN_MESSAGE_CHARS = 1024


_KNOWN_TYPES = frozenset(ev.HistoryEventType.values()) - {ev.HISTORY_EVENT_TYPE_UNSPECIFIED}
# UTF-8 takes at most 4 bytes a character: a text of at most limit // 4 characters is within limit
# bytes without encoding it (most are).
_UTF8_MAX = 4


def check_batch(events: Sequence[ev.HistoryEvent]) -> None:
    """InvalidArgument for a batch no emitter of Silt's sends: too many events, oversized fields,
    unknown types. (A ref that is no branch name is normal: a read of a commit or tag; skipped.)"""
    if len(events) > MAX_BATCH:
        raise InvalidArgument(f"{len(events)} events in one call; at most {MAX_BATCH} are allowed")
    for event in events:
        if event.type not in _KNOWN_TYPES:
            raise InvalidArgument(f"unknown history event type {event.type}")
        for name, value, limit in (
            ("path", event.path, MAX_PATH_BYTES),
            ("user", event.user, MAX_USER_BYTES),
            ("message", event.message, MAX_MESSAGE_BYTES),
            ("commit_id", event.commit_id, MAX_COMMIT_ID_BYTES),
        ):
            if len(value) * _UTF8_MAX > limit and len(value.encode()) > limit:
                raise InvalidArgument(f"history event {name} is longer than {limit} bytes")
        if event.size < 0:
            raise InvalidArgument("history event size must not be negative")


def _names_branch(repository: str, branch: str) -> bool:
    try:
        validate_repository_name(repository)
        validate_ref_name(branch)
    except InvalidArgument:
        return False
    return True


class EventRecorder:
    def __init__(self, refs: RefManager, writer: EventWriter, clock: Callable[[], float] = time.time) -> None:
        self._refs = refs
        self.writer = writer
        self._clock = clock

    def record(self, events: Sequence[ev.HistoryEvent], require_branch: bool = True) -> tuple[int, int]:
        """Store events; return (recorded, skipped). Skipped: the repository (or, with
        require_branch, the branch) does not exist or cannot be named so, or the timestamp is far
        from now."""
        # Fields this version does not know (a newer emitter's) are not stored: with the bounds
        # above they keep every stored event a few KiB, so that any one fits a KV write.
        for event in events:
            event.DiscardUnknownFields()
        check_batch(events)
        now_us = int(self._clock() * 1_000_000)
        oldest, newest = now_us - int(MAX_AGE_SECONDS * 1e6), now_us + int(MAX_AHEAD_SECONDS * 1e6)
        groups: dict[tuple[str, str], list[ev.HistoryEvent]] = {}
        named: dict[tuple[str, str], bool] = {}  # each pair's names checked once a batch
        skipped = 0
        for event in events:
            pair = (event.repository, event.branch)
            if pair not in named:
                named[pair] = _names_branch(*pair)
            if named[pair] and oldest <= event.timestamp_us <= newest:
                groups.setdefault(pair, []).append(event)
            else:
                skipped += 1
        recorded = 0
        repos: dict[str, RepoHandle | None] = {}
        for (repository, branch), group in groups.items():
            if repository not in repos:
                repos[repository] = self._repository(repository)
            repo = repos[repository]
            if repo is None or (require_branch and not self._has_branch(repo, branch)):
                skipped += len(group)
                continue
            recorded += self.writer.write(repo.partition, group)
        return recorded, skipped

    def _repository(self, name: str) -> RepoHandle | None:
        try:
            return self._refs.get_repository(name)
        except NotFound:
            return None

    def _has_branch(self, repo: RepoHandle, branch: str) -> bool:
        try:
            self._refs.get_branch(repo, branch)
        except NotFound:
            return False
        return True


class OwnEvents:
    """graveler's ref events (commit, merge, reset, branch and tag changes): queued by the
    handler that made the change, stored by a flusher thread, never on the call's path."""

    def __init__(
        self, recorder: EventRecorder, queue: EventQueue | None = None, interval: float = 0.2, enabled: bool = True
    ) -> None:
        self._recorder = recorder
        self._emitter = QueuedEmitter(ev.GRAVELER, queue, enabled)
        self._flusher = ThreadFlusher(self._emitter.queue, self._store, interval)

    def start(self) -> OwnEvents:
        self._flusher.start()
        return self

    def emit(
        self,
        event_type: ev.HistoryEventType.ValueType,
        repository: str,
        branch: str,
        user: str,
        *,
        commit_id: str = "",
        message: str = "",
        path: str = "",
    ) -> None:
        self._emitter.emit(
            event_type, repository, branch, path, user, commit_id=commit_id, message=message[:OWN_MESSAGE_CHARS]
        )

    def flush(self) -> None:
        self._flusher.flush()

    def close(self) -> None:
        self._flusher.close()

    def _store(self, events: list[ev.HistoryEvent]) -> None:
        # Each of these changes happened: it is kept even if its branch was deleted before the
        # flush (a branch's history outlives it until retention, as an audit trail should).
        self._recorder.record(events, require_branch=False)
