"""The listing's fast text helpers give exactly what the general helpers give."""

from __future__ import annotations

import random
from urllib.parse import quote

import pytest

from edge.gateway.operations.common import entry_time, iso_time, quoted_etag, x
from edge.gateway.operations.listing_xml import TimeFormat, etag_texts, url_text, url_texts, xml_text, xml_texts
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


PAGES = [
    [],
    [""],
    ["main/a", "main/b"],
    [f"main/tables/date=2026-01-{day:02d}/part-{day}.parquet" for day in range(1, 29)],
    KEYS,
    KEYS[::-1],
    ["main/100%", "main/%25", "main/%%3D=", "main/=%"],  # "%" quoted before the escapes are written
    ["main/line\nfeed", "main/plain"],  # the separator inside a key: quoted key by key
    ["main/\n", "", "\n\n"],
]


@pytest.mark.parametrize("page", PAGES)
def test_page_of_url_texts_is_each_quoted(page: list[str]) -> None:
    assert url_texts(page) == [url_text(key) for key in page] == [x(quote(key, safe="/")) for key in page]


@pytest.mark.parametrize("page", PAGES)
def test_page_of_xml_texts_is_each_escaped(page: list[str]) -> None:
    assert xml_texts(page) == [x(key) for key in page]


def test_random_pages_quote_as_urllib_does() -> None:
    rng = random.Random(7)
    alphabet = "az/=%&<> +\n\r\t\x00\x7f~é中😀."
    for _ in range(2000):
        page = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(rng.randint(0, 6))]
        assert url_texts(page) == [x(quote(key, safe="/")) for key in page], page
        assert xml_texts(page) == [x(key) for key in page], page


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


def test_a_page_of_times_is_each_time_formatted_alone() -> None:
    """texts() over a page: common prefixes (None) give "", every entry its own time."""
    entries: list[pb.Entry | None] = []
    for seconds, nanos in [(1_795_464_582, 1_000_000), (1_795_464_582, 999_999_999), (0, 0), (-86_400, 0)]:
        entry = pb.Entry()
        entry.last_modified.seconds = seconds
        entry.last_modified.nanos = nanos
        entries += [entry, None]
    entries.append(pb.Entry())  # no time at all
    expected = ["" if entry is None else iso_time(entry_time(entry)) for entry in entries]
    assert TimeFormat().texts(entries) == expected


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (-1, "2026-11-23T20:09:41.999Z"),
        (1_000_000_000, "2026-11-23T20:09:43.000Z"),
        (2_000_000_123, "2026-11-23T20:09:44.000Z"),
    ],
)
def test_nanos_out_of_range_carry_into_the_seconds(nanos: int, text: str) -> None:
    # protobuf's ToDatetime refuses such a Timestamp; a listing must not fail on one entry.
    entry = pb.Entry()
    entry.last_modified.seconds = 1_795_464_582
    entry.last_modified.nanos = nanos
    assert TimeFormat().texts([entry]) == [text]


def test_time_format_cache_stays_bounded() -> None:
    times = TimeFormat()
    entry = pb.Entry()
    for second in range(TimeFormat.MAX_CACHED * 2 + 3):
        entry.last_modified.seconds = second
        assert times.last_modified(entry) == iso_time(entry_time(entry))
    assert len(times._seconds) <= TimeFormat.MAX_CACHED


@pytest.mark.parametrize(
    "etags",
    [
        [],
        ["d41d8cd98f00b204e9800998ecf8427e", "9b2cf535f27731c974343645a3985328-3", ""],
        ['"quoted"', "plain"],  # stored with its quotes: quoted once, as quoted_etag does
        ["a&b", "plain"],
        ["<x>", '"', "\x01"],
    ],
)
def test_page_of_etags_is_each_quoted_and_escaped(etags: list[str]) -> None:
    assert etag_texts(etags) == [x(quoted_etag(etag)) for etag in etags]
