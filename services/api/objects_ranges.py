"""HTTP `Range` of an object read, as lakeFS reads it: one range of bytes; several ranges or
garbage are refused (416) rather than served whole. Plain string work, no pattern matching."""

from __future__ import annotations


class RangeNotSatisfiable(Exception):
    """Answered 416 with `Content-Range: bytes */<size>`."""


def _number(text: str) -> int:
    text = text.strip()
    # ASCII digits only (int() also takes "٣", "+5" and "1_0"), and no absurd length.
    if not text or not text.isascii() or not text.isdigit() or len(text) > 19:
        raise RangeNotSatisfiable(f"invalid range: {text!r} is not a byte offset")
    return int(text)


def parse_range(header: str, size: int) -> tuple[int, int]:
    """(start, end), both inclusive, of `bytes=a-b`, `bytes=a-` or `bytes=-n` in an object of size bytes."""
    spec = header.strip()
    if not spec.startswith("bytes="):
        raise RangeNotSatisfiable("invalid range: expected bytes=<start>-<end>")
    spec = spec[len("bytes=") :]
    if "," in spec:
        raise RangeNotSatisfiable("invalid range: only one range per request is served")
    first, sep, last = spec.partition("-")
    if not sep or (not first.strip() and not last.strip()):
        raise RangeNotSatisfiable("invalid range: expected bytes=<start>-<end>")
    if not first.strip():
        suffix = _number(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable("range not satisfiable: an empty suffix")
        return max(size - suffix, 0), size - 1
    start = _number(first)
    end = _number(last) if last.strip() else size - 1
    if start > end:
        raise RangeNotSatisfiable("invalid range: start is after end")
    if start >= size:
        raise RangeNotSatisfiable(f"range not satisfiable: the object has {size} bytes")
    return start, min(end, size - 1)
