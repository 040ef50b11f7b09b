"""Policy patterns, where `*` matches any run of characters (also none, also `/`) and everything
else is literal: lakeFS's spelling, matched the same way by the auth service's decisions and the
REST API's translation of lakeFS actions."""

from __future__ import annotations

import functools
from collections.abc import Callable

Matcher = Callable[[str], bool]


def _always(_: str) -> bool:
    return True


def _wildcard_matcher(pattern: str) -> Matcher:
    """`*` matches any run of characters: a match is the literal pieces between the stars, in
    order, each found at the leftmost place after the previous one.

    Leftmost is always right for `*`-only patterns (if a piece fits further right, it also fits
    at the leftmost place, leaving more room for the rest), so there is nothing to backtrack:
    one `str.find` per piece, each starting where the last one ended, is one pass over the value.
    A regex (`.*` joined) backtracks instead: quadratic and worse in the number of stars.
    """
    first, *middle, last = pattern.split("*")
    least = len(first) + len(last) + sum(len(piece) for piece in middle)

    def match(value: str) -> bool:
        if len(value) < least or not value.startswith(first) or not value.endswith(last):
            return False
        position, end = len(first), len(value) - len(last)
        for piece in middle:
            found = value.find(piece, position, end)
            if found < 0:
                return False
            position = found + len(piece)
        return True

    return match


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Matcher:
    """`*` matches any run of characters (also none, also `/`); everything else is literal.

    Linear in the value; with patterns and values of bounded length, a match costs microseconds
    whatever the pattern.
    """
    if pattern == "*":
        return _always
    if "*" not in pattern:
        return pattern.__eq__
    return _wildcard_matcher(pattern)
