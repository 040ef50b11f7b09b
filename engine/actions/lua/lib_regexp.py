"""The `regexp` module: Go's regexp API, matched by RE2 in time linear in the subject.

lakeFS's hooks use Go's regexp, whose syntax is RE2's, so a pattern means the same here.
A script's pattern may be hostile (``(a+)+$`` over a long run of ``a``): RE2 compiles it to
an automaton and never backtracks. The pattern's length is capped, which bounds the
automaton and so the factor on the subject's length (and RE2's own memory budget bounds
what compiling may take).

Matching works on bytes, positions are byte offsets, and an empty match moves the search
one rune on, as Go's does. Compiled patterns are cached by the re2 module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import re2

from engine.actions.lua.bridge import BridgeError, Builder

MAX_PATTERN_BYTES = 4096

# RE2 would also log every pattern that fails to compile; the script gets the error instead.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

# Go's QuoteMeta escapes these and nothing else (a fixed pattern: Python's re is safe here).
_META = re.compile(rb"([\\.+*?()|\[\]{}^$])")


def _compile(pattern: bytes) -> Any:
    if len(pattern) > MAX_PATTERN_BYTES:
        raise BridgeError(f"regexp longer than {MAX_PATTERN_BYTES} bytes")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise BridgeError(f"error parsing regexp: {reason}") from None


def _rune_width(s: bytes, at: int) -> int:
    for width in (1, 2, 3, 4):
        try:
            s[at : at + width].decode()
            return width
        except UnicodeDecodeError:
            continue
    return 1


def _matches(compiled: Any, s: bytes, limit: int) -> Iterator[Any]:
    """Successive non-overlapping matches as Go finds them: an empty match right after the
    previous match does not count, and an empty match moves the search one rune on."""
    position, previous_end, found = 0, -1, 0
    while (limit < 0 or found < limit) and position <= len(s):
        match = compiled.search(s, position)
        if match is None:
            return
        start, end = match.span()
        accept = True
        if end == position:
            accept = start != previous_end
            position += _rune_width(s, position) if position < len(s) else 1
        else:
            position = end
        previous_end = end
        if accept:
            found += 1
            yield match


def _groups(match: Any) -> list[bytes]:
    return [match.group(0), *(group or b"" for group in match.groups())]


def match(b: Builder, pattern: bytes, s: bytes) -> tuple[Any, ...]:
    return (_compile(pattern).search(s) is not None,)


def quote_meta(b: Builder, s: bytes) -> tuple[Any, ...]:
    b.check_bytes(2 * len(s))
    return (_META.sub(rb"\\\1", s),)


def compile_(b: Builder, pattern: bytes) -> tuple[Any, ...]:
    _compile(pattern)
    return ()


def find(b: Builder, pattern: bytes, s: bytes) -> tuple[Any, ...]:
    found = _compile(pattern).search(s)
    return (b"" if found is None else found.group(0),)


def find_submatch(b: Builder, pattern: bytes, s: bytes) -> tuple[Any, ...]:
    found = _compile(pattern).search(s)
    return (b.array(() if found is None else _groups(found)),)


def find_all(b: Builder, pattern: bytes, s: bytes, n: int) -> tuple[Any, ...]:
    return (b.array(found.group(0) for found in _matches(_compile(pattern), s, n)),)


def find_all_submatch(b: Builder, pattern: bytes, s: bytes, n: int) -> tuple[Any, ...]:
    return (b.array(b.array(_groups(found)) for found in _matches(_compile(pattern), s, n)),)


FUNCTIONS: dict[str, Callable[..., tuple[Any, ...]]] = {
    "regexp.match": match,
    "regexp.quote_meta": quote_meta,
    "regexp.compile": compile_,
    "regexp.find": find,
    "regexp.find_submatch": find_submatch,
    "regexp.find_all": find_all,
    "regexp.find_all_submatch": find_all_submatch,
}
