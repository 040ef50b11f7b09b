"""Whether a user may make every change an operation makes to a repository's keys, as its
object-scoped policies say: what merges, reverts, cherry-picks, resets and imports check
(graveler computes their changes; docs/security.md, "Operations that change many keys").

A change either writes a key (it adds or overwrites it: WriteObject) or removes it
(DeleteObject), decided by silt/key_scope.py's rule. A user whose scopes of both actions are
`whole` (the repository's WriteRepo, no object Deny about it) has nothing checked per key: a
check is built only for users some object statement narrows (`narrowed`), and an operation
with none is given no check at all.

A refusal names the first refused key only to a user who may read it; to others it names the
repository and the action alone, so that a refused merge is no oracle for hidden keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from silt.errors import KeysRefused
from silt.iam_actions import DELETE_OBJECT, WRITE_OBJECT, object_resource
from silt.key_scope import KeyScope

# One change to a key: the key (as stored, UTF-8) and whether the change removes it.
Change = tuple[bytes, bool]


@dataclass(frozen=True)
class ChangeScope:
    """Which keys of one repository one user may write and remove."""

    user_id: str
    write: KeyScope
    delete: KeyScope

    @property
    def whole(self) -> bool:
        return self.write.whole and self.delete.whole

    def refused(self, key: str, removed: bool) -> str | None:
        """The object action the change needs and this user lacks; None when allowed."""
        if removed:
            return None if self.delete.allows(key) else DELETE_OBJECT
        return None if self.write.allows(key) else WRITE_OBJECT


# (user, key) -> whether the user may read the key: asked only once a change is refused.
MayRead = Callable[[str, str], bool]


@dataclass(frozen=True)
class ChangeCheck:
    """The changes every one of `scopes` (the users an operation is made by and for) may make."""

    repository: str
    scopes: tuple[ChangeScope, ...]
    may_read: MayRead

    def check(self, changes: Iterable[Change], what: str) -> None:
        """KeysRefused at the first change some user may not make; changes are read lazily
        and no further than that."""
        for raw, removed in changes:
            key = raw.decode("utf-8", "surrogateescape")
            for scope in self.scopes:
                action = scope.refused(key, removed)
                if action is not None:
                    raise KeysRefused(self._refusal(scope.user_id, action, key, what))

    def check_keys(self, keys: Iterable[str], what: str) -> None:
        """Writing each of keys (an import's object destinations): what the operation is known
        to change before it runs."""
        self.check(((key.encode(), False) for key in keys), what)

    def check_prefixes(self, prefixes: Iterable[str], what: str) -> None:
        """KeysRefused for a prefix (an import's destination) below which no key may be
        written: whatever the operation brings there would be refused."""
        for prefix in prefixes:
            for scope in self.scopes:
                if not scope.write.may_allow_under(prefix):
                    raise KeysRefused(
                        f"user {scope.user_id} may not {WRITE_OBJECT} on any key under "
                        f"{self.repository}/{prefix}, where {what} would write"
                    )

    def removal_prefixes(self) -> list[str]:
        """The key prefixes outside which every user may remove every key (none nested in
        another): the literal start of each DeleteObject Deny pattern, or the whole repository
        ("") for a user holding no key but those an Allow pattern names. A branch deletion
        reads the branch's keys only there."""
        found: set[str] = set()
        for scope in self.scopes:
            if scope.delete.whole:
                continue
            if not scope.delete.every_key:
                return [""]
            for pattern in scope.delete.deny:
                prefix = _key_prefix(self.repository, pattern)
                if prefix == "":
                    return [""]
                if prefix is not None:
                    found.add(prefix)
        kept: list[str] = []
        for prefix in sorted(found):
            if not kept or not prefix.startswith(kept[-1]):
                kept.append(prefix)
        return kept

    def _refusal(self, user_id: str, action: str, key: str, what: str) -> str:
        if self.may_read(user_id, key):
            return f"user {user_id} may not {action} on {self.repository}/{key}, which {what} would change"
        return f"user {user_id} may not {action} on every key {what} would change in {self.repository}"


def _key_prefix(repository: str, pattern: str) -> str | None:
    """The literal key prefix of every key of repository the resource pattern may match ("":
    any key), or None when it matches no key of repository."""
    cut = min((i for i in (pattern.find("*"), pattern.find("?")) if i >= 0), default=len(pattern))
    literal, start = pattern[:cut], object_resource(repository, "")
    if literal.startswith(start):
        return literal[len(start) :]
    return "" if start.startswith(literal) else None


def narrowed(repository: str, scopes: Sequence[ChangeScope], may_read: MayRead) -> ChangeCheck | None:
    """The check for scopes, or None when none of them is narrowed (nothing to check per key)."""
    kept = tuple(scope for scope in scopes if not scope.whole)
    return ChangeCheck(repository, kept, may_read) if kept else None
