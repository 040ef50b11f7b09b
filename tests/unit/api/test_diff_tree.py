"""A diff's tree (services/api/diff_tree.py) and the cache of commit-to-commit trees
(services/api/diff_summary.py), without a stack."""

from __future__ import annotations

import asyncio

from services.api.diff_summary import ReadPage, SummaryCache, read_changes
from services.api.diff_tree import ADDED, CHANGED, REMOVED, Change, build
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

CHANGES = [
    Change("a.txt", ADDED, 1),
    Change("a/", ADDED, 2),  # an object named like the folder below
    Change("a/b/c", REMOVED, 4),
    Change("a/b0", CHANGED, 8),
    Change("z", ADDED, 16),
]


def test_every_folder_level_is_counted_and_children_come_in_key_order() -> None:
    tree = build(CHANGES)
    assert tree.folders[""].counts == [3, 1, 1] and tree.folders[""].sizes == [19, 4, 8]
    assert tree.folders["a/"].counts == [1, 1, 1] and tree.folders["a/b/"].sizes == [0, 4, 0]
    assert tree.children[""] == ["a.txt", "a/", "z"]
    assert tree.children["a/"] == ["a/", "a/b/", "a/b0"]
    page, more = tree.page("a/", "", 2)
    assert [(c.path, c.folder is not None) for c in page] == [("a/", False), ("a/b/", True)] and more
    page, more = tree.page("a/", "a/b/", 2)
    assert [c.path for c in page] == ["a/b0"] and not more
    assert tree.page("nothing/", "", 10) == ([], False)


def test_a_filter_keeps_matching_paths_and_their_folders_only() -> None:
    tree = build(CHANGES, "b0")
    assert tree.folders[""].counts == [0, 0, 1]
    assert tree.children[""] == ["a/"] and tree.children["a/"] == ["a/b0"]


def _reader(keys: list[str], calls: list[int]) -> ReadPage:
    async def read(after: str, amount: int) -> tuple[list[api.DiffItem], bool]:
        calls.append(amount)
        rest = [k for k in keys if k > after]
        items = [api.DiffItem(key=k, type=api.DIFF_TYPE_ADDED, right=pb.Entry(size=1)) for k in rest[:amount]]
        return items, len(rest) > amount

    return read


def test_reads_are_bounded_and_marked_truncated() -> None:
    calls: list[int] = []
    changes, truncated = asyncio.run(read_changes(_reader([f"k{i:03d}" for i in range(10)], calls), limit=4))
    assert [c.path for c in changes] == ["k000", "k001", "k002", "k003"] and truncated
    changes, truncated = asyncio.run(read_changes(_reader(["x", "y"], calls), limit=4))
    assert len(changes) == 2 and not truncated


def test_the_cache_reads_a_diff_once_and_evicts_the_least_recently_used() -> None:
    # Sizes (changes + objects and folders of each tree): 9, 10 and 14.
    cache = SummaryCache(capacity=25)

    async def run() -> None:
        calls: list[int] = []
        first = _reader(["a/1", "a/2"], calls)
        await asyncio.gather(*(cache.tree(("r", "1", "2"), first, "") for _ in range(3)))
        assert cache.reads == 1
        await cache.tree(("r", "1", "2"), first, "2")  # a filter: built from what was read
        assert cache.reads == 1
        await cache.tree(("r", "3", "4"), _reader(["b/1", "b/2", "b/3", "b/4"], calls), "")
        await cache.tree(("r", "1", "2"), first, "")
        assert cache.reads == 2
        await cache.tree(("r", "5", "6"), _reader([f"c/{i}" for i in range(6)], calls), "")
        # Past the capacity: ("r", "3", "4") was used least recently and is read again.
        await cache.tree(("r", "3", "4"), _reader(["b/1"], calls), "")
        assert cache.reads == 4

    asyncio.run(run())
