"""Reading an object's bytes as every front end of the edge does: the one `Range` parser, a
reader streamed chunk by chunk from the I/O threads, and a small object (or range) read whole
in one trip to them.

The front ends differ only in what they answer for a `Range` that is not one range of bytes
(several ranges, or garbage): S3 serves the whole object, lakeFS's API refuses it (416).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, BinaryIO, TypeVar

from silt.block import CHUNK_SIZE
from silt.block.external import ObjectReader

T = TypeVar("T")
# Offsets longer than this are no object's (2**63 has 19 digits); they read as _BEYOND, past the
# end of every object.
_MAX_DIGITS = 19
_BEYOND = 10**_MAX_DIGITS


class RangeNotSatisfiable(Exception):
    """A range of bytes the object does not have: answered 416 with its size."""


class NotOneRange(RangeNotSatisfiable):
    """A `Range` header that is not one range of bytes: several ranges, or not a range at all.
    lakeFS's API refuses it as any range it cannot serve; S3 serves the whole object instead."""


def _offset(text: str) -> int | None:
    """A byte offset: ASCII digits only (int() also takes "٣", "+5" and "1_0"), or None if empty.
    An offset of more digits than any object's size has is that many bytes in effect: read as
    _BEYOND, never converted (a hostile thousands of digits costs nothing)."""
    if not text:
        return None
    if not text.isascii() or not text.isdigit():
        raise NotOneRange(f"invalid range: {text[:40]!r} is not a byte offset")
    digits = text.lstrip("0") or "0"
    return _BEYOND if len(digits) > _MAX_DIGITS else int(digits)


def parse_byte_range(header: str, size: int) -> tuple[int, int]:
    """(start, end), both inclusive, of `bytes=a-b`, `bytes=a-` or `bytes=-n` in an object of
    size bytes (an end past the object ends at its last byte). NotOneRange for what is not one
    range of bytes (a start after its end included); RangeNotSatisfiable for one the object does
    not have. Plain string work, no pattern matching."""
    spec = header.strip().replace(" ", "")
    if not spec.startswith("bytes="):
        raise NotOneRange("invalid range: expected bytes=<start>-<end>")
    spec = spec[len("bytes=") :]
    if "," in spec:
        raise NotOneRange("invalid range: only one range per request is served")
    first_text, sep, last_text = spec.partition("-")
    first, last = _offset(first_text), _offset(last_text)
    if not sep or (first is None and last is None):
        raise NotOneRange("invalid range: expected bytes=<start>-<end>")
    if first is None:
        assert last is not None
        if last == 0 or size == 0:
            raise RangeNotSatisfiable("range not satisfiable: an empty suffix")
        return max(size - last, 0), size - 1
    if last is not None and last < first:
        raise NotOneRange("invalid range: start is after end")
    if first >= size:
        raise RangeNotSatisfiable(f"range not satisfiable: the object has {size} bytes")
    return first, size - 1 if last is None else min(last, size - 1)


def read_whole(source: ObjectReader, namespace: str, address: str, byte_range: tuple[int, int] | None) -> bytes:
    """A small object (or range) in one piece: one worker-thread trip instead of three."""
    reader = source.get(namespace, address) if byte_range is None else source.get_range(namespace, address, *byte_range)
    return read_all(reader)


def read_all(reader: BinaryIO) -> bytes:
    """What is left of reader, which is closed after."""
    with reader:
        return reader.read()


async def stream_reader(run: Callable[..., Awaitable[Any]], reader: BinaryIO) -> AsyncIterator[bytes]:
    """reader's bytes chunk by chunk, each read in the I/O threads (run); closed at the end, or
    when the response stops early."""
    try:
        while data := await run(reader.read, CHUNK_SIZE):
            yield data
    finally:
        await run(reader.close)
