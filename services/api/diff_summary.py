"""Diff trees (diff_tree.py) read from graveler, and the bounded LRU cache of those between commits.

A diff between two commits never changes, so its tree is cached under the resolved commit ids
(and whether it is three-dot): a branch name is resolved on every request, so a new commit on
it is a new key, never a stale answer. A branch's uncommitted changes are not cached: any write
changes them and nothing the API can read cheaply identifies the staging area's state (the
head commit id stays the same while objects are staged), so each request reads them anew.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from services.api.diff_tree import ADDED, CHANGED, REMOVED, Change, DiffTree, build
from silt.graveler.v1 import graveler_pb2 as api

# The most changes one summary reads: past this a summary is marked truncated. 500,000 changes
# hold about 100 MB while their tree is built.
MAX_CHANGES = 500_000
# What graveler answers per call (its own page limit).
READ_PAGE = 10_000
# Everything the cache holds, in objects plus folders of its trees.
CACHE_CAPACITY = 300_000
# Filters of one diff whose trees are kept (the oldest built is dropped first).
MAX_FILTERED_TREES = 8
# A summary's reads stop after this long.
BUILD_SECONDS = 60.0

_KINDS = {api.DIFF_TYPE_ADDED: ADDED, api.DIFF_TYPE_REMOVED: REMOVED, api.DIFF_TYPE_CHANGED: CHANGED}

# (after, amount) -> (items, has_more): one graveler diff page.
ReadPage = Callable[[str, int], Awaitable[tuple[list[api.DiffItem], bool]]]


def change_of(item: api.DiffItem) -> Change:
    kind = _KINDS.get(item.type, CHANGED)
    side = item.left if kind == REMOVED else item.right
    return Change(item.key, kind, int(side.size))


async def read_changes(read: ReadPage, limit: int = MAX_CHANGES) -> tuple[list[Change], bool]:
    """Every change of a diff in key order (at most limit), and whether there were more."""
    changes: list[Change] = []
    after = ""
    deadline = time.monotonic() + BUILD_SECONDS
    while len(changes) < limit:
        if time.monotonic() > deadline:
            return changes, True
        items, has_more = await read(after, min(READ_PAGE, limit - len(changes) + 1))
        changes.extend(change_of(item) for item in items)
        if not has_more or not items:
            return changes[:limit], len(changes) > limit
        after = items[-1].key
    return changes[:limit], True


class _Entry:
    def __init__(self, changes: list[Change], truncated: bool) -> None:
        self.changes = changes
        self.truncated = truncated
        self.trees: dict[str, DiffTree] = {}

    @property
    def size(self) -> int:
        return len(self.changes) + sum(t.size for t in self.trees.values())


class SummaryCache:
    """Trees of commit-to-commit diffs, least recently used evicted past `capacity` objects and
    folders; concurrent requests for the same diff share one read."""

    def __init__(self, capacity: int = CACHE_CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, ...], _Entry] = OrderedDict()
        self._reading: dict[tuple[str, ...], asyncio.Future[_Entry]] = {}
        self.reads = 0  # diffs read from graveler, for tests and the bench

    async def tree(self, key: tuple[str, ...], read: ReadPage, substring: str) -> DiffTree:
        entry = self._entries.get(key)
        if entry is None:
            entry = await self._read(key, read)
        else:
            self._entries.move_to_end(key)
        tree = entry.trees.get(substring)
        if tree is None:
            if len(entry.trees) >= MAX_FILTERED_TREES:
                del entry.trees[next(iter(entry.trees))]
            tree = entry.trees[substring] = build(entry.changes, substring, entry.truncated)
            self._evict()
        return tree

    async def _read(self, key: tuple[str, ...], read: ReadPage) -> _Entry:
        pending = self._reading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[_Entry] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        try:
            self.reads += 1
            changes, truncated = await read_changes(read)
            entry = _Entry(changes, truncated)
            self._entries[key] = entry
            future.set_result(entry)
            return entry
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            # Waiters get it; nobody else needs to retrieve it.
            future.exception()
            raise
        finally:
            del self._reading[key]

    def _evict(self) -> None:
        total = sum(e.size for e in self._entries.values())
        while total > self.capacity and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            total -= dropped.size


async def uncached_tree(read: ReadPage, substring: str) -> DiffTree:
    changes, truncated = await read_changes(read)
    return build(changes, substring, truncated)
