"""The listing's fast text helpers give exactly what the general helpers give."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from services.gateway.operations.common import entry_time, iso_time, x
from services.gateway.operations.listing_xml import TimeFormat, url_text, xml_text
from silt.graveler.v1 import model_pb2 as pb

KEYS = [
    "",
    "main/plain/key-1_2.3~x",
    "main/a&b<c>d",
    "main/tab\there",
    "main/cr\rlf\n",
    "main/nul\x00bell\x07esc\x1b",
    "main/é/日本/😀",
    "main/space and+plus=eq?q#h%p",
    "main/&amp;already",
    "main/\x7f\x80\u2028",
]


@pytest.mark.parametrize("key", KEYS)
def test_xml_text_is_common_x(key: str) -> None:
    assert xml_text(key) == x(key)


@pytest.mark.parametrize("key", KEYS)
def test_url_text_is_quoted_then_escaped(key: str) -> None:
    assert url_text(key) == x(quote(key, safe="/"))


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [
        (0, 0),
        (1, 999_999_999),
        (1_795_464_582, 123_456_789),
        (1_795_464_582, 999_000),
        (-86_400, 5_000_000),
        (253_402_300_799, 999_999_999),
    ],
)
def test_time_format_is_iso_time(seconds: int, nanos: int) -> None:
    entry = pb.Entry()
    entry.last_modified.seconds = seconds
    entry.last_modified.nanos = nanos
    times = TimeFormat()
    assert times.last_modified(entry) == iso_time(entry_time(entry))
    assert times.last_modified(entry) == iso_time(entry_time(entry))  # from its cache


def test_time_format_of_an_entry_without_time() -> None:
    assert TimeFormat().last_modified(pb.Entry()) == iso_time(entry_time(pb.Entry())) == "1970-01-01T00:00:00.000Z"


def test_time_format_cache_stays_bounded() -> None:
    times = TimeFormat()
    entry = pb.Entry()
    for second in range(TimeFormat.MAX_CACHED * 2 + 3):
        entry.last_modified.seconds = second
        assert times.last_modified(entry) == iso_time(entry_time(entry))
    assert len(times._seconds) <= TimeFormat.MAX_CACHED
