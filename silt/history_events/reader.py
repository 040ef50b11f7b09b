"""Reading history events straight from KV (layout.py), in time order. Graveler serves them
with this; a job that has the KV may use it too."""

from __future__ import annotations

from collections.abc import Iterator

from silt.errors import NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import model_pb2 as pb
from silt.history_events import layout
from silt.kv.store import Store, scan_prefix

GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"


def repository_partition(store: Store, repository: str) -> bytes:
    """The partition of a repository's refs, `<name>-<unique id>`; NotFound if there is none."""
    try:
        raw = store.get(GRAVELER_PARTITION, REPOS + repository.encode()).value
    except NotFound:
        raise NotFound(f"repository {repository!r} not found", what="repository") from None
    record = pb.Repository.FromString(raw)
    return f"{record.name}-{record.unique_id}".encode()


def event_hours(store: Store, repository_partition: bytes, branch: str, first: int = 0) -> list[int]:
    """The hours (yyyymmddhh, ascending) from first on that hold events of branch."""
    start = layout.hour_key(branch, first) if first else layout.hours_prefix(branch)
    hours = []
    for entry in store.scan(repository_partition, start):
        if not entry.key.startswith(layout.hours_prefix(branch)):
            break
        hours.append(layout.parse_hour_key(entry.key)[1])
    return hours


def all_event_hours(store: Store, repository_partition: bytes) -> Iterator[tuple[str, int]]:
    """(branch, hour) of every hour that holds events, any branch, branch by branch."""
    for entry in scan_prefix(store, repository_partition, layout.HOURS_PREFIX):
        yield layout.parse_hour_key(entry.key)


def scan_partition_events(
    store: Store,
    repository_partition: bytes,
    branch: str,
    since_us: int = 0,
    until_us: int | None = None,
    after: str = "",
) -> Iterator[ev.HistoryEvent]:
    """Events of branch with since_us <= timestamp < until_us, strictly after the event id
    `after` when given, in ascending id (time) order; hour partitions are read lazily."""
    start_us = max(since_us, layout.timestamp_of_id(after) if after else 0)
    start_key = after.encode() if after else f"{start_us:016x}".encode()
    first_hour = layout.hour_of(start_us) if start_us else 0
    for hour in event_hours(store, repository_partition, branch, first_hour):
        if until_us is not None and layout.hour_start_us(hour) >= until_us:
            return
        for entry in store.scan(layout.events_partition(repository_partition, branch, hour), start_key):
            if entry.key == start_key and after:
                continue
            event = ev.HistoryEvent.FromString(entry.value)
            if until_us is not None and event.timestamp_us >= until_us:
                return
            yield event


def scan_events(
    store: Store, repository: str, branch: str, since_us: int = 0, until_us: int | None = None, after: str = ""
) -> Iterator[ev.HistoryEvent]:
    """scan_partition_events for a repository named by its name; NotFound if it does not exist."""
    yield from scan_partition_events(store, repository_partition(store, repository), branch, since_us, until_us, after)


def list_branches_with_events(store: Store, repository: str) -> list[str]:
    """The branches of a repository that have events, in name order."""
    return sorted({branch for branch, _ in all_event_hours(store, repository_partition(store, repository))})
