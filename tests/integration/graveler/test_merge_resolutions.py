"""A merge with resolutions: keys whose merged entry the caller decided, applied only while
both sides hold what the caller saw (engine/core/merge_resolutions.py). One KV driver is
enough: the resolutions are checked and applied above the KV layer, in the merge's plan."""

from __future__ import annotations

import uuid

import pytest

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_branching import branch, contents, merge

pytestmark = pytest.mark.parametrize("store", ["local"], indirect=True)

POINTER = "t/_iceberg_table.json"


def stat(env: GravelerEnv, repo: str, ref: str, key: str) -> pb.Entry:
    return env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key=key)).entry


def fresh(etag: str) -> pb.Entry:
    return pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", size=len(etag), etag=etag)


def diverged(env: GravelerEnv) -> str:
    """A table pointer changed on main (b1 merged) and on b2 since their base: a conflict."""
    repo = env.new_repo("res")
    env.put(repo, "main", POINTER, "v0")
    env.put(repo, "main", "t/old", "old")
    env.commit(repo, "main", "base")
    branch(env, repo, "b1")
    branch(env, repo, "b2")
    env.put(repo, "b1", POINTER, "v1")
    env.commit(repo, "b1", "b1")
    assert merge(env, repo, "b1", "main").commit.id
    env.put(repo, "b2", POINTER, "v2")
    env.put(repo, "b2", "t/data/b2", "rows")
    env.commit(repo, "b2", "b2")
    return repo


def test_resolutions_settle_conflicts_and_add_keys(env: GravelerEnv) -> None:
    repo = diverged(env)
    conflicted = merge(env, repo, "b2", "main")
    assert [c.key for c in conflicted.conflicts] == [POINTER]

    combined, metadata = fresh("v3"), fresh("meta")
    resolutions = [
        api.MergeResolution(
            key=POINTER,
            expected_source=stat(env, repo, "b2", POINTER),
            expected_destination=stat(env, repo, "main", POINTER),
            result=combined,
        ),
        # A key on neither side: a file written for the merge.
        api.MergeResolution(key="t/metadata/combined.json", result=metadata),
        # A removal of a key both sides hold as base had it.
        api.MergeResolution(
            key="t/old",
            expected_source=stat(env, repo, "b2", "t/old"),
            expected_destination=stat(env, repo, "main", "t/old"),
        ),
    ]
    merged = merge(env, repo, "b2", "main", resolutions=resolutions)
    assert not merged.conflicts and merged.commit.id
    assert contents(env, repo, "main") == {
        POINTER: "v3",
        "t/data/b2": "rows",
        "t/metadata/combined.json": "meta",
    }
    assert stat(env, repo, "main", POINTER).physical_address == combined.physical_address
    b2_head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="b2")).commit_id
    assert merged.commit.parents[1] == b2_head


def test_a_stale_expectation_is_a_conflict_and_changes_nothing(env: GravelerEnv) -> None:
    repo = diverged(env)
    seen_on_main = stat(env, repo, "main", POINTER)
    # main moves after the caller looked: the resolution's destination is stale.
    env.put(repo, "main", POINTER, "v1b")
    env.commit(repo, "main", "moved")
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    resolution = api.MergeResolution(
        key=POINTER,
        expected_source=stat(env, repo, "b2", POINTER),
        expected_destination=seen_on_main,
        result=fresh("v3"),
    )
    stale = merge(
        env, repo, "b2", "main", resolutions=[resolution, api.MergeResolution(key="t/new", result=fresh("n"))]
    )
    assert [c.key for c in stale.conflicts] == [POINTER]
    assert not stale.commit.id
    assert contents(env, repo, "main")[POINTER] == "v1b"
    assert "t/new" not in contents(env, repo, "main")
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == head

    # Expecting an absent key where the source has one is stale too.
    absent = api.MergeResolution(key="t/data/b2", expected_destination=None, result=fresh("x"))
    refused = merge(env, repo, "b2", "main", resolutions=[absent])
    assert [c.key for c in refused.conflicts] == ["t/data/b2"]
