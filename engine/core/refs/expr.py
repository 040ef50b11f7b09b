"""Ref expressions: ``<base>[@][~N|^N]*``.

``base`` is a branch, a tag, a full commit id or a unique prefix of one (at least 4 hex
digits). ``@`` after a branch means its committed state only (no staged changes). ``~N``
is the Nth first-parent ancestor and ``^N`` the Nth parent, as in git; ``~`` and ``^``
alone mean 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from silt.errors import InvalidArgument

# ASCII digits only (\d also matches other scripts' digits), and few enough that int() is cheap.
_MODIFIER = re.compile(r"([~^])([0-9]{0,9})(?![0-9])")
MIN_COMMIT_PREFIX = 4


@dataclass(frozen=True)
class RefExpr:
    base: str
    committed_only: bool
    modifiers: tuple[tuple[str, int], ...]  # ("~", n) or ("^", n)

    @property
    def plain(self) -> bool:
        """A bare name: a branch ref here shows staged changes."""
        return not self.committed_only and not self.modifiers


def parse(expression: str) -> RefExpr:
    if not expression:
        raise InvalidArgument("ref must not be empty")
    cut = len(expression)
    for i, char in enumerate(expression):
        if char in "~^":
            cut = i
            break
    base, rest = expression[:cut], expression[cut:]
    committed_only = base.endswith("@")
    if committed_only:
        base = base[:-1]
    if not base or "@" in base:
        raise InvalidArgument(f"invalid ref {expression!r}")
    modifiers: list[tuple[str, int]] = []
    pos = 0
    while pos < len(rest):
        match = _MODIFIER.match(rest, pos)
        if match is None:
            raise InvalidArgument(f"invalid ref {expression!r}: unexpected {rest[pos:]!r}")
        op, digits = match.groups()
        count = int(digits) if digits else 1
        if op == "^" and count == 0:
            raise InvalidArgument(f"invalid ref {expression!r}: ^0 names no parent")
        modifiers.append((op, count))
        pos = match.end()
    return RefExpr(base, committed_only, tuple(modifiers))


def looks_like_commit_prefix(name: str) -> bool:
    return len(name) >= MIN_COMMIT_PREFIX and all(c in "0123456789abcdef" for c in name)
