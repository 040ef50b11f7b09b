"""Diff, merge, revert, cherry-pick, reset, partial commits and filtered logs, over gRPC on every driver."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core import branching
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of

ADDED, REMOVED, CHANGED, PREFIX = (
    api.DIFF_TYPE_ADDED,
    api.DIFF_TYPE_REMOVED,
    api.DIFF_TYPE_CHANGED,
    api.DIFF_TYPE_PREFIX_CHANGED,
)


def branch(env: GravelerEnv, repo: str, name: str, source: str = "main") -> None:
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=name, source_ref=source))


def diff_all(env: GravelerEnv, request: api.DiffRequest | api.DiffBranchRequest) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    while True:
        page = env.stub.Diff(request) if isinstance(request, api.DiffRequest) else env.stub.DiffBranch(request)
        out.extend((item.key, item.type) for item in page.items)
        if not page.has_more:
            return out
        request.after = page.items[-1].key


def merge(env: GravelerEnv, repo: str, source: str, dest: str, **kwargs: Any) -> api.MergeResponse:
    return env.stub.Merge(api.MergeRequest(repository=repo, source_ref=source, destination_branch=dest, **kwargs))


def contents(env: GravelerEnv, repo: str, ref: str) -> dict[str, str]:
    out = {}
    after = ""
    while True:
        page = env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after))
        out.update({item.key: item.entry.etag for item in page.items})
        if not page.has_more:
            return out
        after = page.items[-1].key


@pytest.fixture
def repo(env: GravelerEnv) -> str:
    name = env.new_repo("br")
    for key in ("a/1", "a/2", "b/1", "c"):
        env.put(name, "main", key, f"{key}@base")
    env.commit(name, "main", "base")
    return name


# --- diff --------------------------------------------------------------------------------------


def test_two_and_three_dot_diff(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "a/1", "changed")
    env.put(repo, "feature", "d/new", "new")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="feature", key="c"))
    env.commit(repo, "feature")
    env.put(repo, "main", "b/1", "main-change")
    env.commit(repo, "main")

    two_dot = diff_all(env, api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", amount=2))
    assert two_dot == [("a/1", CHANGED), ("b/1", CHANGED), ("c", REMOVED), ("d/new", ADDED)]
    three_dot = diff_all(env, api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", three_dot=True))
    assert three_dot == [("a/1", CHANGED), ("c", REMOVED), ("d/new", ADDED)]  # main's own change is not in it
    by_dir = diff_all(env, api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", delimiter="/"))
    assert by_dir == [("a/", PREFIX), ("b/", PREFIX), ("c", REMOVED), ("d/", PREFIX)]
    by_other = diff_all(env, api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", delimiter="/n"))
    assert by_other == [("a/1", CHANGED), ("b/1", CHANGED), ("c", REMOVED), ("d/n", PREFIX)]
    under_a = diff_all(env, api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", prefix="a/"))
    assert under_a == [("a/1", CHANGED)]
    item = env.stub.Diff(api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", prefix="a/")).items[0]
    assert item.left.etag == "a/1@base" and item.right.etag == "changed"


def summary_all(env: GravelerEnv, request: api.DiffSummaryRequest) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    while True:
        page = env.stub.DiffSummary(request)
        assert len(page.keys) == len(page.types) == len(page.sizes)
        assert len(page.keys) <= (request.amount or 10_000)
        out.extend(zip(page.keys, page.types, page.sizes, strict=True))
        if not page.has_more:
            return out
        request.after = page.keys[-1]


def test_diff_summary_is_the_diff_as_columns(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "a/1", "changed!")
    for i in range(30):
        env.put(repo, "feature", f"d/new-{i:02d}", "n" * i)
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="feature", key="c"))
    env.commit(repo, "feature")
    env.put(repo, "main", "b/1", "main-change")
    env.commit(repo, "main")

    for three_dot in (False, True):
        request = api.DiffRequest(repository=repo, left_ref="main", right_ref="feature", three_dot=three_dot)
        expected = []
        for item in env.stub.Diff(request).items:
            side = item.left if item.type == api.DIFF_TYPE_REMOVED else item.right
            expected.append((item.key, item.type, side.size))
        assert len(expected) == 33 - three_dot
        for amount in (0, 1, 7, 100_000):
            summary = api.DiffSummaryRequest(
                repository=repo, left_ref="main", right_ref="feature", three_dot=three_dot, amount=amount
            )
            assert summary_all(env, summary) == expected
        after = api.DiffSummaryRequest(repository=repo, left_ref="main", right_ref="feature", after="d/new-09")
        assert [key for key, _, _ in summary_all(env, after)] == [f"d/new-{i:02d}" for i in range(10, 30)]
    negative = api.DiffSummaryRequest(repository=repo, left_ref="main", right_ref="feature", amount=-1)
    assert code_of(lambda: env.stub.DiffSummary(negative)) == grpc.StatusCode.INVALID_ARGUMENT


def test_diff_summary_pages_stop_at_their_byte_budget(
    env: GravelerEnv, repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch(env, repo, "feature")
    for i in range(20):
        env.put(repo, "feature", f"new-{i:02d}", "x")
    env.commit(repo, "feature")
    # Room for three keys of 6 bytes (each costs SUMMARY_ITEM_BYTES more) per page.
    monkeypatch.setattr(branching, "MAX_PAGE_BYTES", 3 * (6 + branching.SUMMARY_ITEM_BYTES) + 5)
    request = api.DiffSummaryRequest(repository=repo, left_ref="main", right_ref="feature")
    assert len(env.stub.DiffSummary(request).keys) == 3
    assert [key for key, _, _ in summary_all(env, request)] == [f"new-{i:02d}" for i in range(20)]


def test_uncommitted_changes(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "a/1", "edited")
    env.put(repo, "main", "z", "added")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="b/1"))
    # Re-staging the committed entry itself is not a change.
    same = env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main@", key="a/2")).entry
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="a/2", entry=same))
    changes = diff_all(env, api.DiffBranchRequest(repository=repo, branch="main"))
    assert changes == [("a/1", CHANGED), ("b/1", REMOVED), ("z", ADDED)]
    by_one = diff_all(env, api.DiffBranchRequest(repository=repo, branch="main", delimiter="1", amount=1))
    assert by_one == [("a/1", PREFIX), ("b/1", PREFIX), ("z", ADDED)]
    env.commit(repo, "main")
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == []


# --- merge ---------------------------------------------------------------------------------------


def test_clean_merge_has_two_parents_and_combines_both_sides(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "a/1", "feature")
    feature_head = env.commit(repo, "feature")
    env.put(repo, "main", "b/1", "main")
    main_head = env.commit(repo, "main")
    result = merge(env, repo, "feature", "main", message="merge feature")
    assert not result.conflicts
    assert list(result.commit.parents) == [main_head.id, feature_head.id]
    assert result.commit.message == "merge feature"
    assert contents(env, repo, "main") == {"a/1": "feature", "a/2": "a/2@base", "b/1": "main", "c": "c@base"}
    # Merging again changes nothing.
    assert code_of(lambda: merge(env, repo, "feature", "main")) == grpc.StatusCode.FAILED_PRECONDITION


def test_conflicts_are_returned_as_data_and_change_nothing(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "a/1", "feature")
    env.put(repo, "feature", "c", "feature-c")
    env.commit(repo, "feature")
    env.put(repo, "main", "a/1", "main")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="c"))
    head = env.commit(repo, "main")
    result = merge(env, repo, "feature", "main")
    assert [c.key for c in result.conflicts] == ["a/1", "c"]
    assert result.conflicts[0].source.etag == "feature" and result.conflicts[0].destination.etag == "main"
    assert not result.conflicts[1].HasField("destination")  # deleted on main
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == head.id


@pytest.mark.parametrize(
    ("strategy", "paths", "expected"),
    [
        (api.MERGE_STRATEGY_SOURCE_WINS, [], {"a/1": "feature", "c": "feature-c"}),
        (api.MERGE_STRATEGY_DEST_WINS, [], {"a/1": "main"}),
        # Beyond lakeFS: a strategy per path pattern; here a/** from the source, the rest from dest.
        (api.MERGE_STRATEGY_DEST_WINS, [("a/**", api.MERGE_STRATEGY_SOURCE_WINS)], {"a/1": "feature"}),
    ],
)
def test_merge_strategies(
    env: GravelerEnv, repo: str, strategy: int, paths: list[tuple[str, int]], expected: dict[str, str]
) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "a/1", "feature")
    env.put(repo, "feature", "c", "feature-c")
    env.commit(repo, "feature")
    env.put(repo, "main", "a/1", "main")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="c"))
    env.commit(repo, "main")
    path_strategies = [api.PathStrategy(pattern=p, strategy=api.MergeStrategy.ValueType(s)) for p, s in paths]
    result = merge(env, repo, "feature", "main", strategy=strategy, path_strategies=path_strategies)
    assert not result.conflicts
    merged = contents(env, repo, "main")
    assert {k: merged.get(k) for k in expected} == expected
    assert ("c" in merged) == ("c" in expected)


def test_squash_merge_has_one_parent(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "x", "1")
    env.commit(repo, "feature")
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    result = merge(env, repo, "feature", "main", squash=True)
    assert list(result.commit.parents) == [head]
    assert contents(env, repo, "main")["x"] == "1"


def test_merge_into_dirty_branch_is_refused(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "x", "1")
    env.commit(repo, "feature")
    env.put(repo, "main", "dirty", "1")
    assert code_of(lambda: merge(env, repo, "feature", "main")) == grpc.StatusCode.FAILED_PRECONDITION


# --- revert, cherry-pick ------------------------------------------------------------------------


def test_revert_and_cherry_pick(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "a/1", "second")
    second = env.commit(repo, "main", "second")
    env.put(repo, "main", "b/1", "third")
    env.commit(repo, "main", "third")
    reverted = env.stub.Revert(api.RevertRequest(repository=repo, branch="main", ref=second.id))
    assert not reverted.conflicts
    assert contents(env, repo, "main")["a/1"] == "a/1@base"
    assert contents(env, repo, "main")["b/1"] == "third"  # later changes stay

    branch(env, repo, "other", second.id + "~1")
    picked = env.stub.CherryPick(api.CherryPickRequest(repository=repo, branch="other", ref=second.id))
    assert picked.commit.message == "second"
    assert picked.commit.metadata["cherry-pick-origin"] == second.id
    assert contents(env, repo, "other")["a/1"] == "second"
    assert contents(env, repo, "other")["b/1"] == "b/1@base"


def test_revert_conflict_names_the_keys(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "a/1", "second")
    second = env.commit(repo, "main")
    env.put(repo, "main", "a/1", "third")
    env.commit(repo, "main")
    result = env.stub.Revert(api.RevertRequest(repository=repo, branch="main", ref=second.id))
    assert [c.key for c in result.conflicts] == ["a/1"]
    assert contents(env, repo, "main")["a/1"] == "third"


def test_revert_of_merge_commit_needs_parent_number(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "feature")
    env.put(repo, "feature", "f", "1")
    env.commit(repo, "feature")
    merged = merge(env, repo, "feature", "main").commit
    request = api.RevertRequest(repository=repo, branch="main", ref=merged.id)
    assert code_of(lambda: env.stub.Revert(request)) == grpc.StatusCode.INVALID_ARGUMENT
    request.parent_number = 1
    assert not env.stub.Revert(request).conflicts
    assert "f" not in contents(env, repo, "main")


# --- reset, partial commits ----------------------------------------------------------------------


def test_reset_key_prefix_all_and_hard(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "a/1", "x")
    env.put(repo, "main", "a/2", "x")
    env.put(repo, "main", "b/1", "x")
    env.put(repo, "main", "new", "x")
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", key="b/1"))
    assert contents(env, repo, "main")["b/1"] == "b/1@base"
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", prefix="a/"))
    assert contents(env, repo, "main")["a/1"] == "a/1@base"
    assert contents(env, repo, "main")["new"] == "x"
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", all=True))
    assert "new" not in contents(env, repo, "main")

    env.put(repo, "main", "c", "later")
    later = env.commit(repo, "main")
    result = env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", hard_ref="main~1"))
    assert result.branch.commit_id == later.parents[0]
    assert contents(env, repo, "main")["c"] == "c@base"


def test_commit_a_subset_keeps_the_rest_staged(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "a/1", "new-a1")
    env.put(repo, "main", "a/new", "new")
    env.put(repo, "main", "b/1", "new-b1")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="c"))
    partial = env.commit(repo, "main", "only a/", prefixes=["a/"])
    committed = contents(env, repo, partial.id)
    assert committed["a/1"] == "new-a1" and committed["a/new"] == "new"
    assert committed["b/1"] == "b/1@base" and "c" in committed
    # The rest is still staged and visible on the branch.
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == [("b/1", CHANGED), ("c", REMOVED)]
    assert contents(env, repo, "main")["b/1"] == "new-b1"
    rest = env.commit(repo, "main", "the rest")
    assert contents(env, repo, rest.id) == {"a/1": "new-a1", "a/2": "a/2@base", "a/new": "new", "b/1": "new-b1"}


# --- log filters ------------------------------------------------------------------------------------


def test_log_filters(env: GravelerEnv, repo: str) -> None:
    ids = {}
    for i, key in enumerate(["a/1", "b/1", "a/2", "c"]):
        env.put(repo, "main", key, f"v{i}")
        ids[key] = env.commit(repo, "main", f"touch {key}").id

    def messages(**kwargs: Any) -> list[str]:
        return [c.message for c in env.stub.Log(api.LogRequest(repository=repo, ref="main", **kwargs)).commits]

    assert messages(objects=["a/1"]) == ["touch a/1", "base"]
    assert messages(prefixes=["a/"]) == ["touch a/2", "touch a/1", "base"]
    assert messages(limit=2) == ["touch c", "touch a/2"]
    assert messages(stop_at=ids["b/1"]) == ["touch c", "touch a/2"]
    future = Timestamp()
    future.GetCurrentTime()
    future.seconds += 3600
    assert messages(since=future) == []

    branch(env, repo, "side", ids["a/1"])
    env.put(repo, "side", "s", "1")
    env.commit(repo, "side", "side work")
    merge(env, repo, "side", "main", message="merge side")
    assert "side work" in messages()
    assert "side work" not in messages(first_parent=True)
