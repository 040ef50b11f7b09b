"""A whole diff aggregated at every folder level in one pass: for each "/"-delimited folder, how
many objects under it were added, removed and changed and how many bytes they weigh, and its
direct children in key order, so that any folder's page of children is a bisect away."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

CHANGE_TYPES = ("added", "removed", "changed")
ADDED, REMOVED, CHANGED = range(3)

# A filter is a plain substring (never a pattern): `in` on str runs in linear time (CPython's
# fastsearch falls back to the two-way algorithm when a search does too much work).
MAX_FILTER = 256


class Change(NamedTuple):
    path: str
    kind: int  # ADDED, REMOVED or CHANGED
    size: int  # the object's size on the side that has it (the new one when changed)


@dataclass(slots=True)
class Tally:
    counts: list[int] = field(default_factory=lambda: [0, 0, 0])
    sizes: list[int] = field(default_factory=lambda: [0, 0, 0])

    def add(self, kind: int, size: int) -> None:
        self.counts[kind] += 1
        self.sizes[kind] += size

    def as_json(self) -> dict[str, dict[str, int]]:
        return {name: {"count": self.counts[i], "size_bytes": self.sizes[i]} for i, name in enumerate(CHANGE_TYPES)}

    @property
    def total(self) -> int:
        return sum(self.counts)


class Child(NamedTuple):
    path: str
    folder: Tally | None  # set for a folder
    change: Change | None  # set for an object


@dataclass
class DiffTree:
    # "" is the root; every other folder ends with "/".
    folders: dict[str, Tally] = field(default_factory=dict)
    # Each folder's direct children (folders with their trailing "/", objects by key), in key order.
    children: dict[str, list[str]] = field(default_factory=dict)
    objects: dict[str, Change] = field(default_factory=dict)
    # More changes than were read: the tallies count only those read.
    truncated: bool = False

    @property
    def size(self) -> int:
        """How many things the tree holds, for the cache's bound."""
        return len(self.objects) + len(self.folders)

    def page(self, folder: str, after: str, amount: int) -> tuple[list[Child], bool]:
        """The direct children of folder after `after` (exclusive), at most amount, and whether
        more follow. A folder the diff does not touch has none."""
        names = self.children.get(folder, [])
        start = bisect.bisect_right(names, after) if after else 0
        chosen = names[start : start + amount]
        out = []
        for name in chosen:
            # An object whose key ends with "/" is listed inside the folder of the same name.
            tally = self.folders.get(name) if name != folder else None
            out.append(Child(name, tally, None) if tally is not None else Child(name, None, self.objects[name]))
        return out, start + amount < len(names)


def build(changes: Iterable[Change], substring: str = "", truncated: bool = False) -> DiffTree:
    """The tree of changes given in key order; only paths containing substring when one is given."""
    tree = DiffTree(truncated=truncated)
    root = tree.folders[""] = Tally()
    tree.children[""] = []
    for change in changes:
        path = change.path
        if substring and substring not in path:
            continue
        root.add(change.kind, change.size)
        parent = ""
        start = 0
        while (cut := path.find("/", start)) >= 0:
            folder = path[: cut + 1]
            tally = tree.folders.get(folder)
            if tally is None:
                # Keys come in order, so a folder's first key places it among its siblings
                # exactly where its name sorts: children lists stay sorted without sorting.
                tally = tree.folders[folder] = Tally()
                tree.children[parent].append(folder)
                tree.children[folder] = []
            tally.add(change.kind, change.size)
            parent = folder
            start = cut + 1
        tree.children[parent].append(path)
        tree.objects[path] = change
    return tree
