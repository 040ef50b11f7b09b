"""The per-object text of a listing, written fast: a listing page is up to 1,000 objects, each
with a key, a time and an ETag to escape and format.

Each function gives exactly what the general helpers in common.py give (`x`, `x(quote(...))`,
`iso_time(entry_time(...))`); they only skip the work for the usual value that needs none:
a key without markup or control characters is its own XML text, and the same second is
formatted once per page, not once per object.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from services.gateway.operations.common import x
from silt.graveler.v1 import model_pb2 as pb

# What common.x changes: markup characters and the C0 controls.
_NEEDS_ESCAPING = re.compile(r"[&<>\x00-\x1f]")
# What urllib's quote(value, safe="/") leaves as it is (the unreserved characters and "/");
# its output for any value is made of these and "%", none of which XML escapes.
_URL_AS_IS = re.compile(r"[A-Za-z0-9_.~/-]*")
_URL_ENCODED = re.compile(r"[^A-Za-z0-9_.~/-]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def xml_text(value: str) -> str:
    """common.x(value): value as XML character data."""
    if _NEEDS_ESCAPING.search(value) is None:
        return value
    return x(value)


def url_text(value: str) -> str:
    """common.x(quote(value, safe="/")): value URL-encoded (encoding-type=url), as XML text."""
    if _URL_AS_IS.fullmatch(value) is not None:
        return value
    # quote works character by character, so quoting only the runs it changes is the same.
    return _URL_ENCODED.sub(_quoted, value)


def _quoted(match: re.Match[str]) -> str:
    return quote(match.group(0), safe="/")


class TimeFormat:
    """iso_time(entry_time(entry)) for the entries of one listing, each second formatted once."""

    # Entries written together share their seconds; a page of unrelated times stays small.
    MAX_CACHED = 4096

    def __init__(self) -> None:
        self._seconds: dict[int, str] = {}

    def last_modified(self, entry: pb.Entry) -> str:
        if not entry.HasField("last_modified"):
            return self._second(0) + "000Z"
        stamp = entry.last_modified
        # Timestamp.nanos is 0..999,999,999; entry_time keeps microseconds and iso_time milliseconds.
        return f"{self._second(stamp.seconds)}{stamp.nanos // 1_000_000:03d}Z"

    def _second(self, seconds: int) -> str:
        text = self._seconds.get(seconds)
        if text is None:
            if len(self._seconds) >= self.MAX_CACHED:
                self._seconds.clear()
            text = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.")
            self._seconds[seconds] = text
        return text
