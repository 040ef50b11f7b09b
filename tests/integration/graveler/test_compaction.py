"""Every flow on a compacted branch (docs/design/compaction.md), over gRPC on every driver:
reads, diff, commit (whole and of a prefix), merge, revert, cherry-pick, reset, deletion; and
the races of a commit whose tokens leave the branch while it builds (a compaction folds them,
or a commit with nothing to commit unseals them)."""

from __future__ import annotations

import threading
from typing import Any

import grpc
import pytest

from engine.core.compaction import CompactionLost
from engine.core.deadline import NO_DEADLINE
from engine.core.model import StagingToken
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of
from tests.integration.graveler.test_branching import ADDED, CHANGED, REMOVED, branch, contents, diff_all, merge
from tests.integration.graveler.test_concurrency import _HeldBuilder


@pytest.fixture
def repo(env: GravelerEnv) -> str:
    """main: a/1 a/2 b/1 c committed; staged: a/1 changed, a/2 deleted, d added; compacted."""
    name = env.new_repo("cmp")
    for key in ("a/1", "a/2", "b/1", "c"):
        env.put(name, "main", key, f"{key}@base")
    env.commit(name, "main", "base")
    env.put(name, "main", "a/1", "a/1@new")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=name, branch="main", key="a/2"))
    env.put(name, "main", "d", "d@new")
    result = env.graveler.compact(name, "main")
    assert result.compacted_metarange_id and result.tokens_compacted >= 1
    return name


def record(env: GravelerEnv, repo: str, name: str = "main") -> object:
    return env.graveler.refs.get_branch(env.graveler.refs.repository(repo), name).branch


EXPECTED = {"a/1": "a/1@new", "b/1": "b/1@base", "c": "c@base", "d": "d@new"}
BASE = {"a/1": "a/1@base", "a/2": "a/2@base", "b/1": "b/1@base", "c": "c@base"}


def test_compaction_folds_the_tokens_and_changes_no_read(env: GravelerEnv, repo: str) -> None:
    branch_record = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch_record.compacted_metarange_id
    assert not branch_record.sealed_tokens
    assert branch_record.compaction_start_time.seconds > 0
    assert contents(env, repo, "main") == EXPECTED
    assert contents(env, repo, "main@") == BASE
    assert env.etag(repo, "main", "a/1") == "a/1@new"
    assert code_of(lambda: env.etag(repo, "main", "a/2")) == grpc.StatusCode.NOT_FOUND
    assert env.etag(repo, "main@", "a/2") == "a/2@base"
    assert env.list_all(repo, "main", prefix="a/") == ["a/1"]
    assert env.list_all(repo, "main", delimiter="/") == ["a/", "b/", "c", "d"]


def test_uncommitted_diff_includes_the_compaction(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "e", "e@staged")
    changes = diff_all(env, api.DiffBranchRequest(repository=repo, branch="main"))
    assert changes == [("a/1", CHANGED), ("a/2", REMOVED), ("d", ADDED), ("e", ADDED)]
    # Staged over compacted: a staged write back to the committed value is no change.
    env.put(repo, "main", "d", "d@again")
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", key="d"))
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main", prefix="d")) == []
    assert code_of(lambda: env.etag(repo, "main", "d")) == grpc.StatusCode.NOT_FOUND


def test_a_second_compaction_builds_on_the_first(env: GravelerEnv, repo: str) -> None:
    first = record(env, repo).compacted_metarange_id  # type: ignore[attr-defined]
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="c"))
    env.put(repo, "main", "a/2", "a/2@back")
    env.graveler.compact(repo, "main")
    second = record(env, repo)
    assert second.compacted_metarange_id not in ("", first)  # type: ignore[attr-defined]
    assert contents(env, repo, "main") == {"a/1": "a/1@new", "a/2": "a/2@back", "b/1": "b/1@base", "d": "d@new"}


def test_compacting_changes_back_to_the_head_clears_the_compaction(env: GravelerEnv) -> None:
    repo = env.new_repo("cmp")
    entry = env.put(repo, "main", "k", "v")
    env.commit(repo, "main")
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="k", entry=entry))  # no change
    assert env.graveler.compact(repo, "main").compacted_metarange_id == ""
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]
    assert code_of(lambda: env.commit(repo, "main")) == grpc.StatusCode.FAILED_PRECONDITION


def test_commit_takes_the_compaction_and_clears_it(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "e", "e@staged")
    commit = env.commit(repo, "main")
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]
    assert contents(env, repo, commit.id) == {**EXPECTED, "e": "e@staged"}
    assert contents(env, repo, "main") == contents(env, repo, "main@")
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == []
    assert code_of(lambda: env.commit(repo, "main")) == grpc.StatusCode.FAILED_PRECONDITION


def test_compaction_alone_is_something_to_commit(env: GravelerEnv, repo: str) -> None:
    commit = env.commit(repo, "main")
    assert contents(env, repo, commit.id) == EXPECTED


def test_prefix_commit_keeps_the_rest_of_the_compaction(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "a/3", "a/3@staged")  # staged on top of the compaction, under a/
    env.put(repo, "main", "b/1", "b/1@staged")  # outside a/
    commit = env.commit(repo, "main", prefixes=["a/"])
    assert contents(env, repo, commit.id) == {
        "a/1": "a/1@new",
        "a/3": "a/3@staged",
        "b/1": "b/1@base",
        "c": "c@base",
    }
    visible = {**EXPECTED, "a/3": "a/3@staged", "b/1": "b/1@staged"}
    env.graveler.cleaner.flush(30)  # the committed part leaves the sealed tokens
    assert contents(env, repo, "main") == visible
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == [("b/1", CHANGED), ("d", ADDED)]
    # Compacting again and committing the rest gives everything.
    env.graveler.compact(repo, "main")
    assert contents(env, repo, "main") == visible
    rest = env.commit(repo, "main")
    assert contents(env, repo, rest.id) == visible
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == []


def test_prefix_commit_of_only_compacted_changes(env: GravelerEnv, repo: str) -> None:
    commit = env.commit(repo, "main", prefixes=["d"])
    assert contents(env, repo, commit.id) == {**BASE, "d": "d@new"}
    env.graveler.cleaner.flush(30)
    assert contents(env, repo, "main") == EXPECTED
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == [("a/1", CHANGED), ("a/2", REMOVED)]
    assert code_of(lambda: env.commit(repo, "main", prefixes=["d"])) == grpc.StatusCode.FAILED_PRECONDITION


def test_merge_revert_and_cherry_pick_need_the_compaction_committed(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "dev", "main@")
    env.put(repo, "dev", "x", "x@dev")
    picked = env.commit(repo, "dev")
    dirty = [
        lambda: merge(env, repo, "dev", "main"),
        lambda: env.stub.Revert(api.RevertRequest(repository=repo, branch="main", ref="main")),
        lambda: env.stub.CherryPick(api.CherryPickRequest(repository=repo, branch="main", ref=picked.id)),
    ]
    for call in dirty:
        assert code_of(call) == grpc.StatusCode.FAILED_PRECONDITION
    env.commit(repo, "main")
    merged = merge(env, repo, "dev", "main")
    assert contents(env, repo, merged.commit.id) == {**EXPECTED, "x": "x@dev"}


def test_merge_onto_a_branch_whose_compaction_equals_its_head(env: GravelerEnv, repo: str) -> None:
    # Committing a prefix of everything compacted leaves a compaction with nothing in it.
    env.commit(repo, "main", prefixes=["a/", "d"])
    env.graveler.cleaner.flush(30)
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == []
    branch(env, repo, "dev", "main")
    env.put(repo, "dev", "x", "x@dev")
    env.commit(repo, "dev")
    merged = merge(env, repo, "dev", "main")
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]
    assert contents(env, repo, "main") == contents(env, repo, merged.commit.id) == {**EXPECTED, "x": "x@dev"}


def test_reset_drops_the_compaction(env: GravelerEnv, repo: str) -> None:
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", all=True))
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]
    assert contents(env, repo, "main") == BASE


def test_hard_reset_drops_the_compaction(env: GravelerEnv, repo: str) -> None:
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", hard_ref="main@"))
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]
    assert contents(env, repo, "main") == BASE


def test_reset_of_a_key_or_prefix_reaches_into_the_compaction(env: GravelerEnv, repo: str) -> None:
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", key="d"))
    assert contents(env, repo, "main") == {k: v for k, v in EXPECTED.items() if k != "d"}
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", prefix="a/"))
    assert contents(env, repo, "main") == BASE
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == []
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]


def test_delete_a_compacted_branch(env: GravelerEnv, repo: str) -> None:
    branch(env, repo, "dev", "main")
    env.put(repo, "dev", "gone", "x")
    env.graveler.compact(repo, "dev")
    env.stub.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="dev"))
    assert code_of(lambda: contents(env, repo, "dev")) == grpc.StatusCode.NOT_FOUND
    branch(env, repo, "dev", "main@")
    assert contents(env, repo, "dev") == BASE


def test_stat_of_a_missing_key_after_many_seals(env: GravelerEnv) -> None:
    repo = env.new_repo("cmp")
    env.put(repo, "main", "k", "v")
    env.commit(repo, "main")
    for i in range(5):
        env.put(repo, "main", f"s{i}", "x")
        # What a commit that failed after sealing leaves behind: one more sealed token.
        env.graveler.committer._seal(env.graveler.refs.repository(repo), "main", NO_DEADLINE)
    assert len(record(env, repo).sealed_tokens) == 5  # type: ignore[attr-defined]
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="k"))
    env.graveler.compact(repo, "main")
    assert len(record(env, repo).sealed_tokens) == 0  # type: ignore[attr-defined]
    assert code_of(lambda: env.etag(repo, "main", "k")) == grpc.StatusCode.NOT_FOUND
    assert env.etag(repo, "main", "s4") == "x"


def test_a_commit_that_wins_makes_the_compaction_fail_without_change(env: GravelerEnv, repo: str) -> None:
    env.put(repo, "main", "e", "e@staged")
    inner = env.graveler.builder
    started, release = threading.Event(), threading.Event()

    class Held:
        def apply_tokens(self, *args: Any, **kwargs: Any) -> Any:
            started.set()
            assert release.wait(30)
            return inner.apply_tokens(*args, **kwargs)

        def drop_token(self, token: StagingToken) -> None:
            inner.drop_token(token)

        def close(self) -> None:
            inner.close()

    outcome: list[BaseException | None] = []

    def compact() -> None:
        try:
            env.graveler.compaction.builder_of = Held  # only the compaction waits, not the commit
            env.graveler.compact(repo, "main")
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=compact)
    thread.start()
    try:
        assert started.wait(30)
        env.put(repo, "main", "f", "f@during")
        commit = env.commit(repo, "main")
    finally:
        release.set()
        thread.join(60)
    assert isinstance(outcome[0], CompactionLost), outcome
    assert contents(env, repo, commit.id) == {**EXPECTED, "e": "e@staged", "f": "f@during"}
    assert record(env, repo).compacted_metarange_id == ""  # type: ignore[attr-defined]
    assert contents(env, repo, "main") == contents(env, repo, commit.id)


class _BuiltThenHeld(_HeldBuilder):
    """Builds at once, then holds the result: a commit that has read its tokens and not yet moved."""

    def apply_tokens(self, *args: Any, **kwargs: Any) -> Any:
        result = self.inner.apply_tokens(*args, **kwargs)
        self.building.set()
        self.released_in_time = self.release.wait(30)
        return result


def test_a_compaction_whose_changes_cancel_a_built_commit_loses_no_delete(env: GravelerEnv) -> None:
    """The commit seals and builds x=1; a delete of x lands in the next token; a compaction
    folds both into nothing (the head again) before the commit moves the branch. The commit
    must not bring x back."""
    repo = env.new_repo("cmp")
    env.put(repo, "main", "base", "b")
    env.commit(repo, "main")
    env.put(repo, "main", "x", "x@1")
    held = _BuiltThenHeld(env.graveler.builder)
    env.graveler.builder = held
    env.graveler.compaction.builder_of = lambda: held.inner  # only the commit waits
    made: list[api.CommitInfo] = []
    thread = threading.Thread(target=lambda: made.append(env.commit(repo, "main")))
    thread.start()
    try:
        assert held.building.wait(30)
        env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="x"))
        assert env.graveler.compact(repo, "main").compacted_metarange_id == ""
    finally:
        held.release.set()
        thread.join(60)
        env.graveler.builder = held.inner
    assert held.released_in_time and made
    assert contents(env, repo, made[0].id) == {"base": "b"}
    assert contents(env, repo, "main") == {"base": "b"}


class _FirstBuiltThenHeld(_BuiltThenHeld):
    """Holds only the first build; later ones (another commit's) run through."""

    def apply_tokens(self, *args: Any, **kwargs: Any) -> Any:
        if self.building.is_set():
            return self.inner.apply_tokens(*args, **kwargs)
        return super().apply_tokens(*args, **kwargs)


def test_a_commit_whose_tokens_a_nothing_to_commit_unsealed_loses_no_delete(env: GravelerEnv) -> None:
    """Commit A seals and builds x=1; x is deleted; commit B seals both tokens, finds nothing
    to commit (x was never committed) and unseals them. A must not then commit x."""
    repo = env.new_repo("cmp")
    env.put(repo, "main", "base", "b")
    env.commit(repo, "main")
    env.put(repo, "main", "x", "x@1")
    held = _FirstBuiltThenHeld(env.graveler.builder)
    env.graveler.builder = held
    made: list[api.CommitInfo] = []
    thread = threading.Thread(target=lambda: made.append(env.commit(repo, "main")))
    thread.start()
    try:
        assert held.building.wait(30)
        env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="x"))
        assert code_of(lambda: env.commit(repo, "main")) == grpc.StatusCode.FAILED_PRECONDITION
        assert not record(env, repo).sealed_tokens  # type: ignore[attr-defined]
    finally:
        held.release.set()
        thread.join(60)
        env.graveler.builder = held.inner
    assert held.released_in_time and made
    assert contents(env, repo, made[0].id) == {"base": "b"}
    assert contents(env, repo, "main") == {"base": "b"}


def test_a_commit_that_loses_to_another_commit_plans_again_on_the_winner(env: GravelerEnv) -> None:
    """Commit A seals and builds x; y is written; commit B seals both tokens and moves the
    branch first. A's set_if fails; its next attempt finds its token committed by B and makes
    an empty commit on top of B: both stay in history, nothing is lost."""
    repo = env.new_repo("cmp")
    env.put(repo, "main", "base", "b")
    env.commit(repo, "main")
    env.put(repo, "main", "x", "x@1")
    held = _FirstBuiltThenHeld(env.graveler.builder)
    env.graveler.builder = held
    made: list[api.CommitInfo] = []
    thread = threading.Thread(target=lambda: made.append(env.commit(repo, "main", "A")))
    thread.start()
    try:
        assert held.building.wait(30)
        env.put(repo, "main", "y", "y@1")
        winner = env.commit(repo, "main", "B")
    finally:
        held.release.set()
        thread.join(60)
        env.graveler.builder = held.inner
    assert held.released_in_time and made
    assert list(made[0].parents) == [winner.id]
    assert contents(env, repo, winner.id) == {"base": "b", "x": "x@1", "y": "y@1"}
    assert contents(env, repo, "main") == contents(env, repo, made[0].id) == contents(env, repo, winner.id)
    assert not record(env, repo).sealed_tokens  # type: ignore[attr-defined]


def test_undoing_a_compacted_change_leaves_nothing_to_commit_and_nothing_staged(env: GravelerEnv) -> None:
    # The compaction holds a new key; a staged delete undoes it. The commit finds nothing to
    # commit and drops the delete's token: the compaction must go with it, or the key returns.
    repo = env.new_repo("cmp")
    env.put(repo, "main", "a", "v0")
    env.graveler.compact(repo, "main")
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="a"))
    assert code_of(lambda: env.commit(repo, "main")) == grpc.StatusCode.FAILED_PRECONDITION
    assert contents(env, repo, "main") == {}
    assert not env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch.compacted_metarange_id
    assert diff_all(env, api.DiffBranchRequest(repository=repo, branch="main")) == []
