"""Which keys of one repository a user may read, write or delete: auth's answer for one object
action (silt/iam_actions.py OBJECT_ACTIONS) on one repository, and the per-key rule the edges
apply with it.

Auth decides (services/auth/policies.py key_scope); the answer carries the policy patterns
that may concern the repository, so an edge decides every key of a request or a listing
locally, with the same rule and the same matcher, after one (cached) call:

    key K of repository R is allowed when no Deny of the repository action matches R, no Deny
    of the object action matches `R/K`, and either an Allow of the repository action matches R
    (every_key) or an Allow of the object action matches `R/K`.

A write or delete is asked about with the branch it is staged on (B): a Deny of WriteBranch on
`R@B` then leaves no key, and an Allow of it counts as the repository action (every key), so
that policies on branches (silt/iam_actions.py BRANCH_ACTIONS) hold for staged writes too.

The common case, a user holding the repository action and no Deny of the object action on any
key of it, is `whole`: the edges then do no per-key work at all. Auth answers an object action
asked about a bare repository name with `whole` (every key of it), which graveler requires of
callers reading or changing entries by key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from silt.iam_actions import object_resource
from silt.wildcards import Matcher, compile_wildcard, covers, overlaps


@dataclass(frozen=True)
class KeyScope:
    repository: str
    # The repository action is held: every key, but those a deny pattern matches.
    every_key: bool
    # Resource patterns (over `<repository>/<key>`) of the object action's Allow and Deny
    # statements that may match a key of this repository.
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    _allow: tuple[Matcher, ...] = field(init=False, repr=False, compare=False)
    _deny: tuple[Matcher, ...] = field(init=False, repr=False, compare=False)
    _whole: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allow", tuple(compile_wildcard(p) for p in self.allow))
        object.__setattr__(self, "_deny", tuple(compile_wildcard(p) for p in self.deny))
        every = object_resource(self.repository, "*")
        whole = not self.deny and (self.every_key or any(covers(p, every) for p in self.allow))
        object.__setattr__(self, "_whole", whole)

    @property
    def whole(self) -> bool:
        """Every key of the repository (the repository's action, or an Allow pattern covering
        every key, and no Deny pattern about it): nothing to check per key."""
        return self._whole

    @property
    def nothing(self) -> bool:
        """No key at all."""
        return not self.every_key and not self.allow

    def allows(self, key: str) -> bool:
        if self.whole:
            return True
        resource = object_resource(self.repository, key)
        if any(m(resource) for m in self._deny):
            return False
        return self.every_key or any(m(resource) for m in self._allow)

    def allows_all(self, keys: Sequence[str]) -> bool:
        return self.whole or all(self.allows(key) for key in keys)

    def may_allow_under(self, prefix: str) -> bool:
        """Whether some key starting with prefix may be allowed: what a listing's common prefix
        needs to be shown. Decided on the patterns, not on the keys stored (which would mean
        reading every key below): True unless no allow pattern can match such a key or one
        deny pattern matches them all. A `*` or `?` inside prefix counts as a wildcard here,
        which only ever answers True more often."""
        if self.whole:
            return True
        below = object_resource(self.repository, prefix) + "*"
        if any(covers(denied, below) for denied in self.deny):
            return False
        return self.every_key or any(overlaps(allowed, below) for allowed in self.allow)

    def may_start_after(self, after: str, delimiter: str) -> bool:
        """Whether a filtered listing may start after a position its client named itself (no
        cursor): only after a key the caller may read, or a common prefix it may be shown.
        Counting on a filtered scan's cap from a position among hidden keys would tell how many
        hidden keys follow it, and a binary search over positions would spell them out."""
        if self.whole or not after or self.allows(after):
            return True
        return bool(delimiter) and after.endswith(delimiter) and self.may_allow_under(after)


def whole(repository: str) -> KeyScope:
    """Every key of repository (for callers that authorized otherwise)."""
    return KeyScope(repository, every_key=True)
