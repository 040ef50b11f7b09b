"""The `strings` and `path` modules: Go's string and path semantics, as lakeFS exposes them.

Strings are bytes here, as in Lua and Go; where Go walks runes (splitting on an empty
separator, trimming Unicode space) a byte that is not valid UTF-8 is a rune of its own, as
Go's decoder makes it. Every result is sized before it is built: a few bytes of input can
ask for gigabytes (``strings.replace(s, "", big)``), and the memory left for Lua bounds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.actions.lua.bridge import BridgeError, Builder

# Go's unicode.IsSpace: ASCII space, NEL, NBSP and Unicode's other White_Space characters.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
# Lua's cost of one short string in a table: the slot, the string object, its header.
_PIECE_OVERHEAD = 48

SEPARATOR = b"/"
# is_hidden and extract_dir_name walk a path's elements in Python; object paths are far
# shorter than this.
MAX_PATH_BYTES = 64 * 1024


def _runes(data: bytes) -> list[bytes]:
    return [char.encode("utf-8", "surrogateescape") for char in data.decode("utf-8", "surrogateescape")]


def _reserve(b: Builder, pieces: int, size: int) -> None:
    b.check_bytes(pieces * _PIECE_OVERHEAD + size)


def split(b: Builder, s: bytes, sep: bytes) -> tuple[Any, ...]:
    if sep:
        _reserve(b, s.count(sep) + 1, len(s))
        return (b.array(s.split(sep)),)
    _reserve(b, len(s), len(s))
    return (b.array(_runes(s)),)


def trim(b: Builder, s: bytes) -> tuple[Any, ...]:
    return (s.decode("utf-8", "surrogateescape").strip(_GO_SPACE).encode("utf-8", "surrogateescape"),)


def replace(b: Builder, s: bytes, old: bytes, new: bytes, n: int) -> tuple[Any, ...]:
    if old == new or n == 0:
        return (s,)
    if old:
        count = s.count(old)
        count = count if n < 0 else min(n, count)
        b.check_bytes(len(s) + count * (len(new) - len(old)))
        return (s.replace(old, new, count),)
    # Go inserts `new` before every rune and at the end, `n` times at most.
    most = len(s) + 1 if n < 0 else min(n, len(s) + 1)
    _reserve(b, len(s), len(s) + most * len(new))
    runes = _runes(s)
    count = len(runes) + 1 if n < 0 else min(n, len(runes) + 1)
    parts = [new]
    for rune in runes[: count - 1]:
        parts += (rune, new)
    parts.append(b"".join(runes[count - 1 :]))
    return (b"".join(parts),)


def has_prefix(b: Builder, s: bytes, prefix: bytes) -> tuple[Any, ...]:
    return (s.startswith(prefix),)


def has_suffix(b: Builder, s: bytes, suffix: bytes) -> tuple[Any, ...]:
    return (s.endswith(suffix),)


def contains(b: Builder, s: bytes, sub: bytes) -> tuple[Any, ...]:
    return (sub in s,)


def _check_separator(sep: bytes) -> None:
    if not sep:
        raise BridgeError("separator must not be empty")


def _check_length(path: bytes) -> None:
    if len(path) > MAX_PATH_BYTES:
        raise BridgeError(f"path longer than {MAX_PATH_BYTES} bytes")


def _parse(path: bytes, end: int, sep: bytes) -> tuple[int, int]:
    """lakeFS's parse of path[:end]: where its base name starts and ends.

    The parent is path[:start]. Like lakeFS, a trailing separator loses one byte, and the
    parent keeps one byte of the separator it ends with.
    """
    if path.endswith(sep, 0, end):
        end -= 1
    return path.rfind(sep, 0, end) + 1, end


def parse(b: Builder, path: bytes, sep: bytes) -> tuple[Any, ...]:
    _check_separator(sep)
    start, end = _parse(path, len(path), sep)
    return (b.value({"parent": path[:start], "base_name": path[start:end]}),)


def join(b: Builder, sep: bytes, *parts: bytes) -> tuple[Any, ...]:
    out: list[bytes] = []
    for index, part in enumerate(parts):
        if index and part.startswith(sep):
            part = part[len(sep) :]
        out.append(part)
        if index != len(parts) - 1 and not part.endswith(sep):
            out.append(sep)
    return (b"".join(out),)


def is_hidden(b: Builder, path: bytes, sep: bytes, prefix: bytes) -> tuple[Any, ...]:
    """Whether the base name of the path or of any of its parents starts with the prefix."""
    _check_separator(sep)
    _check_length(path)
    # lakeFS re-parses each parent as a new string; moving an end offset keeps it linear.
    end = len(path)
    while end > 0:
        start, name_end = _parse(path, end, sep)
        if path.startswith(prefix, start, name_end):
            return (True,)
        end = start
    return (False,)


def default_separator(b: Builder) -> tuple[Any, ...]:
    return (SEPARATOR,)


def _go_clean(path: bytes) -> bytes:
    """Go's path.Clean: the shortest path naming the same file, "." for an empty one."""
    rooted = path.startswith(b"/")
    parts: list[bytes] = []
    for part in path.split(b"/"):
        if part in (b"", b"."):
            continue
        if part != b"..":
            parts.append(part)
        elif parts and parts[-1] != b"..":
            parts.pop()
        elif not rooted:
            parts.append(part)
    cleaned = b"/".join(parts)
    if rooted:
        return b"/" + cleaned
    return cleaned or b"."


def extract_dir_name(b: Builder, path: bytes) -> tuple[Any, ...]:
    """Go's filepath.Dir: all but the last element, cleaned."""
    _check_length(path)
    return (_go_clean(path[: path.rfind(b"/") + 1]),)


FUNCTIONS: dict[str, Callable[..., tuple[Any, ...]]] = {
    "strings.split": split,
    "strings.trim": trim,
    "strings.replace": replace,
    "strings.has_prefix": has_prefix,
    "strings.has_suffix": has_suffix,
    "strings.contains": contains,
    "path.parse": parse,
    "path.join": join,
    "path.is_hidden": is_hidden,
    "path.default_separator": default_separator,
    "path.extract_dir_name": extract_dir_name,
}
