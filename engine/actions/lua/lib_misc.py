"""The `time` module's conversions and `uuid.new`.

Times are Unix nanoseconds, as in lakeFS. ``format_iso`` and ``parse_iso`` use lakeFS's ISO
8601 layout (``2006-01-02T15:04:05-07:00``: seconds, a numeric offset); a zone is an IANA
name, with "" for UTC and "Local" for the server's zone, as Go's LoadLocation reads them.
"""

from __future__ import annotations

import datetime
import uuid
import zoneinfo
from collections.abc import Callable
from typing import Any

from engine.actions.lua.bridge import BridgeError, Builder

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MAX_ZONE_NAME = 255


def _zone(name: str) -> datetime.tzinfo | None:
    if name in ("", "UTC"):
        return datetime.UTC
    if name == "Local":
        return None
    try:
        if len(name) > _MAX_ZONE_NAME:
            raise ValueError(name)
        return zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise BridgeError(f"unknown time zone {name}") from None


def format_iso(b: Builder, epoch_ns: int, zone: bytes) -> tuple[Any, ...]:
    tz = _zone(zone.decode("utf-8", "replace"))
    try:
        moment = datetime.datetime.fromtimestamp(epoch_ns // 1_000_000_000, datetime.UTC)
    except (OverflowError, ValueError, OSError):
        raise BridgeError("time out of range") from None
    local = moment.astimezone(tz) if tz is not None else moment.astimezone()
    return (local.isoformat(timespec="seconds").encode(),)


def parse_iso(b: Builder, value: bytes) -> tuple[Any, ...]:
    text = value.decode("utf-8", "replace")
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BridgeError(f'parsing time "{text}": not in the form 2006-01-02T15:04:05-07:00') from None
    if moment.tzinfo is None:
        raise BridgeError(f'parsing time "{text}": missing time zone offset')
    delta = moment - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000,)


def new_uuid(b: Builder) -> tuple[Any, ...]:
    return (str(uuid.uuid4()).encode(),)


FUNCTIONS: dict[str, Callable[..., tuple[Any, ...]]] = {
    "time.format_iso": format_iso,
    "time.parse_iso": parse_iso,
    "uuid.new": new_uuid,
}
