"""A whole diff aggregated at every folder level in one pass: for each "/"-delimited folder, how
many objects under it were added, removed and changed and how many bytes they weigh, and its
direct children in key order, so that any folder's page of children is a bisect away."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

CHANGE_TYPES = ("added", "removed", "changed")
ADDED, REMOVED, CHANGED = range(3)

# The fewest consecutive objects of one folder added as a run rather than one by one.
MIN_RUN = 16

# Every "/" of a key makes a folder, named by a copy of the key up to it: a 1 KiB key of
# slashes alone would make a thousand folders holding half a MiB of names. A tree splits keys
# into folders this many levels deep at most (deeper, an object is listed in its folder at this
# depth, by its full key), and makes at most MAX_FOLDERS folders in all (past that, a key's new
# folders are not made: it is listed in the deepest of its folders already there).
MAX_DEPTH = 32
MAX_FOLDERS = 50_000

# A filter is a plain substring (never a pattern): `in` on str runs in linear time (CPython's
# fastsearch falls back to the two-way algorithm when a search does too much work).
MAX_FILTER = 256


class Change(NamedTuple):
    path: str
    kind: int  # ADDED, REMOVED or CHANGED
    size: int  # the object's size on the side that has it (the new one when changed)


@dataclass(slots=True)
class Changes:
    """A diff's changes in key order as columns: the i-th is paths[i], kinds[i] and sizes[i].

    Columns rather than a Change per change: a diff's changes arrive as columns (DiffSummary),
    and hundreds of thousands of long-lived tuples set off the cyclic garbage collector over
    and over while a tree is built, each time walking everything the summary cache holds.
    """

    paths: list[str] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, changes: Iterable[Change]) -> Changes:
        out = cls()
        for path, kind, size in changes:
            out.paths.append(path)
            out.kinds.append(kind)
            out.sizes.append(size)
        return out

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Change:
        return Change(self.paths[index], self.kinds[index], self.sizes[index])

    def __iter__(self) -> Iterator[Change]:
        return map(Change, self.paths, self.kinds, self.sizes)

    def extend(self, other: Changes) -> None:
        self.paths += other.paths
        self.kinds += other.kinds
        self.sizes += other.sizes

    def truncate(self, length: int) -> None:
        del self.paths[length:], self.kinds[length:], self.sizes[length:]


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
    # Each object's index in changes.
    objects: dict[str, int] = field(default_factory=dict)
    changes: Changes = field(default_factory=Changes)
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
            out.append(Child(name, tally, None) if tally is not None else Child(name, None, self.change(name)))
        return out, start + amount < len(names)

    def change(self, path: str) -> Change:
        return self.changes[self.objects[path]]


def build(changes: Changes | Iterable[Change], substring: str = "", truncated: bool = False) -> DiffTree:
    """The tree of changes given in key order; only paths containing substring when one is given."""
    columns = changes if isinstance(changes, Changes) else Changes.of(changes)
    builder = TreeBuilder(columns, substring)
    builder.add(0, len(columns))
    return builder.finish(truncated)


class TreeBuilder:
    """build() a page at a time, while the pages are read: add() each range of changes once
    `changes` holds it (in key order, ranges in turn), then finish()."""

    def __init__(self, changes: Changes, substring: str = "") -> None:
        self.tree = DiffTree(changes=changes)
        self._substring = substring
        root = self.tree.folders[""] = Tally()
        self._listed = self.tree.children[""] = []
        # The folder of the last change added, and where its changes are tallied and listed.
        self._folder = ""
        self._tally = root

    def add(self, start: int, end: int) -> None:
        """Add changes[start:end]."""
        if self._substring:
            self._add_each(start, end)
            return
        paths = self.tree.changes.paths
        # Keys come in order, so a folder's objects mostly come together: a run of them is
        # added with a few list operations (in C) instead of a step each. A folder whose keys
        # are mixed with its subfolders' goes change by change, and is not tried again.
        tried: set[str] = set()
        index = start
        while index < end:
            path = paths[index]
            folder = path[: folder_end(path)]
            stop = index if folder in tried else self._run_end(folder, index, end)
            if stop - index >= MIN_RUN:
                self._add_run(folder, index, stop)
                index = stop
            else:
                tried.add(folder)
                index = self._add_each(index, end, folder)

    def _run_end(self, folder: str, start: int, end: int) -> int:
        """Where the run of folder's own objects from changes[start] ends, when every change
        under folder in changes[start:end] is one (none is in a subfolder); start otherwise."""
        paths = self.tree.changes.paths
        # Every key starting with folder sorts below folder[:-1] + "0" ("0" follows "/").
        stop = bisect.bisect_left(paths, folder[:-1] + "0", start, end) if folder else end
        run = paths[start:stop]
        return stop if "".join(run).count("/") == len(run) * folder.count("/") else start

    def _add_run(self, folder: str, start: int, stop: int) -> None:
        tally = self._enter(folder)
        columns = self.tree.changes
        paths, kinds, sizes = columns.paths[start:stop], columns.kinds[start:stop], columns.sizes[start:stop]
        kind = kinds[0]
        if kinds.count(kind) == len(kinds):
            tally.counts[kind] += len(kinds)
            tally.sizes[kind] += sum(sizes)
        else:
            for kind, size in zip(kinds, sizes, strict=True):
                tally.add(kind, size)
        self._listed += paths
        self.tree.objects.update(zip(paths, range(start, stop), strict=True))

    def _enter(self, folder: str) -> Tally:
        """Make folder the one changes are added to (created if new, or its deepest ancestor
        in the tree when the tree has no room for it); its tally."""
        if folder != self._folder:
            tally = self.tree.folders.get(folder)
            kept = folder
            if tally is None:
                kept, tally = _add_folders(self.tree, folder)
            self._tally = tally
            # Changes are matched against the folder asked for; they are listed in the one kept.
            self._folder, self._listed = folder, self.tree.children[kept]
        return self._tally

    def _add_each(self, start: int, end: int, only: str | None = None) -> int:
        """Add changes[start:end] one by one (those containing the filter), stopping at the
        first outside folder `only` when given; returns where it stopped."""
        tree, substring = self.tree, self._substring
        objects = tree.objects
        if only is not None:
            self._enter(only)
        # Each change is tallied in its own folder only; every folder's tally is added to its
        # parent's once, in finish().
        folder, listed = self._folder, self._listed
        counts, sizes = self._tally.counts, self._tally.sizes
        paths, kinds, object_sizes = tree.changes.paths, tree.changes.kinds, tree.changes.sizes
        index = start
        while index < end:
            path = paths[index]
            if substring and substring not in path:
                index += 1
                continue
            cut = folder_end(path)
            if cut != len(folder) or not path.startswith(folder):
                if only is not None:
                    break
                tally = self._enter(path[:cut])
                folder, listed = self._folder, self._listed
                counts, sizes = tally.counts, tally.sizes
            kind = kinds[index]
            counts[kind] += 1
            sizes[kind] += object_sizes[index]
            # An object whose key ends with "/" is listed inside the folder of the same name.
            listed.append(path)
            objects[path] = index
            index += 1
        return index

    def finish(self, truncated: bool) -> DiffTree:
        _roll_up(self.tree.folders)
        self.tree.truncated = truncated
        return self.tree


def folder_end(path: str) -> int:
    """Where the name of path's folder in a tree ends: after its last "/", or after its
    MAX_DEPTH-th when it has more."""
    cut = path.rfind("/") + 1
    if cut <= MAX_DEPTH or path.count("/", 0, cut) <= MAX_DEPTH:
        return cut
    cut = 0
    for _ in range(MAX_DEPTH):
        cut = path.index("/", cut) + 1
    return cut


def _add_folders(tree: DiffTree, folder: str) -> tuple[str, Tally]:
    """folder and those of its ancestors not in the tree yet, each listed in its parent, while
    the tree has room for them; returns the deepest of them in the tree and its tally."""
    parent = ""
    start = 0
    while (cut := folder.find("/", start)) >= 0:
        name = folder[: cut + 1]
        if name not in tree.folders:
            if len(tree.folders) >= MAX_FOLDERS:
                return parent, tree.folders[parent]
            # A folder's first key places it among its siblings exactly where its name sorts:
            # children lists stay sorted without sorting.
            tree.folders[name] = Tally()
            tree.children[parent].append(name)
            tree.children[name] = []
        parent = name
        start = cut + 1
    return folder, tree.folders[folder]


def _roll_up(folders: dict[str, Tally]) -> None:
    """Add every folder's tally into its parent's, deepest first, so that each counts all the
    objects under it."""
    for name in sorted(folders, key=lambda name: name.count("/"), reverse=True):
        if not name:
            continue
        parent = folders[name[: name.rfind("/", 0, len(name) - 1) + 1]]
        tally = folders[name]
        for kind in range(len(CHANGE_TYPES)):
            parent.counts[kind] += tally.counts[kind]
            parent.sizes[kind] += tally.sizes[kind]
