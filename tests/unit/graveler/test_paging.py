"""Graveler's paging: any delimiter rolls keys up into common prefixes, S3-style, page by page."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.paging import (
    MAX_DELIMITER,
    CommonPrefix,
    delimiter_bytes,
    first_key,
    page_of_columns,
    paginate,
    start_after,
    successor,
)
from silt.errors import InvalidArgument


class Walk:
    """A sorted key list walked from any start, counting how often the walk is (re)started."""

    def __init__(self, keys: list[bytes]) -> None:
        self.keys = sorted(set(keys))
        self.starts = 0
        self.steps = 0

    def __call__(self, start: bytes) -> Iterator[bytes]:
        self.starts += 1
        for key in self.keys[bisect.bisect_left(self.keys, start) :]:
            self.steps += 1
            yield key


def page(walk: Walk, prefix: bytes, delimiter: bytes, after: bytes = b"", amount: int = 1000) -> list[bytes]:
    return [
        item.key if isinstance(item, CommonPrefix) else item
        for item in one_page(walk, prefix, delimiter, after, amount)[0]
    ]


def one_page(
    walk: Walk, prefix: bytes, delimiter: bytes, after: bytes, amount: int
) -> tuple[list[bytes | CommonPrefix], bool]:
    result = paginate(walk, lambda key: key, prefix, delimiter, after, amount)
    return result.items, result.has_more


def list_all(keys: list[bytes], prefix: bytes, delimiter: bytes, amount: int) -> list[tuple[bytes, bool]]:
    """Every item of every page, as (key, is a common prefix), following each page's last key."""
    walk = Walk(keys)
    out: list[tuple[bytes, bool]] = []
    after = b""
    for _ in range(1000):
        items, has_more = one_page(walk, prefix, delimiter, after, amount)
        assert len(items) <= amount
        out += [(i.key, True) if isinstance(i, CommonPrefix) else (i, False) for i in items]
        if not has_more:
            return out
        last = items[-1]
        after = last.key if isinstance(last, CommonPrefix) else last
    raise AssertionError("pagination did not end")


def model(keys: list[bytes], prefix: bytes, delimiter: bytes) -> list[tuple[bytes, bool]]:
    """S3: a key whose rest after the prefix holds the delimiter rolls up to its first occurrence."""
    out: set[tuple[bytes, bool]] = set()
    for key in keys:
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if delimiter and delimiter in rest:
            out.add((prefix + rest[: rest.index(delimiter) + len(delimiter)], True))
        else:
            out.add((key, False))
    return sorted(out)


def test_delimiter_bytes_accepts_any_delimiter_up_to_the_cap() -> None:
    for delimiter in ["", "/", "-", "ab", "%", "|", "é", "x" * MAX_DELIMITER]:
        assert delimiter_bytes(delimiter) == delimiter.encode()
    with pytest.raises(InvalidArgument):
        delimiter_bytes("x" * (MAX_DELIMITER + 1))
    with pytest.raises(InvalidArgument):
        delimiter_bytes("é" * (MAX_DELIMITER // 2 + 1))  # the cap counts bytes, not characters


@pytest.mark.parametrize(
    ("delimiter", "keys", "expected"),
    [
        (b"-", [b"a-b-c", b"a-d", b"a.b", b"b", b"c-"], [b"a-", b"a.b", b"b", b"c-"]),
        (b"ab", [b"xaby", b"xabz", b"xa", b"xb", b"ab"], [b"ab", b"xa", b"xab", b"xb"]),
        (b"%", [b"100%", b"50%off", b"5", b"%"], [b"%", b"100%", b"5", b"50%"]),
        (b"/", [b"a/b/c", b"a/d", b"e"], [b"a/", b"e"]),
    ],
)
def test_any_delimiter_rolls_keys_up(delimiter: bytes, keys: list[bytes], expected: list[bytes]) -> None:
    assert page(Walk(keys), b"", delimiter) == expected


def test_the_delimiter_is_looked_for_from_the_end_of_the_prefix() -> None:
    keys = [b"a-b-c", b"a-b-d", b"a-bc", b"a-e", b"b-c"]
    assert page(Walk(keys), b"a-", b"-") == [b"a-b-", b"a-bc", b"a-e"]
    assert page(Walk(keys), b"a", b"-") == [b"a-"]
    # A multi-character delimiter is found at its first occurrence, even when occurrences overlap.
    assert page(Walk([b"paaab", b"pab"]), b"p", b"aa") == [b"paa", b"pab"]
    # An occurrence that starts inside the prefix does not count.
    assert list_all([b"xaby", b"xabcab"], b"xa", b"ab", 10) == [(b"xabcab", True), (b"xaby", False)]


def test_a_key_equal_to_the_prefix_ending_with_the_delimiter_is_an_item() -> None:
    keys = [b"p/x/", b"p/x/a", b"p/x/b/c", b"p/x/b/d", b"p/x/c"]
    assert page(Walk(keys), b"p/x/", b"/") == [b"p/x/", b"p/x/a", b"p/x/b/", b"p/x/c"]
    # Continuing after it resumes at the next key: "p/x/" is not the common prefix of anything here.
    assert page(Walk(keys), b"p/x/", b"/", after=b"p/x/") == [b"p/x/a", b"p/x/b/", b"p/x/c"]
    assert list_all(keys, b"p/x/", b"/", 1) == model(keys, b"p/x/", b"/")
    # Under a shorter prefix, the same key is the common prefix of everything below "p/x/".
    assert page(Walk(keys), b"p/", b"/") == [b"p/x/"]
    assert page(Walk(keys), b"p/", b"/", after=b"p/x/") == []
    keys = [b"ab", b"abab", b"abc"]
    assert page(Walk(keys), b"ab", b"ab") == [b"ab", b"abab", b"abc"]
    assert list_all(keys, b"ab", b"ab", 1) == model(keys, b"ab", b"ab")


def test_start_after() -> None:
    assert start_after(b"p/x/", b"p/x/", b"/") == b"p/x/\x00"  # the key equal to the prefix
    assert start_after(b"p/x/", b"p/", b"/") == successor(b"p/x/")  # a common prefix
    assert start_after(b"p/x/y/", b"p/", b"/") == b"p/x/y/\x00"  # a key: its common prefix is "p/x/"
    assert start_after(b"p/x/", b"p/", b"") == b"p/x/\x00"
    assert start_after(b"a-", b"", b"-") == b"a."
    assert start_after(b"xab", b"x", b"ab") == successor(b"xab")
    assert start_after(b"xab", b"xa", b"ab") == b"xab\x00"  # the occurrence starts inside the prefix


@pytest.mark.parametrize("delimiter", [b"/", b"-", b"ab", b"%"])
def test_pages_of_one_continue_past_each_common_prefix(delimiter: bytes) -> None:
    d = delimiter
    keys = [b"k" + d + b"1", b"k" + d + b"2", b"k0", b"l" + d + b"x" + d + b"y", b"l" + d + b"z", b"m", b"n" + d]
    expected = model(keys, b"", d)
    assert [k for k, _ in expected] == sorted([b"k" + d, b"k0", b"l" + d, b"m", b"n" + d])
    assert list_all(keys, b"", d, 1) == expected
    assert list_all(keys, b"", d, 2) == expected


def test_a_common_prefix_costs_one_step_however_many_keys_it_holds() -> None:
    keys = [b"big-%05d" % i for i in range(5000)] + [b"small"]
    walk = Walk(keys)
    assert page(walk, b"", b"-") == [b"big-", b"small"]
    assert walk.steps <= 3 and walk.starts == 2


_keys = st.lists(st.text(alphabet="ab/-%", min_size=1, max_size=6).map(str.encode), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    keys=_keys,
    prefix=st.sampled_from([b"", b"a", b"a/", b"ab", b"-", b"%"]),
    delimiter=st.sampled_from([b"", b"/", b"-", b"a", b"ab", b"%", b"/-", b"aa"]),
    amount=st.integers(min_value=1, max_value=4),
)
def test_pagination_matches_the_s3_model(keys: list[bytes], prefix: bytes, delimiter: bytes, amount: int) -> None:
    assert list_all(keys, prefix, delimiter, amount) == model(keys, prefix, delimiter)


@settings(max_examples=400, deadline=None)
@given(
    keys=_keys,
    prefix=st.sampled_from([b"", b"a", b"a/", b"ab", b"-", b"%"]),
    after=st.sampled_from([b"", b"a", b"a/", b"ab-", b"b", b"%%"]),
    amount=st.integers(min_value=1, max_value=5),
    chunk=st.integers(min_value=1, max_value=7),
    max_bytes=st.integers(min_value=1, max_value=16),
)
def test_a_page_of_columns_is_the_page_paginate_gives(
    keys: list[bytes], prefix: bytes, after: bytes, amount: int, chunk: int, max_bytes: int
) -> None:
    """Without a delimiter, a walk taken as columns of keys and payloads gives the same page,
    amount and byte cap (key and payload counted) included."""
    walk = Walk(keys)
    payload = {key: b"p" * (len(key) % 3) for key in walk.keys}
    expected = paginate(
        lambda start: ((key, payload[key]) for key in walk(start)),
        lambda item: item[0],
        prefix,
        b"",
        after,
        amount,
        size_of=lambda item: len(item[0]) + len(item[1]),
        max_bytes=max_bytes,
    )
    start = first_key(prefix, b"", after)
    walked = walk.keys[bisect.bisect_left(walk.keys, start) :]
    chunks = iter(
        [(walked[i : i + chunk], [payload[key] for key in walked[i : i + chunk]]) for i in range(0, len(walked), chunk)]
    )
    page_keys, payloads, has_more = page_of_columns(chunks, prefix, amount, max_bytes)
    assert (list(zip(page_keys, payloads, strict=True)), has_more) == (expected.items, expected.has_more)
