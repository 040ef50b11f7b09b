"""Policy patterns in lakeFS's spelling: `*` matches any run of characters (also none, also `/`),
`?` exactly one character, everything else is literal.

compile_wildcard is how decisions match (the auth service, and the edges filtering keys by a
scope it answered, silt/key_scope.py); compile_pattern knows `*` only, `?` being literal there:
it is what the reasoning about patterns covering patterns (services/auth/grants.py) and the
REST API's translation of lakeFS actions (which contain no `?`) use."""

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


def _question_matcher(pattern: str) -> Matcher:
    """`*` and `?` (one character): a bit-parallel run of the pattern's automaton.

    Bit i of the state means "the first i tokens matched"; each character of the value moves
    every live state at once (a shift for tokens that take it, staying put on a `*`), so a
    match costs one pass over the value with a few operations on a bounded integer per
    character (patterns are at most a few kilobits long): linear in the value, whatever the
    pattern. No backtracking, unlike a regex with `.*` and `.`.
    """
    tokens: list[str] = []
    for char in pattern:
        if char == "*" and tokens and tokens[-1] == "*":
            continue  # `**` is `*`
        tokens.append(char)
    size = len(tokens)
    stars = sum(1 << i for i, token in enumerate(tokens) if token == "*")
    any_char = sum(1 << i for i, token in enumerate(tokens) if token == "?")
    takes: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token not in "*?":
            takes[token] = takes.get(token, any_char) | (1 << i)
    accept = 1 << size

    def closure(state: int) -> int:
        # A `*` may match nothing: a live `*` state is also the state after it.
        return state | ((state & stars) << 1)

    start = closure(1)

    def match(value: str) -> bool:
        state = start
        for char in value:
            state = closure(((state & takes.get(char, any_char)) << 1) | (state & stars))
            if not state:
                return False
        return bool(state & accept)

    return match


@functools.lru_cache(maxsize=4096)
def compile_wildcard(pattern: str) -> Matcher:
    """lakeFS's wildcards, as decisions match policy resources: `*` matches any run of
    characters (also none, also `/`), `?` exactly one character; everything else is literal.

    Linear in the value: `*`-only patterns as compile_pattern, patterns with `?` by
    _question_matcher.
    """
    if "?" not in pattern:
        return compile_pattern(pattern)
    return _question_matcher(pattern)


def widen(pattern: str) -> str:
    """The `*`-only pattern matching everything `pattern` (with `?`) matches, and more."""
    return pattern.replace("?", "*")


def covers(outer: str, inner: str) -> bool:
    """Whether every string `inner` matches is also matched by `outer`, or False when that
    cannot be shown (never True wrongly).

    For `*` patterns, exactly when `outer` matches the text of `inner` with `inner`'s stars as
    characters that only `outer`'s stars may absorb: a literal piece of `outer` never contains
    `*`, so matching `inner`'s text with compile_pattern does just that. If it matches, each way
    of filling `inner`'s stars is absorbed by the star of `outer` that took it. If it does not,
    filling each star of `inner` with a character that `outer` never names gives a string
    `inner` matches and `outer` does not (only `outer`'s stars could absorb that character).

    A `?` makes the answer conservative: `inner`'s is widened to `*` (inner matches more), and
    `outer`'s is taken literally by compile_pattern (outer matches less), so True still means
    covered.
    """
    return compile_pattern(outer)(widen(inner))


def _head(pattern: str) -> str:
    return pattern.partition("*")[0]


def _tail(pattern: str) -> str:
    return pattern.rpartition("*")[2]


def overlaps(p: str, q: str) -> bool:
    """Whether some string matches both patterns, or True when that cannot be ruled out.

    For `*` patterns: without a star a pattern is one string. With stars in both, the literal
    starts must agree (one a prefix of the other) and so must the literal ends; then the longer
    start, every middle piece of `p`, every middle piece of `q` and the longer end, in that
    order, is a string both match. A `?` is widened to `*` first (both match more), so False
    still means disjoint.
    """
    p, q = widen(p), widen(q)
    if "*" not in p:
        return compile_pattern(q)(p)
    if "*" not in q:
        return compile_pattern(p)(q)
    hp, hq, tp, tq = _head(p), _head(q), _tail(p), _tail(q)
    return (hp.startswith(hq) or hq.startswith(hp)) and (tp.endswith(tq) or tq.endswith(tp))
