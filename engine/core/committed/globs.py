"""Key globs of merge path strategies, matched in time linear in the key.

A glob comes from the caller of Merge, and the key it is matched against may be any key
that both sides changed. A backtracking engine (Python's ``re``) takes time exponential in
the number of wildcards on a glob like ``*a*a*a*a*a*a*a*b`` over a long key of ``a``s, and
a merge holds a graveler worker thread while it matches; RE2 compiles the glob to an
automaton and matches in one pass over the key, whatever the glob.

A merge's rules are compiled together into one ``re2.Set`` (``GlobSet``) and each conflicting
key is matched once against all of them; the first rule among those that match decides.
"Linear in the key" still has a factor: RE2 builds its automaton lazily, and a glob made of
long literal runs between many wildcards keeps it building states, so one match costs up
to about the key's length times the rules' total size (about 1 ms for a 1 KiB key against
4 KiB of such rules). The caps bound that factor: the automaton's size (each pattern's
length and wildcards, and the rules' total length) and how many rules there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import re2

from silt.errors import InvalidArgument

# A glob longer than the longest key (1 KiB) could only match through its wildcards.
MAX_PATTERN_BYTES = 1024
MAX_PATTERN_WILDCARDS = 32  # `*` and `**` runs alike
MAX_PATH_RULES = 100
# All of a merge's patterns together: the size of the one automaton every conflict runs through.
MAX_RULES_BYTES = 4096

# Latin-1: every byte of a key is one character, so keys need not be valid UTF-8 for `.` and
# `[^/]` to step over them; dot_nl: keys may hold newlines (re.DOTALL). The program of a
# glob within the caps is far below RE2's default memory budget.
_OPTIONS = re2.Options()
_OPTIONS.encoding = re2.Options.Encoding.LATIN1
_OPTIONS.dot_nl = True
_OPTIONS.never_capture = True

Glob = Any  # re2._Regexp: google-re2 ships no type information

_ANY_SEGMENTS = b"(?:.*/)?"  # `**/`: any number of whole segments, also none
_ANYTHING = b".*"  # `**` elsewhere
_WITHIN_SEGMENT = b"[^/]*"  # `*`
_WILDCARDS = (_ANY_SEGMENTS, _ANYTHING, _WITHIN_SEGMENT)


def _tokens(raw: bytes) -> list[bytes]:
    """The glob as RE2 syntax, one piece per wildcard or literal byte."""
    parts: list[bytes] = []
    position = 0
    while position < len(raw):
        if raw.startswith(b"**", position):
            after = position + 2
            starts_segment = position == 0 or raw[position - 1 : position] == b"/"
            if starts_segment and raw.startswith(b"/", after):
                parts.append(_ANY_SEGMENTS)
                position = after + 1
            else:
                parts.append(_ANYTHING)
                position = after
        elif raw.startswith(b"*", position):
            parts.append(_WITHIN_SEGMENT)
            position += 1
        else:
            parts.append(re2.escape(raw[position : position + 1]))
            position += 1
    return parts


def check_glob(pattern: str, what: str = "merge path pattern") -> list[bytes]:
    """The glob as RE2 pieces, if it is within the caps; InvalidArgument naming the cap if not."""
    raw = pattern.encode()
    if not raw:
        raise InvalidArgument(f"a {what} must not be empty")
    if len(raw) > MAX_PATTERN_BYTES:
        raise InvalidArgument(
            f"{what} is {len(raw)} bytes; at most {MAX_PATTERN_BYTES} are allowed ({pattern[:64]!r}...)"
        )
    tokens = _tokens(raw)
    wildcards = sum(token in _WILDCARDS for token in tokens)
    if wildcards > MAX_PATTERN_WILDCARDS:
        raise InvalidArgument(
            f"{what} {pattern[:64]!r} has {wildcards} wildcards; at most {MAX_PATTERN_WILDCARDS} are allowed"
        )
    return tokens


def check_rules(patterns: Sequence[str]) -> list[list[bytes]]:
    """Each glob as RE2 pieces, if the rules are within the caps; InvalidArgument naming the cap if not."""
    if len(patterns) > MAX_PATH_RULES:
        raise InvalidArgument(f"a merge takes at most {MAX_PATH_RULES} path strategies, got {len(patterns)}")
    checked = [check_glob(pattern) for pattern in patterns]
    total = sum(len(pattern.encode()) for pattern in patterns)
    if total > MAX_RULES_BYTES:
        raise InvalidArgument(
            f"the path strategies' patterns are {total} bytes together; at most {MAX_RULES_BYTES} are allowed"
        )
    return checked


class GlobSet:
    """Several globs compiled into one automaton: which is the first to match a key, in one pass."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._size = len(patterns)
        self._set: Any = None
        if not patterns:
            return
        matcher = re2.Set.FullMatchSet(_OPTIONS)
        try:
            for pieces in check_rules(patterns):
                matcher.Add(b"".join(pieces))
            matcher.Compile()
        except re2.error as exc:  # within the caps this does not happen; never a 500 if it does
            raise InvalidArgument(f"the path strategies' patterns are too complex: {exc}") from None
        self._set = matcher

    def __len__(self) -> int:
        return self._size

    def first_match(self, key: bytes) -> int | None:
        """The index of the first glob matching the whole key, or None.

        RE2::Set answers with every glob that matches, in no order; the smallest index is the
        first rule. (A Set has no slower fallback engine: were its automaton ever out of
        memory it would answer "none", but within the caps it is far below RE2's budget.)
        """
        if self._set is None:
            return None
        matches = self._set.Match(key)
        return min(matches) if matches else None


def glob_regex(pattern: str, what: str = "merge path pattern") -> Glob:
    """Compile a key glob: ``*`` matches within one path segment, ``**`` across segments.

    ``**/`` may match no segment at all, so ``a/**/b`` matches ``a/b``; every other
    character is literal. Match with ``fullmatch``: a glob is about the whole key.
    """
    parts = check_glob(pattern, what)
    try:
        return re2.compile(b"".join(parts), _OPTIONS)
    except re2.error as exc:  # within the caps this does not happen; never a 500 if it does
        raise InvalidArgument(f"{what} {pattern[:64]!r} is too complex: {exc}") from None
