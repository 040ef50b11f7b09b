"""A branch's head moves by merge, revert or cherry-pick; no staged copy may hide the new head.

A commit of a prefix leaves its tokens sealed, holding copies of the values it committed until
the background cleanup drops them. The head moves below those copies: these tests hold the
cleanup back (a task that blocks the cleaner's worker) so that the copies are still there, and
check that the branch then reads exactly its new head, on every KV driver.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from engine.core.model import StagingToken
from engine.graveler import Graveler, GravelerOptions
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from tests.integration.graveler.conftest import GravelerEnv, graveler_env
from tests.integration.graveler.test_branching import branch, contents, merge
from tests.integration.graveler.test_concurrency import KeyHistory, is_delete, snapshot


@contextmanager
def cleanup_held(graveler: Graveler) -> Iterator[None]:
    """Nothing submitted to the cleaner runs until the block ends."""
    gate = threading.Event()
    graveler.cleaner.submit(gate.wait, 60)
    try:
        yield
    finally:
        gate.set()
        graveler.cleaner.flush(60)


def diverged(env: GravelerEnv) -> str:
    """A repository where main committed e=v1 and dev, branched from it, committed e=v7."""
    repo = env.new_repo("moves")
    env.put(repo, "main", "e", "v1")
    env.commit(repo, "main")
    branch(env, repo, "dev")
    env.put(repo, "dev", "e", "v7")
    env.commit(repo, "dev")
    return repo


def test_merge_after_a_prefix_commit_shows_the_merged_value(env: GravelerEnv) -> None:
    repo = diverged(env)
    with cleanup_held(env.graveler):
        env.put(repo, "main", "e", "v4")
        env.commit(repo, "main", prefixes=["e"])
        result = merge(env, repo, "dev", "main", strategy=api.MERGE_STRATEGY_SOURCE_WINS)
        assert not result.conflicts
        assert contents(env, repo, "main@") == {"e": "v7"}
        assert contents(env, repo, "main") == {"e": "v7"}
        assert env.etag(repo, "main", "e") == "v7"
    assert contents(env, repo, "main") == {"e": "v7"}


def test_revert_after_a_prefix_commit_removes_the_reverted_key(env: GravelerEnv) -> None:
    repo = env.new_repo("moves")
    with cleanup_held(env.graveler):
        env.put(repo, "main", "b/c", "v0")
        head = env.commit(repo, "main", prefixes=["b/"])
        env.stub.Revert(api.RevertRequest(repository=repo, branch="main", ref=head.id))
        assert contents(env, repo, "main@") == {}
        assert contents(env, repo, "main") == {}
        with pytest.raises(grpc.RpcError) as raised:
            env.etag(repo, "main", "b/c")
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND
    assert contents(env, repo, "main") == {}


def test_cherry_pick_after_a_prefix_commit_shows_the_picked_value(env: GravelerEnv) -> None:
    repo = env.new_repo("moves")
    env.put(repo, "main", "base", "b")
    env.commit(repo, "main")
    with cleanup_held(env.graveler):
        env.put(repo, "main", "e", "v1")
        env.commit(repo, "main", prefixes=["e"])
        branch(env, repo, "dev")
        env.put(repo, "dev", "e", "v7")
        picked = env.commit(repo, "dev")
        env.stub.CherryPick(api.CherryPickRequest(repository=repo, branch="main", ref=picked.id))
        assert contents(env, repo, "main@") == {"base": "b", "e": "v7"}
        assert contents(env, repo, "main") == {"base": "b", "e": "v7"}
    assert contents(env, repo, "main") == {"base": "b", "e": "v7"}


def test_a_staged_delete_of_an_uncommitted_key_does_not_hide_a_merged_one(env: GravelerEnv) -> None:
    # Writing a key and deleting it again leaves the branch clean (a tombstone for a key its
    # head does not have); the merge brings the key, and the branch shows it.
    repo = env.new_repo("moves")
    env.put(repo, "main", "base", "b")
    env.commit(repo, "main")
    branch(env, repo, "dev")
    env.put(repo, "dev", "x", "v9")
    env.commit(repo, "dev")
    env.put(repo, "main", "x", "v1")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="x"))
    merge(env, repo, "dev", "main")
    assert contents(env, repo, "main") == {"base": "b", "x": "v9"}
    assert env.etag(repo, "main", "x") == "v9"


def test_a_rewritten_equal_value_does_not_hide_a_merged_one(env: GravelerEnv) -> None:
    # Staging the value the head already has is no change: the branch is clean, and the merge
    # is what the branch shows afterwards.
    repo = diverged(env)
    entry = env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="e")).entry
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="e", entry=entry))
    merge(env, repo, "dev", "main")
    assert contents(env, repo, "main") == {"e": "v7"}


def test_a_write_after_the_merge_stays_on_top_of_it(env: GravelerEnv) -> None:
    repo = diverged(env)
    with cleanup_held(env.graveler):
        env.put(repo, "main", "e", "v4")
        env.commit(repo, "main", prefixes=["e"])
        merge(env, repo, "dev", "main", strategy=api.MERGE_STRATEGY_SOURCE_WINS)
        env.put(repo, "main", "e", "v8")
        assert contents(env, repo, "main") == {"e": "v8"}
        assert contents(env, repo, "main@") == {"e": "v7"}
    assert contents(env, repo, "main") == {"e": "v8"}
    env.commit(repo, "main")
    assert contents(env, repo, "main@") == {"e": "v8"}


@pytest.mark.slow
def test_writes_racing_with_merges_are_never_lost(env: GravelerEnv) -> None:
    """Writers stage and delete on main with short random pauses; a merger commits main and at
    once merges dev's newest commit into it (refused when a write made main dirty in between;
    after a few refusals in a row the writers' pauses grow, so that merges go through on a slow
    KV too).
    The merges seal and drop tokens under the writers: every acknowledged write must still be
    on main at the end, and no deleted key may come back."""
    repo = env.new_repo("moves")
    writers, keys_per_writer = 4, 2
    keys = [f"w{w}/k{k}" for w in range(writers) for k in range(keys_per_writer)]
    for key in keys:
        entry = pb.Entry(etag=f"{key}#-1")
        env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry))
    env.commit(repo, "main", "seed")
    branch(env, repo, "dev")
    histories = {key: KeyHistory() for key in keys}
    stop = threading.Event()
    errors: list[BaseException] = []
    outcomes = {"merged": 0, "refused": 0}
    merged_dev: dict[str, int] = {}
    longest_pause = [0.03]

    def writer(w: int) -> None:
        pauses = random.Random(w)
        op = 0
        try:
            while not stop.is_set():
                for k in range(keys_per_writer):
                    key = f"w{w}/k{k}"
                    if is_delete(op):
                        env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key=key))
                    else:
                        entry = pb.Entry(physical_address=f"{key}/{op}", etag=f"{key}#{op}", size=op)
                        env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry))
                    histories[key].acked.append((op, time.monotonic()))
                    stop.wait(pauses.uniform(0, longest_pause[0]))
                op += 1
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    def merger() -> None:
        try:
            refused_in_a_row = 0
            for r in range(300):
                if stop.is_set() or outcomes["merged"] >= 8:
                    return
                env.put(repo, "dev", f"d/{r % 3}", f"d#{r}")
                env.commit(repo, "dev", f"dev {r}")
                env.commit(repo, "main", "main", allow_empty=True)
                try:
                    merge(env, repo, "dev", "main")
                    outcomes["merged"] += 1
                    merged_dev.update(snapshot(env, repo, "dev"))  # only this thread changes dev
                    refused_in_a_row = 0
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                        raise
                    outcomes["refused"] += 1
                    refused_in_a_row += 1
                    if refused_in_a_row % 4 == 0:
                        longest_pause[0] = min(2.0, longest_pause[0] * 2)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    threads.append(threading.Thread(target=merger))
    for t in threads:
        t.start()
    threads[-1].join(300)
    stop.set()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert outcomes["merged"] > 0, outcomes
    final = snapshot(env, repo, "main")
    for key, history in histories.items():
        last = history.acked[-1][0]
        if is_delete(last):
            assert key not in final, f"{key} was deleted (op {last}) but is back as op {final.get(key)}"
        else:
            assert final.get(key) == last, f"{key}: last acknowledged op {last}, main shows {final.get(key)}"
    # What the last merge brought: main never changes dev's keys.
    assert {k: v for k, v in final.items() if k.startswith("d/")} == {
        k: v for k, v in merged_dev.items() if k.startswith("d/")
    }


@pytest.fixture
def uncached_env(store: Store, tmp_path: Path) -> Iterator[GravelerEnv]:
    """Writers read the branch record afresh every time (no branch cache): a cached record can
    send a write into a token that was just sealed, which hides what this test looks for."""
    yield from graveler_env(store, tmp_path, GravelerOptions(branch_cache_seconds=0))


def test_reads_during_a_prefix_commits_clean_up_never_show_an_overwritten_value(uncached_env: GravelerEnv) -> None:
    """A key staged in two tokens (a=v0 in the older, a=v1 in the newer, both sealed) and then
    committed by prefix: while the clean-up drops the committed copies, one token at a time,
    every read still answers v1. Found by the model test on the 3-node cluster, where the
    clean-up is slow enough for a read to land between two tokens."""
    env = uncached_env
    repo = env.new_repo("cleanup")
    env.put(repo, "main", "a", "v0")
    env.put(repo, "main", "b/x", "x")
    env.commit(repo, "main", prefixes=["b/"])  # seals the token holding a=v0, commits only b/
    env.put(repo, "main", "a", "v1")
    env.graveler.cleaner.flush(60)  # the first commit's clean-up is done
    staging = env.graveler.staging
    drop_under = staging.drop_under
    seen: list[dict[str, str]] = []

    def drop_and_read(token: StagingToken, prefix: bytes) -> None:
        drop_under(token, prefix)
        seen.append(contents(env, repo, "main"))

    staging.drop_under = drop_and_read  # type: ignore[method-assign]
    try:
        with cleanup_held(env.graveler):
            env.commit(repo, "main", prefixes=["a"])
            assert contents(env, repo, "main") == {"a": "v1", "b/x": "x"}
    finally:
        staging.drop_under = drop_under  # type: ignore[method-assign]
    assert len(seen) == 2  # one drop in each token
    assert seen == [{"a": "v1", "b/x": "x"}] * 2
    assert contents(env, repo, "main") == {"a": "v1", "b/x": "x"}


def test_reads_during_a_reset_of_a_key_never_show_an_overwritten_staged_value(uncached_env: GravelerEnv) -> None:
    """a=v0 staged in a sealed token, a=v1 in the staging token, then a reset of a: while it
    drops a from each token, reads answer v1 (the reset not yet done) or the head's value,
    never v0."""
    env = uncached_env
    repo = env.new_repo("reset")
    env.put(repo, "main", "a", "head")
    env.commit(repo, "main")
    env.put(repo, "main", "a", "v0")
    env.put(repo, "main", "b/x", "x")
    env.commit(repo, "main", prefixes=["b/"])  # seals the token holding a=v0
    env.put(repo, "main", "a", "v1")
    env.graveler.cleaner.flush(60)
    staging = env.graveler.staging
    drop_key = staging.drop_key
    seen: list[str] = []

    def drop_and_read(token: StagingToken, key: bytes) -> None:
        drop_key(token, key)
        seen.append(env.etag(repo, "main", "a"))

    staging.drop_key = drop_and_read  # type: ignore[method-assign]
    try:
        env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", key="a"))
    finally:
        staging.drop_key = drop_key  # type: ignore[method-assign]
    assert "v0" not in seen, seen
    assert seen[-1] == "head"
    assert env.etag(repo, "main", "a") == "head"
