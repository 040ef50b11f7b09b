"""Finding the merge base of two commits (engine/core/commit_graph.py), on hand-built graphs."""

from __future__ import annotations

import random

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.commit_graph import find_merge_base
from silt.graveler.v1 import model_pb2 as pb


class Graph:
    """An in-memory commit graph; counts which commits the walk had to load."""

    def __init__(self) -> None:
        self.commits: dict[str, pb.Commit] = {}
        self.loaded: list[str] = []

    def add(self, commit_id: str, *parents: str) -> str:
        generation = 1 + max((self.commits[p].generation for p in parents), default=0)
        created = Timestamp(seconds=1_700_000_000 + len(self.commits))
        self.commits[commit_id] = pb.Commit(
            id=commit_id, parents=list(parents), generation=generation, creation_date=created
        )
        return commit_id

    def chain(self, prefix: str, length: int, parent: str) -> str:
        for i in range(length):
            parent = self.add(f"{prefix}{i}", parent)
        return parent

    def get(self, commit_id: str) -> pb.Commit:
        self.loaded.append(commit_id)
        return self.commits[commit_id]

    def base(self, left: str, right: str) -> str | None:
        return find_merge_base(self.get, left, right)

    def ancestors(self, commit_id: str) -> set[str]:
        seen, todo = set(), [commit_id]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self.commits[current].parents)
        return seen


def test_a_commit_is_its_own_merge_base() -> None:
    g = Graph()
    g.add("a")
    assert g.base("a", "a") == "a"


def test_an_ancestor_is_the_merge_base_of_itself_and_a_descendant() -> None:
    g = Graph()
    root = g.add("root")
    head = g.chain("c", 5, root)
    assert g.base(head, "c1") == "c1"
    assert g.base("c1", head) == "c1"
    assert g.base(head, root) == root


def test_two_branches_meet_at_their_fork_point() -> None:
    g = Graph()
    fork = g.chain("m", 3, g.add("root"))
    left = g.chain("l", 2, fork)
    right = g.chain("r", 7, fork)  # longer on one side: generations differ
    assert g.base(left, right) == fork
    assert g.base(right, left) == fork


def test_after_a_merge_the_base_is_the_merged_source_head() -> None:
    g = Graph()
    fork = g.add("root")
    feature = g.chain("f", 3, fork)
    main = g.add("merge", g.chain("m", 2, fork), feature)
    feature_next = g.chain("g", 2, feature)
    assert g.base(main, feature_next) == feature


def test_a_second_parent_path_counts_as_ancestry() -> None:
    g = Graph()
    root = g.add("root")
    side = g.add("side", root)
    merged = g.add("merged", g.add("main1", root), side)
    assert g.base(merged, side) == side


def test_criss_cross_picks_one_of_the_best_common_ancestors_the_same_both_ways() -> None:
    #      b --- d (merge b, c)
    #    /   \ /
    #  a      X
    #    \   / \
    #      c --- e (merge c, b)
    g = Graph()
    a = g.add("a")
    b = g.add("b", a)
    c = g.add("c", a)
    d = g.add("d", b, c)
    e = g.add("e", c, b)
    assert g.base(d, e) in {b, c}
    assert g.base(d, e) == g.base(e, d)
    assert g.base(g.add("d2", d), g.add("e2", e)) == g.base(d, e)


def test_a_common_ancestor_close_in_hops_loses_to_a_newer_one() -> None:
    # Both heads reach the root in one hop (first parent) and `newest` in three (second
    # parents); newest descends from root, so it is the better base.
    g = Graph()
    root = g.add("root")
    newest = g.chain("n", 3, root)
    left = g.add("left", root, g.chain("l", 2, newest))
    right = g.add("right", root, g.chain("r", 2, newest))
    assert g.base(left, right) == newest


def test_disjoint_histories_have_no_merge_base() -> None:
    g = Graph()
    left = g.chain("l", 4, g.add("root-a"))
    right = g.chain("r", 2, g.add("root-b"))
    assert g.base(left, right) is None
    assert g.base(right, left) is None


def test_a_merge_of_disjoint_histories_is_a_base_for_both_sides() -> None:
    g = Graph()
    left = g.chain("l", 2, g.add("root-a"))
    right = g.chain("r", 2, g.add("root-b"))
    joined = g.add("joined", left, right)
    assert g.base(joined, right) == right
    assert g.base(g.add("after", joined), g.add("r-next", right)) == right


def test_history_below_the_base_is_not_loaded() -> None:
    g = Graph()
    fork = g.chain("old", 500, g.add("root"))
    left = g.chain("l", 3, fork)
    right = g.chain("r", 3, fork)
    assert g.base(left, right) == fork
    # Both sides down to the fork, and nothing older: the cost follows the change.
    assert set(g.loaded) <= g.ancestors(left) | g.ancestors(right)
    assert not set(g.loaded) & (g.ancestors(fork) - {fork})


@pytest.mark.parametrize("seed", range(20))
def test_the_base_is_a_common_ancestor_that_no_other_common_ancestor_descends_from(seed: int) -> None:
    rng = random.Random(seed)
    g = Graph()
    ids = [g.add("c0")]
    for i in range(1, 60):
        first = rng.choice(ids[-8:])  # mostly recent: long lines of history
        parents = [first]
        if rng.random() < 0.3:
            second = rng.choice(ids)
            if second != first:
                parents.append(second)
        ids.append(g.add(f"c{i}", *parents))
    for _ in range(10):
        left, right = rng.choice(ids), rng.choice(ids)
        base = g.base(left, right)
        common = g.ancestors(left) & g.ancestors(right)
        assert base in common  # one root: every pair has one
        best_generation = max(g.commits[c].generation for c in common)
        assert g.commits[base].generation == best_generation
        assert not any(base in g.ancestors(c) - {c} for c in common)
