"""A filtered listing's bounded scan and its cursors (edge/core/filtered_scan.py)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable

import pytest

from edge.core.filtered_scan import (
    CURSOR_MARK,
    InvalidCursor,
    ScanCursors,
    Scanned,
    is_cursor,
    raw_position_allowed,
    scan_visible,
)
from silt.key_scope import KeyScope

LISTING = ("api", "u1", "repo", "main", "", "")


def _keys(n: int) -> list[str]:
    return [f"hidden/{i:05d}" for i in range(n)] + ["raw/x"]


def _reader(keys: list[str], reads: list[int]) -> Callable[[str, int], Awaitable[tuple[list[str], bool]]]:
    async def read(after: str, amount: int) -> tuple[list[str], bool]:
        rest = [k for k in keys if k > after]
        reads.append(min(amount, len(rest)))
        return rest[:amount], len(rest) > amount

    return read


def _scan(keys: list[str], after: str, size: int, cap: int, reads: list[int]) -> Scanned[str]:
    def shown(key: str) -> bool:
        return key.startswith("raw/")

    return asyncio.run(scan_visible(_reader(keys, reads), shown, lambda key: key, after, size, 10, cap))


def test_a_scan_stops_at_its_cap_and_says_where() -> None:
    reads: list[int] = []
    page = _scan(_keys(100), "", 5, 30, reads)
    assert (page.items, page.has_more, page.stopped_at) == ([], True, "hidden/00029")
    assert sum(reads) == 30  # never one item past the cap
    again = _scan(_keys(100), page.stopped_at or "", 5, 30, reads)
    assert (again.items, again.stopped_at) == ([], "hidden/00059")
    last = _scan(_keys(100), "hidden/00089", 5, 30, [])
    assert (last.items, last.has_more, last.stopped_at) == (["raw/x"], False, None)


def test_a_full_page_before_the_cap_names_no_stop() -> None:
    keys = [f"raw/{i:03d}" for i in range(50)]
    page = _scan(keys, "", 5, 30, [])
    assert (page.items, page.has_more, page.stopped_at) == (keys[:5], True, None)


def test_a_cursor_opens_to_its_position_for_its_listing_only() -> None:
    cursors = ScanCursors.from_secret("a service secret")
    cursor = cursors.seal("hidden/00029", LISTING)
    assert is_cursor(cursor) and cursors.open(cursor, LISTING) == "hidden/00029"
    # The position is not readable in it, in clear or as base64.
    assert "hidden" not in cursor and base64.urlsafe_b64encode(b"hidden").decode().rstrip("=") not in cursor
    # Another listing, another caller, another installation's key: refused.
    with pytest.raises(InvalidCursor):
        cursors.open(cursor, ("api", "u1", "repo", "main", "raw/", ""))
    with pytest.raises(InvalidCursor):
        cursors.open(cursor, ("api", "u2", "repo", "main", "", ""))
    with pytest.raises(InvalidCursor):
        ScanCursors.from_secret("another secret").open(cursor, LISTING)


@pytest.mark.parametrize(
    "forged",
    [
        CURSOR_MARK,
        CURSOR_MARK + "!!!",
        CURSOR_MARK + base64.urlsafe_b64encode(b"hidden/00029").decode(),
        CURSOR_MARK + base64.urlsafe_b64encode(b"\0" * 12 + b"hidden/00029" + b"\0" * 16).decode(),
    ],
)
def test_a_forged_cursor_is_refused(forged: str) -> None:
    with pytest.raises(InvalidCursor):
        ScanCursors.from_secret("a service secret").open(forged, LISTING)


def test_an_altered_cursor_is_refused() -> None:
    cursors = ScanCursors.from_secret("a service secret")
    cursor = cursors.seal("hidden/00029", LISTING)
    text = cursor[len(CURSOR_MARK) :]
    body = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    body[14] ^= 1
    altered = CURSOR_MARK + base64.urlsafe_b64encode(bytes(body)).decode().rstrip("=")
    with pytest.raises(InvalidCursor):
        cursors.open(altered, LISTING)


def test_a_cursor_is_as_long_whatever_key_it_seals() -> None:
    cursors = ScanCursors.from_secret("s3cret")
    keys = ["x", "hr/salaries-2026.csv", "hr/layoffs/q3-list.xlsx", "k" * 1024, "é" * 512]
    sealed = [cursors.seal(key, LISTING) for key in keys]
    assert len({len(cursor) for cursor in sealed}) == 1
    assert [cursors.open(cursor, LISTING) for cursor in sealed] == keys


def test_a_named_position_is_taken_only_where_the_caller_may_read() -> None:
    filtered = KeyScope("repo", every_key=True, deny=("repo/secret/*",))
    assert raw_position_allowed(filtered, "", "")
    assert raw_position_allowed(filtered, "open/a", "")
    assert not raw_position_allowed(filtered, "secret/m", "")  # among hidden keys: the cap's oracle
    assert not raw_position_allowed(filtered, "secret/", "/")  # a prefix every key of which is hidden
    assert raw_position_allowed(filtered, "open/sub/", "/")  # a common prefix the caller is shown
    only_raw = KeyScope("repo", every_key=False, allow=("repo/raw/*",))
    assert raw_position_allowed(only_raw, "raw/x", "")
    assert not raw_position_allowed(only_raw, "gold/00010", "")
    assert raw_position_allowed(KeyScope("repo", every_key=True), "secret/m", "")  # whole: as before
