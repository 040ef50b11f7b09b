"""The keys an operation changes on a branch, handed to a check before anything of it is
committed: how merges, reverts, cherry-picks, resets and imports honour object-scoped policies
(silt/changed_keys.py decides; services/graveler builds the check for the caller).

An operation given no check (None: its caller holds every key) computes nothing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from engine.core.committed.diff import ADDED, REMOVED, Difference, DifferenceRun

# One change to a key: the key and whether the change removes it.
Change = tuple[bytes, bool]


class KeyCheck(Protocol):
    def check(self, changes: Iterable[Change], what: str) -> None:
        """PermissionDenied at the first change the caller may not make."""
        ...

    def check_keys(self, keys: Iterable[str], what: str) -> None:
        """PermissionDenied unless the caller may write each of keys."""
        ...

    def check_prefixes(self, prefixes: Iterable[str], what: str) -> None:
        """PermissionDenied for a prefix below which the caller may write no key."""
        ...

    def removal_prefixes(self) -> list[str]:
        """The key prefixes outside which every key may be removed (none nested in another):
        all an operation removing many keys needs to show."""
        ...


def applied(differences: Iterable[Difference | DifferenceRun]) -> Iterator[Change]:
    """The changes that turn a diff's left side into its right side."""
    for item in differences:
        if isinstance(item, DifferenceRun):
            removed = item.kind == REMOVED
            for key in item.keys:
                yield key, removed
        else:
            yield item.key, item.kind == REMOVED


def undone(differences: Iterable[Difference]) -> Iterator[Change]:
    """The changes that turn a diff's right side back into its left side (what dropping
    uncommitted changes does): an added key is removed, anything else written back."""
    for item in differences:
        yield item.key, item.kind == ADDED
