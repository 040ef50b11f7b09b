"""A diff's tree (edge/api/diff/tree.py) and the cache of commit-to-commit trees
(edge/api/diff/summary.py), without a stack."""

from __future__ import annotations

import asyncio

import pytest

from edge.api.diff import tree as diff_tree
from edge.api.diff.summary import Page, ReadPage, SummaryCache, diff_page, read_tree, summary_page
from edge.api.diff.tree import ADDED, CHANGED, REMOVED, Change, Changes, TreeBuilder, build
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
    async def read(after: str, amount: int) -> Page:
        calls.append(amount)
        rest = [k for k in keys if k > after]
        items = [api.DiffItem(key=k, type=api.DIFF_TYPE_ADDED, right=pb.Entry(size=1)) for k in rest[:amount]]
        return diff_page(api.DiffResponse(items=items, has_more=len(rest) > amount))

    return read


def test_reads_are_bounded_and_marked_truncated() -> None:
    calls: list[int] = []
    changes, tree, _ = asyncio.run(read_tree(_reader([f"k{i:03d}" for i in range(10)], calls), limit=4, page_size=3))
    assert [c.path for c in changes] == ["k000", "k001", "k002", "k003"] and tree.truncated
    assert calls == [3, 2]  # at most limit + 1 in all: one more than the limit tells it is exceeded
    assert tree.children[""] == ["k000", "k001", "k002", "k003"] and tree.folders[""].counts == [4, 0, 0]
    changes, tree, _ = asyncio.run(read_tree(_reader(["x", "y"], calls), limit=4))
    assert len(changes) == 2 and not tree.truncated
    # Exactly the limit, and nothing after it: not truncated.
    changes, tree, _ = asyncio.run(read_tree(_reader(["a", "b", "c", "d"], calls), limit=4, page_size=2))
    assert len(changes) == 4 and not tree.truncated


def test_pages_of_diff_and_of_summary_decode_alike() -> None:
    entry = pb.Entry(size=5)
    items = [
        api.DiffItem(key="a", type=api.DIFF_TYPE_ADDED, right=entry),
        api.DiffItem(key="b", type=api.DIFF_TYPE_REMOVED, left=pb.Entry(size=7)),
        api.DiffItem(key="c", type=api.DIFF_TYPE_CHANGED, left=pb.Entry(size=1), right=entry),
    ]
    summary = api.DiffSummaryResponse(
        keys=["a", "b", "c"],
        types=[api.DIFF_TYPE_ADDED, api.DIFF_TYPE_REMOVED, api.DIFF_TYPE_CHANGED],
        sizes=[5, 7, 5],
        has_more=True,
    )
    pages = [diff_page(api.DiffResponse(items=items, has_more=True)), summary_page(summary)]
    for page in pages:
        assert (page.length, page.last, page.has_more) == (3, "c", True)
        assert list(page.changes()) == [Change("a", ADDED, 5), Change("b", REMOVED, 7), Change("c", CHANGED, 5)]


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


@pytest.mark.parametrize("min_run", [1, 2, diff_tree.MIN_RUN])
def test_a_tree_built_page_by_page_is_the_tree_built_at_once(monkeypatch: pytest.MonkeyPatch, min_run: int) -> None:
    # Runs of one folder's objects (added in bulk when at least MIN_RUN) next to subfolders.
    more = [Change(f"a/b/{i}", ADDED, i) for i in range(5)] + [Change("a/b1", REMOVED, 64), Change("a/b2", ADDED, 3)]
    extra = [*more, Change("b//c", REMOVED, 64), Change("z/", CHANGED, 1)]
    changes = Changes.of(sorted([*CHANGES, *extra], key=lambda change: change.path))
    monkeypatch.setattr(diff_tree, "MIN_RUN", min_run)
    for substring in ("", "a", "/"):
        whole = build(changes, substring)
        assert (whole.children, {k: (t.counts, t.sizes) for k, t in whole.folders.items()}) == counted(
            changes, substring
        )
        for step in (1, 2, 3):
            builder = TreeBuilder(changes, substring)
            for start in range(0, len(changes), step):
                builder.add(start, min(start + step, len(changes)))
            paged = builder.finish(False)
            assert paged.children == whole.children and paged.objects == whole.objects
            assert {k: (t.counts, t.sizes) for k, t in paged.folders.items()} == {
                k: (t.counts, t.sizes) for k, t in whole.folders.items()
            }
    assert build(changes).change("a/b/3") == Change("a/b/3", ADDED, 3)


def counted(changes: Changes, substring: str) -> tuple[dict[str, list[str]], dict[str, tuple[list[int], list[int]]]]:
    """Children and tallies the plain way: each change counted in every folder above it."""
    children: dict[str, list[str]] = {"": []}
    tallies: dict[str, tuple[list[int], list[int]]] = {"": ([0, 0, 0], [0, 0, 0])}
    for path, kind, size in changes:
        if substring not in path:
            continue
        parent = ""
        folders = [path[: i + 1] for i, c in enumerate(path) if c == "/"]
        for folder in ["", *folders]:
            if folder not in tallies:
                tallies[folder] = ([0, 0, 0], [0, 0, 0])
                children[folder] = []
                children[parent].append(folder)
            tallies[folder][0][kind] += 1
            tallies[folder][1][kind] += size
            parent = folder
        children[parent].append(path)
    return children, tallies


def test_keys_of_many_slashes_make_a_bounded_number_of_folders() -> None:
    """A key of a thousand slashes would make a thousand folders, each named by a copy of it:
    folders stop MAX_DEPTH levels down, and the object is listed there by its full key."""
    deep = "k/" * 1000 + "x"
    tree = build([Change(deep, ADDED, 3), Change("z/y", ADDED, 1)])
    assert len(tree.folders) == diff_tree.MAX_DEPTH + 2  # the root, k/ ... 32 levels down, z/
    deepest = "k/" * diff_tree.MAX_DEPTH
    assert tree.children[deepest] == [deep]
    assert tree.folders["k/"].counts == [1, 0, 0] and tree.folders[""].counts == [2, 0, 0]
    page, _ = tree.page(deepest, "", 10)
    assert page[0].change == Change(deep, ADDED, 3)


def test_past_its_folder_budget_a_tree_lists_keys_in_their_deepest_folder_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(diff_tree, "MAX_FOLDERS", 4)  # the root and three more
    keys = ["a/b/1", "a/c/2", "a/c/d/3", "e/4"]
    tree = build([Change(k, CHANGED, 1) for k in keys])
    assert sorted(tree.folders) == ["", "a/", "a/b/", "a/c/"]
    assert tree.children["a/c/"] == ["a/c/2", "a/c/d/3"] and tree.children[""] == ["a/", "e/4"]
    assert tree.folders[""].counts == [0, 0, 4] and tree.folders["a/"].counts == [0, 0, 3]


def test_a_read_that_ran_out_of_time_is_answered_truncated_and_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    from edge.api.diff import summary as diff_summary

    keys = [f"k{i:03d}" for i in range(10)]
    calls: list[int] = []
    monkeypatch.setattr(diff_summary, "BUILD_SECONDS", -1.0)  # out of time after the first page
    cache = SummaryCache()

    async def twice() -> list[bool]:
        first = await cache.tree(("r", "a", "b", "two_dot"), _reader(keys, calls), "", page_size=3)
        second = await cache.tree(("r", "a", "b", "two_dot"), _reader(keys, calls), "", page_size=3)
        return [first.truncated, second.truncated]

    assert asyncio.run(twice()) == [True, True]
    assert cache.reads == 2  # read again: a time-truncated tree is not the diff's last word
