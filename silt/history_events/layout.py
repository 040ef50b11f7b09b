"""Where history events live in KV.

Events of one repository, branch and UTC hour share a partition,
`<repository partition>-history-<branch>-<yyyymmddhh>`, so a partition's size is bounded by one
hour of traffic and retention drops whole hours. Keys are `<timestamp_us 16 hex>/<writer 16 hex>/<seq 8 hex>`:
ascending byte order is time order, and the writer (random per process) with its sequence number
keeps two events of the same microsecond apart. The key is the event's id.

Which hours exist is kept in the repository partition under `history-hours/<branch>/<yyyymmddhh>`,
so readers and retention never guess hours.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta

from silt.errors import InvalidArgument

HOURS_PREFIX = b"history-hours/"
# The largest event id: 16 + 1 + 16 + 1 + 8 hexadecimal characters and separators.
EVENT_ID_LENGTH = 42
HOUR_US = 3_600_000_000
_EVENT_ID = re.compile(r"[0-9a-f]{16}/[0-9a-f]{16}/[0-9a-f]{8}")


def hour_of(timestamp_us: int) -> int:
    """The UTC hour of a timestamp as the number yyyymmddhh."""
    # Unix time has no leap seconds, so every hour is HOUR_US long and starts at a multiple of
    # it: the hour's number depends on that multiple alone, and a batch's events share a few.
    return _hour_number(timestamp_us // HOUR_US)


@functools.lru_cache(maxsize=256)
def _hour_number(hours_since_epoch: int) -> int:
    moment = datetime.fromtimestamp(hours_since_epoch * 3600, UTC)
    return int(moment.strftime("%Y%m%d%H"))


def hour_start_us(hour: int) -> int:
    """The first microsecond of an hour yyyymmddhh."""
    moment = datetime.strptime(str(hour), "%Y%m%d%H").replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000


def next_hour(hour: int) -> int:
    moment = datetime.strptime(str(hour), "%Y%m%d%H").replace(tzinfo=UTC) + timedelta(hours=1)
    return int(moment.strftime("%Y%m%d%H"))


def events_partition(repository_partition: bytes, branch: str, hour: int) -> bytes:
    return repository_partition + f"-history-{branch}-{hour:010d}".encode()


def hours_prefix(branch: str) -> bytes:
    return HOURS_PREFIX + branch.encode() + b"/"


def hour_key(branch: str, hour: int) -> bytes:
    return hours_prefix(branch) + f"{hour:010d}".encode()


def parse_hour_key(key: bytes) -> tuple[str, int]:
    """(branch, hour) of an index key `history-hours/<branch>/<yyyymmddhh>`."""
    branch, _, hour = key[len(HOURS_PREFIX) :].decode().rpartition("/")
    return branch, int(hour)


def event_key(timestamp_us: int, writer: int, seq: int) -> str:
    return f"{timestamp_us:016x}/{writer:016x}/{seq & 0xFFFFFFFF:08x}"


def timestamp_of_id(event_id: str) -> int:
    """The timestamp an event id starts with; InvalidArgument for anything that is not an id."""
    if len(event_id) != EVENT_ID_LENGTH or not _EVENT_ID.fullmatch(event_id):
        raise InvalidArgument(f"not an event id: {event_id[:64]!r}")
    return int(event_id[:16], 16)
