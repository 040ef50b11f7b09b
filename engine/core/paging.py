"""One page of a key-ordered walk, S3-style: prefix, delimiter, `after` and `amount`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Generic, NamedTuple, TypeVar

from silt.errors import InvalidArgument

_T = TypeVar("_T")


MAX_PAGE = 10_000
MAX_DELIMITER = 1024  # bytes
# A page also stops at this many bytes of items, well under the 64 MiB gRPC message limit:
# MAX_PAGE entries of the largest allowed size would not fit in one answer.
MAX_PAGE_BYTES = 8 * 1024 * 1024


def delimiter_bytes(delimiter: str) -> bytes:
    """Any delimiter rolls keys up into common prefixes, as in S3; "" lists every key."""
    encoded = delimiter.encode()
    if len(encoded) > MAX_DELIMITER:
        raise InvalidArgument(f"delimiter must be at most {MAX_DELIMITER} bytes")
    return encoded


def page_amount(amount: int) -> int:
    """A page size: 1,000 when unset, at most MAX_PAGE; a negative one is refused (it would
    never equal a page's length, so it would never end a page)."""
    if amount < 0:
        raise InvalidArgument(f"amount must not be negative, got {amount}")
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


def common_prefix(key: bytes, prefix: bytes, delimiter: bytes) -> bytes | None:
    """The common prefix key rolls up into: up to the first delimiter at or after len(prefix)."""
    if not delimiter:
        return None
    cut = key.find(delimiter, len(prefix))
    return None if cut < 0 else key[: cut + len(delimiter)]


def start_after(after: bytes, prefix: bytes, delimiter: bytes) -> bytes:
    """Where a walk resumes after `after`, an item or a common prefix of a listing under prefix."""
    # A page that ended on a common prefix continues past everything under it. `after` is one
    # only if it is its own common prefix: a key such as "p/x/" under the prefix "p/x/" ends
    # with the delimiter but is an ordinary item (nothing follows the prefix to roll it up).
    if after.startswith(prefix) and common_prefix(after, prefix, delimiter) == after:
        return successor(after)
    return after + b"\x00"


def paginate(
    walk: Callable[[bytes], Iterator[_T]],
    key_of: Callable[[_T], bytes],
    prefix: bytes,
    delimiter: bytes,
    after: bytes,
    amount: int,
    size_of: Callable[[_T], int] | None = None,
    max_bytes: int = MAX_PAGE_BYTES,
) -> Page[_T]:
    """Collect up to amount items of walk(start) under prefix, rolling keys up to common prefixes.

    walk(start) must yield items in key order from start on; it is restarted past each common
    prefix so that a "directory" of a million keys costs one step, not a million.
    """
    start = first_key(prefix, delimiter, after)
    if not delimiter:
        return _flat_page(walk(start), key_of, prefix, amount, size_of, max_bytes)
    items: list[_T | CommonPrefix] = []
    size = 0  # bytes of the page so far, as size_of counts them (common prefixes: their key)
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
        common = common_prefix(key, prefix, delimiter) if delimiter else None
        cost = len(common) if common is not None else size_of(item) if size_of is not None else len(key)
        if items and size + cost > max_bytes:
            return Page(items, True)  # the next page resumes after the last item, as for amount
        size += cost
        if common is None:
            items.append(item)
            continue
        # Every key starting with common rolls up into it (no earlier delimiter fits inside it).
        items.append(CommonPrefix(common))
        walker = walk(successor(common))


def _flat_page(
    walker: Iterator[_T],
    key_of: Callable[[_T], bytes],
    prefix: bytes,
    amount: int,
    size_of: Callable[[_T], int] | None,
    max_bytes: int,
) -> Page[_T]:
    """paginate's loop when nothing rolls up: the same stops in the same order, without the
    per-item work common prefixes need (a page is up to MAX_PAGE items, a diff's listing
    reads page after page of them)."""
    items: list[_T | CommonPrefix] = []
    append = items.append
    size = 0
    for item in walker:
        key = key_of(item)
        if not key.startswith(prefix):
            return Page(items, False)
        if len(items) == amount:
            return Page(items, True)
        cost = size_of(item) if size_of is not None else len(key)
        if items and size + cost > max_bytes:
            return Page(items, True)
        size += cost
        append(item)
    return Page(items, False)


def first_key(prefix: bytes, delimiter: bytes, after: bytes) -> bytes:
    """Where the walk of a page under prefix, after `after`, starts."""
    return max(prefix, start_after(after, prefix, delimiter)) if after else prefix


def page_of_columns(
    chunks: Iterator[tuple[list[bytes], list[bytes]]],
    prefix: bytes,
    amount: int,
    max_bytes: int = MAX_PAGE_BYTES,
) -> tuple[list[bytes], list[bytes], bool]:
    """paginate without a delimiter, over a walk from first_key(prefix, b"", after) given as
    (keys, payloads) of consecutive items, an item's size being its key's and its payload's
    length: (the page's keys, their payloads, whether more follow under prefix).

    Every item is its own, so a whole list joins the page at once when it fits, its size summed
    in C; only the list that ends the page is taken item by item.
    """
    keys: list[bytes] = []
    payloads: list[bytes] = []
    size = 0
    for chunk_keys, chunk_payloads in chunks:
        last = not chunk_keys[-1].startswith(prefix)
        if last:
            # The walk starts at or after prefix, so the keys under it come first.
            under = sum(1 for _ in itertools.takewhile(lambda key: key.startswith(prefix), chunk_keys))
            chunk_keys, chunk_payloads = chunk_keys[:under], chunk_payloads[:under]
        room = amount - len(keys)
        if len(chunk_keys) > room:
            # The page ends in this list (it has an item past the last that fits): the items
            # that fit by number join at once when they fit by bytes too, as the walk below
            # would take them one by one before finding the next.
            head_keys, head_payloads = chunk_keys[:room], chunk_payloads[:room]
            total = sum(map(len, head_keys)) + sum(map(len, head_payloads))
            if size + total <= max_bytes:
                return keys + head_keys, payloads + head_payloads, True
        total = sum(map(len, chunk_keys)) + sum(map(len, chunk_payloads))
        if len(keys) + len(chunk_keys) <= amount and size + total <= max_bytes:
            keys += chunk_keys
            payloads += chunk_payloads
            size += total
        else:
            for key, payload in zip(chunk_keys, chunk_payloads, strict=True):
                cost = len(key) + len(payload)
                if len(keys) == amount or (keys and size + cost > max_bytes):
                    return keys, payloads, True  # the next page resumes after the last item
                size += cost
                keys.append(key)
                payloads.append(payload)
        if last:
            return keys, payloads, False
    return keys, payloads, False
