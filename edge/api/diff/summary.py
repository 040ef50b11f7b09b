"""Diff trees (diff/tree.py) read from graveler, and the bounded LRU cache of those between commits.

A diff between two commits never changes, so its tree is cached under the resolved commit ids
(and whether it is three-dot): a branch name is resolved on every request, so a new commit on
it is a new key, never a stale answer. A branch's uncommitted changes are not cached: any write
changes them and nothing the API can read cheaply identifies the staging area's state (the
head commit id stays the same while objects are staged), so each request reads them anew.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from edge.api.diff.tree import ADDED, CHANGED, REMOVED, Change, Changes, DiffTree, TreeBuilder, build
from silt.graveler.v1 import graveler_pb2 as api

# The most changes one summary reads: past this a summary is marked truncated. 500,000 changes
# hold about 100 MB while their tree is built.
MAX_CHANGES = 500_000
# What one call reads: graveler's own page limit for Diff and DiffBranch.
READ_PAGE = 10_000
# What one DiffSummary call reads (graveler allows up to 100,000). Not all in one: while the
# API decodes a page graveler walks the next, and smaller pages overlap more of the two.
SUMMARY_PAGE = 25_000
# Everything the cache holds, in objects plus folders of its trees.
CACHE_CAPACITY = 300_000
# Filters of one diff whose trees are kept (the oldest built is dropped first).
MAX_FILTERED_TREES = 8
# A summary's reads stop after this long: well within a request's deadline (CALL_TIMEOUT, 30 s),
# so that a slow diff answers truncated rather than failing. A tree truncated by time is not
# cached: another read may get further.
BUILD_SECONDS = 20.0
# Trees built at once in worker threads (each holds a thread and its memory while it runs).
MAX_BUILDS = 2

_KINDS = {api.DIFF_TYPE_ADDED: ADDED, api.DIFF_TYPE_REMOVED: REMOVED, api.DIFF_TYPE_CHANGED: CHANGED}


class Page(NamedTuple):
    """One page of a diff's changes as read, decoded only by changes(): the next page is asked
    for first, so graveler walks it while this one is decoded."""

    length: int  # changes on the page
    last: str  # the page's last key, where the next page starts
    has_more: bool
    changes: Callable[[], Changes]


# (after, amount) -> the page of at most amount changes after `after`.
ReadPage = Callable[[str, int], Awaitable[Page]]


def change_of(item: api.DiffItem) -> Change:
    kind = _KINDS.get(item.type, CHANGED)
    side = item.left if kind == REMOVED else item.right
    return Change(item.key, kind, int(side.size))


def diff_page(reply: api.DiffResponse) -> Page:
    """A page of Diff or DiffBranch."""
    items = reply.items
    return Page(len(items), items[-1].key if items else "", reply.has_more, lambda: Changes.of(map(change_of, items)))


def summary_page(reply: api.DiffSummaryResponse) -> Page:
    """A page of DiffSummary: its columns are read whole, in C, with no message per change."""
    keys = reply.keys

    def changes() -> Changes:
        return Changes(list(keys), [_KINDS.get(t, CHANGED) for t in reply.types], list(reply.sizes))

    return Page(len(keys), keys[-1] if keys else "", reply.has_more, changes)


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _builds() -> asyncio.Semaphore:
    """The running loop's MAX_BUILDS slots (an asyncio semaphore belongs to one loop)."""
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(MAX_BUILDS)
    return slots


class Read(NamedTuple):
    changes: Changes
    tree: DiffTree
    timed_out: bool  # truncated because the reads ran out of time, not past `limit`


async def read_tree(read: ReadPage, substring: str = "", limit: int = MAX_CHANGES, page_size: int = READ_PAGE) -> Read:
    """Every change of a diff in key order (at most limit), and the tree of those containing
    substring, marked truncated when there were more."""
    changes = Changes()
    builder = TreeBuilder(changes, substring)
    deadline = time.monotonic() + BUILD_SECONDS
    truncated = True  # unless the last page read says nothing follows
    timed_out = False
    ahead: asyncio.Future[Page] | None = asyncio.ensure_future(read("", min(page_size, limit + 1)))
    try:
        async with _builds():
            while ahead is not None:
                page = await ahead
                ahead = None
                more = page.has_more and page.length > 0
                total = len(changes) + page.length
                if more and total < limit:
                    if time.monotonic() <= deadline:
                        ahead = asyncio.ensure_future(read(page.last, min(page_size, limit - total + 1)))
                    else:
                        timed_out = True
                elif not more:
                    truncated = total > limit
                # Off the event loop: the call for the next page goes out and its answer comes
                # in while this one is decoded and added (graveler walks it meanwhile).
                await asyncio.to_thread(_add_page, builder, page, limit)
    finally:
        if ahead is not None:
            ahead.cancel()
    return Read(changes, builder.finish(truncated), timed_out)


def _add_page(builder: TreeBuilder, page: Page, limit: int) -> None:
    changes = builder.tree.changes
    start = len(changes)
    changes.extend(page.changes())
    changes.truncate(limit)
    builder.add(start, len(changes))


class _Entry:
    def __init__(self, changes: Changes, truncated: bool) -> None:
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

    async def tree(self, key: tuple[str, ...], read: ReadPage, substring: str, page_size: int = READ_PAGE) -> DiffTree:
        entry = self._entries.get(key)
        if entry is None:
            entry = await self._read(key, read, substring, page_size)
        else:
            self._entries.move_to_end(key)
        tree = entry.trees.get(substring)
        if tree is None:
            # Another filter of a diff read before: built off the event loop, as reads are.
            async with _builds():
                tree = await asyncio.to_thread(build, entry.changes, substring, entry.truncated)
            if len(entry.trees) >= MAX_FILTERED_TREES:
                del entry.trees[next(iter(entry.trees))]
            entry.trees[substring] = tree
            self._evict()
        return tree

    async def _read(self, key: tuple[str, ...], read: ReadPage, substring: str, page_size: int) -> _Entry:
        """The entry of key, read once however many ask at the same time; its tree of substring
        is built while it is read."""
        pending = self._reading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[_Entry] = asyncio.get_running_loop().create_future()
        self._reading[key] = future
        try:
            self.reads += 1
            changes, tree, timed_out = await read_tree(read, substring, page_size=page_size)
            entry = _Entry(changes, tree.truncated)
            entry.trees[substring] = tree
            if not timed_out:  # a read that ran out of time is not the diff's last word
                self._entries[key] = entry
                self._evict()
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


async def uncached_tree(read: ReadPage, substring: str, page_size: int = READ_PAGE) -> DiffTree:
    return (await read_tree(read, substring, page_size=page_size)).tree
