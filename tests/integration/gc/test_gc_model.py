"""Model test: random histories, then GC with retention 0 and grace 0 for objects older than the run.

After the run, every object of every retained commit (branch HEADs and tagged commits; with
retention 0 nothing else is retained) and every staged entry must be readable with its
bytes, and exactly the other uploaded objects must be gone.
"""

from __future__ import annotations

import contextlib
from typing import Any

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.gc.job import GCOptions, run_gc
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.gc.conftest import GCEnv

KEYS = ["a", "b", "c", "d/e"]
BRANCHES = ["main", "b1", "b2"]

operation = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(BRANCHES), st.sampled_from(KEYS)),
    st.tuples(st.just("delete"), st.sampled_from(BRANCHES), st.sampled_from(KEYS)),
    st.tuples(st.just("commit"), st.sampled_from(BRANCHES), st.just("")),
    st.tuples(st.just("branch"), st.sampled_from(BRANCHES[1:]), st.sampled_from(BRANCHES)),
    st.tuples(st.just("merge"), st.sampled_from(BRANCHES), st.sampled_from(BRANCHES)),
    st.tuples(st.just("reset"), st.sampled_from(BRANCHES), st.just("")),
    st.tuples(st.just("reset-hard"), st.sampled_from(BRANCHES), st.sampled_from(BRANCHES)),
    st.tuples(st.just("drop"), st.sampled_from(BRANCHES[1:]), st.just("")),
    st.tuples(st.just("tag"), st.sampled_from(BRANCHES), st.just("")),
)


def _apply(env: GCEnv, repo: str, step: tuple[str, str, str], contents: dict[str, bytes], counter: list[int]) -> None:
    kind, branch, other = step
    stub = env.stub
    counter[0] += 1
    if kind == "put":
        content = f"{branch}:{other}:{counter[0]}".encode()
        contents[env.put(repo, branch, other, content)] = content
    elif kind == "delete":
        stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch=branch, key=other))
    elif kind == "commit":
        stub.Commit(api.CommitRequest(repository=repo, branch=branch, message=f"c{counter[0]}", allow_empty=True))
    elif kind == "branch":
        stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=branch, source_ref=other))
    elif kind == "merge":
        stub.Merge(
            api.MergeRequest(
                repository=repo,
                source_ref=other,
                destination_branch=branch,
                strategy=api.MERGE_STRATEGY_SOURCE_WINS,
                allow_empty=True,
            )
        )
    elif kind == "reset":
        stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch=branch, all=True))
    elif kind == "reset-hard":
        stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch=branch, hard_ref=f"{other}~1"))
    elif kind == "drop":
        stub.DeleteBranch(api.DeleteBranchRequest(repository=repo, name=branch))
    elif kind == "tag":
        stub.CreateTag(api.CreateTagRequest(repository=repo, id=f"t{counter[0]}", ref=branch))


def _addresses(env: GCEnv, repo: str, ref: str) -> set[str]:
    found: set[str] = set()
    after = ""
    while True:
        page = env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after, amount=1000))
        found.update(item.entry.physical_address for item in page.items)
        if not page.has_more:
            return found
        after = page.items[-1].key


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(operation, min_size=4, max_size=18))
def test_gc_keeps_exactly_what_is_referenced(spark: Any, gc_env: GCEnv, steps: list[tuple[str, str, str]]) -> None:
    env = gc_env
    repo = env.new_repo(default_days=0)
    contents: dict[str, bytes] = {}
    counter = [0]
    for step in steps:
        # A step invalid in this history (missing branch, conflict, no parent) changes nothing.
        with contextlib.suppress(grpc.RpcError):
            _apply(env, repo, step, contents, counter)
    branches = env.stub.ListBranches(api.ListBranchesRequest(repository=repo, amount=1000)).branches
    tags = env.stub.ListTags(api.ListTagsRequest(repository=repo, amount=1000)).tags
    kept: set[str] = set()
    for branch in branches:
        kept |= _addresses(env, repo, branch.commit_id) | _addresses(env, repo, branch.name)
    for tag in tags:
        kept |= _addresses(env, repo, tag.commit_id)

    run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))

    for address in kept:
        assert env.read(repo, address) == contents[address], address
    gone = {address for address in contents if not env.exists(repo, address)}
    assert gone == set(contents) - kept
