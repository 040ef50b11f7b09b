"""One page of a key-ordered walk, S3-style: prefix, delimiter, `after` and `amount`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, NamedTuple, TypeVar

from silt.errors import InvalidArgument

_T = TypeVar("_T")


MAX_PAGE = 10_000


def delimiter_bytes(delimiter: str) -> bytes:
    """Only "/" rolls keys up into common prefixes (seed 002); anything else is refused."""
    if delimiter not in ("", "/"):
        raise InvalidArgument("delimiter must be empty or '/'")
    return delimiter.encode()


def page_amount(amount: int) -> int:
    """A page size: 1,000 when unset, at most MAX_PAGE."""
    return min(amount or 1000, MAX_PAGE)


class CommonPrefix(NamedTuple):
    key: bytes  # ends with the delimiter


class Page(NamedTuple, Generic[_T]):
    items: list[_T | CommonPrefix]
    has_more: bool


def successor(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with prefix."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\xff" * (len(prefix) + 1)
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def start_after(after: bytes, delimiter: bytes) -> bytes:
    # A page that ended on a common prefix continues past everything under it.
    if delimiter and after.endswith(delimiter):
        return successor(after)
    return after + b"\x00"


def paginate(
    walk: Callable[[bytes], Iterator[_T]],
    key_of: Callable[[_T], bytes],
    prefix: bytes,
    delimiter: bytes,
    after: bytes,
    amount: int,
) -> Page[_T]:
    """Collect up to amount items of walk(start) under prefix, rolling keys up to common prefixes.

    walk(start) must yield items in key order from start on; it is restarted past each common
    prefix so that a "directory" of a million keys costs one step, not a million.
    """
    start = max(prefix, start_after(after, delimiter)) if after else prefix
    items: list[_T | CommonPrefix] = []
    walker = walk(start)
    while True:
        item = next(walker, None)
        if item is None:
            return Page(items, False)
        key = key_of(item)
        if not key.startswith(prefix):
            return Page(items, False)
        if len(items) == amount:
            return Page(items, True)
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        if cut < 0:
            items.append(item)
            continue
        common = key[: cut + len(delimiter)]
        items.append(CommonPrefix(common))
        walker = walk(successor(common))
