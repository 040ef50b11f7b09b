"""Conditional staging writes racing an operation that moves the branch's head under its staging
area: merge, revert, cherry-pick and import (docs/design/lockfree-staging.md, "Moving the head
under the staging area"). A conditional write judged on the old head whose compare-and-set comes
after the move is refused and judged again on the new head; one admitted before the move stays
on top of the new head, as a plain write that raced with the operation does.

Every leg runs on each KV driver, Cassandra's included (marked ``cassandra``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.core import closed_staging
from engine.core.deadline import Deadline
from engine.core.key_changes import Change
from engine.core.model import StagingToken
from engine.core.staging import ADMISSION, CLOSED
from engine.features.imports import manager
from engine.graveler import GravelerOptions
from silt.errors import Unavailable
from silt.graveler.v1 import graveler_pb2 as api
from silt.kv import Store
from silt.kv.store import AllOf
from tests.integration.graveler.conftest import GravelerEnv, graveler_env
from tests.integration.graveler.test_conditional_staging import Between, RefusedAfterSeal, _refuse, _stage, _token
from tests.integration.graveler.test_imports import PREFIX, Location, start_import, tree, wait_for


def _branch_from_main(env: GravelerEnv, repo: str, name: str) -> None:
    env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=name, source_ref="main"))


def _feature_to_merge(env: GravelerEnv, name: str, *keys: str) -> str:
    """A repository whose main holds a commit of "base" and whose branch feature, made from it,
    has a commit of keys (etag "merged") to merge into main."""
    repo = env.new_repo(name)
    env.put(repo, "main", "base", "base")
    env.commit(repo, "main")
    _branch_from_main(env, repo, "feature")
    for key in keys:
        env.put(repo, "feature", key, "merged")
    env.commit(repo, "feature")
    return repo


def _merge(env: GravelerEnv, repo: str, source: str) -> None:
    env.stub.Merge(api.MergeRequest(repository=repo, source_ref=source, destination_branch="main"))


def _closed(env: GravelerEnv, token: StagingToken) -> bool:
    return env.graveler.staging.kv.get(token.encode(), ADMISSION).value == CLOSED


def test_an_if_none_match_judged_before_a_merge_that_brings_the_key_is_refused(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judged key k absent on main; before its compare-and-set, a merge brings k in. A's
    compare-and-set then finds the token it judged closed, and A, judged again on the merged
    head, is refused: it never lands on top of a head where k already was."""
    repo = _feature_to_merge(env, "merged", "k")
    token = _token(env, repo)

    Between(env, monkeypatch, "guard", lambda: _merge(env, repo, "feature"))
    assert _stage(env, repo, "k", "a", if_absent=True) == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "k") == "merged"
    # The merge gave the branch a fresh staging token, and the empty one it sealed went.
    branch = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch.staging_token != token and list(branch.sealed_tokens) == []
    assert _closed(env, token)


def test_an_if_match_judged_before_a_revert_that_replaces_the_etag_is_refused(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = env.new_repo("reverted")
    env.put(repo, "main", "k", "v1")
    env.commit(repo, "main")
    env.put(repo, "main", "k", "v2")
    second = env.commit(repo, "main")

    def revert() -> None:
        env.stub.Revert(api.RevertRequest(repository=repo, branch="main", ref=second.id))

    Between(env, monkeypatch, "guard", revert)
    assert _stage(env, repo, "k", "a", if_match_etag="v2") == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "k") == "v1"
    # Judged again on the reverted head, If-Match on its etag holds.
    assert _stage(env, repo, "k", "b", if_match_etag="v1") == "ok"
    assert env.etag(repo, "main", "k") == "b"


def test_an_if_none_match_judged_before_a_cherry_pick_that_brings_the_key_is_refused(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = env.new_repo("picked")
    env.put(repo, "main", "base", "base")
    env.commit(repo, "main")
    _branch_from_main(env, repo, "feature")
    env.put(repo, "feature", "k", "picked")
    picked = env.commit(repo, "feature")

    def cherry_pick() -> None:
        env.stub.CherryPick(api.CherryPickRequest(repository=repo, branch="main", ref=picked.id))

    Between(env, monkeypatch, "guard", cherry_pick)
    assert _stage(env, repo, "k", "a", if_absent=True) == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "k") == "picked"


def test_a_conditional_write_admitted_before_the_merge_and_a_racing_plain_write_stay_on_top(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's compare-and-set lands before the merge (its value not yet written, so the merge finds
    the staging area clean), and a plain write lands in the same token after the merge's check:
    both were made before the move, on the head as it then was, and stay on top of the merged
    head, in the token the merge sealed there (closed: no conditional write gets in after it)."""
    repo = _feature_to_merge(env, "before", "k", "racer")
    token = _token(env, repo)
    staging = env.graveler.staging
    updater = env.graveler.updater
    set_if = updater.set_if
    raced: list[str] = []

    def move_after_a_plain_write(*args: object, **kwargs: object) -> None:
        if str(args[3]).startswith("merging") and not raced:
            raced.append("racer")
            env.put(repo, "main", "racer", "plain")  # acknowledged: the token is still the branch's
        set_if(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(updater, "set_if", move_after_a_plain_write)
    Between(env, monkeypatch, "value", lambda: _merge(env, repo, "feature"))
    assert _stage(env, repo, "k", "a", if_absent=True) == "ok"
    assert raced and env.etag(repo, "main", "k") == "a"
    assert env.etag(repo, "main", "racer") == "plain"
    branch = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch.staging_token != token and list(branch.sealed_tokens) == [token]
    assert _closed(env, token) and staging.get(token, b"racer") is not None
    # Both are uncommitted changes on top of the merge, and the next commit takes them.
    diff = env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main")).items
    assert sorted(d.key for d in diff) == ["k", "racer"]
    committed = env.commit(repo, "main")
    assert env.etag(repo, committed.id, "k") == "a"
    assert env.etag(repo, committed.id, "racer") == "plain"


def test_a_merge_that_fails_after_closing_the_staging_token_seals_it(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move's compare-and-set fails (the store went away) after the token was closed: the
    branch gets a fresh staging token, so conditional writes go on."""
    repo = _feature_to_merge(env, "failed", "k")
    token = _token(env, repo)
    updater = env.graveler.updater
    set_if = updater.set_if

    def fails_on_merge(*args: object, **kwargs: object) -> None:
        if str(args[3]).startswith("merging"):
            raise Unavailable("the store went away")
        set_if(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(updater, "set_if", fails_on_merge)
    with pytest.raises(Exception, match="went away"):
        _merge(env, repo, "feature")
    monkeypatch.setattr(updater, "set_if", set_if)
    assert _closed(env, token) and _token(env, repo) != token
    assert _stage(env, repo, "k", "a", if_absent=True) == "ok"
    assert env.etag(repo, "main", "k") == "a"


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path


@pytest.fixture
def import_env(store: Store, tmp_path: Path, landing: Path) -> Iterator[GravelerEnv]:
    yield from graveler_env(store, tmp_path, GravelerOptions(allowed_import_prefixes=(f"local://{landing}",)))


def test_an_if_none_match_judged_before_an_import_that_brings_the_key_is_refused(
    import_env: GravelerEnv, landing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for a merge; the branch's uncommitted change stays on top of the import, in the token
    the import sealed there, and a second import keeps it there too (it no longer waits for
    sealed tokens that hold changes)."""
    env = import_env
    tree(landing, {"new/k": b"k", "more/m": b"m"})
    repo = env.new_repo("imported")
    env.put(repo, "main", "other", "uncommitted")
    token = _token(env, repo)

    def run_import() -> None:
        import_id = start_import(
            env.stub, repo, Location(type=PREFIX, path=f"local://{landing}/new", destination="in/")
        )
        status = wait_for(env.stub, repo, import_id)
        assert status.completed, status.error

    Between(env, monkeypatch, "guard", run_import)
    assert _stage(env, repo, "in/k", "a", if_absent=True) == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "in/k") == hashlib.md5(b"k").hexdigest()  # the imported object's
    branch = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch.staging_token != token and list(branch.sealed_tokens) == [token]
    assert _closed(env, token)

    import_id = start_import(env.stub, repo, Location(type=PREFIX, path=f"local://{landing}/more", destination="m/"))
    status = wait_for(env.stub, repo, import_id)
    assert status.completed, status.error
    assert env.etag(repo, "main", "m/m") == hashlib.md5(b"m").hexdigest()
    diff = env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main")).items
    assert [d.key for d in diff] == ["other"]
    assert env.etag(repo, "main", "other") == "uncommitted"


class AllowEveryKey:
    """A reset's key check that allows every change, so that the reset takes its checked path."""

    def check(self, changes: Iterable[Change], what: str) -> None:
        list(changes)

    def check_keys(self, keys: Iterable[str], what: str) -> None:
        pass

    def check_prefixes(self, prefixes: Iterable[str], what: str) -> None:
        pass

    def removal_prefixes(self) -> list[str]:
        return [""]


def test_an_if_match_judged_before_a_checked_hard_reset_is_refused_even_right_after_the_move(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checked hard reset keeps the staging token sealed on top of the head it moves to. A
    judged k on the old head; its compare-and-set is made right after the reset's move (the
    reset waits there until it is). Closed before the move, the token refuses it, and A,
    judged again on the head the reset moved to, is refused."""
    repo = env.new_repo("hardreset")
    env.put(repo, "main", "k", "v1")
    first = env.commit(repo, "main")
    env.put(repo, "main", "k", "v2")
    env.commit(repo, "main")
    judged, moved, tried = threading.Event(), threading.Event(), threading.Event()
    kv = env.graveler.staging.kv
    apply = kv.apply

    def guard_after_the_move(partition: bytes, puts: Any, *args: Any, **kwargs: Any) -> None:
        condition = args[1] if len(args) > 1 else kwargs.get("condition")
        if not tried.is_set() and isinstance(condition, AllOf) and ADMISSION in [key for key, _ in condition]:
            judged.set()
            assert moved.wait(30)
            try:
                apply(partition, puts, *args, **kwargs)
            finally:
                tried.set()
            return
        apply(partition, puts, *args, **kwargs)

    updater = env.graveler.updater
    set_if = updater.set_if

    def move_then_wait(*args: Any, **kwargs: Any) -> None:
        set_if(*args, **kwargs)
        if str(args[3]).startswith("reset"):
            moved.set()
            assert tried.wait(30)

    monkeypatch.setattr(kv, "apply", guard_after_the_move)
    monkeypatch.setattr(updater, "set_if", move_then_wait)
    outcome: list[str] = []
    writer = threading.Thread(target=lambda: outcome.append(_stage(env, repo, "k", "a", if_match_etag="v2")))
    writer.start()
    assert judged.wait(30)
    env.graveler.reset_branch(repo, "main", hard_ref=first.id, check=AllowEveryKey())
    writer.join(60)
    assert outcome == ["FAILED_PRECONDITION"]
    assert env.etag(repo, "main", "k") == "v1"


def _seal_by_a_commit_in_flight(env: GravelerEnv, repo: str) -> None:
    """Leave the branch's staging token sealed by a commit that has not moved the branch yet (a
    refusing hook stops it right after its seal)."""
    handle = env.graveler.refs.repository(repo)
    with pytest.raises(RefusedAfterSeal):
        env.graveler.committer.commit(handle, "main", "m", {}, "t", True, [], Deadline(), after_seal=_refuse)


def test_an_import_keeps_a_commit_in_flight_on_top_and_waits_for_copies_in_its_region(
    import_env: GravelerEnv, landing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sealed tokens holding changes (a commit in flight) stay on top of the import's head, and
    the next commit takes them; while one also holds a copy of the head's value inside the
    import's region (which would hide the imported object), the import waits."""
    env = import_env
    tree(landing, {"new/k": b"k"})
    repo = env.new_repo("inflight")
    env.put(repo, "main", "in/k", "old")
    env.commit(repo, "main")
    env.put(repo, "main", "other", "in flight")
    _seal_by_a_commit_in_flight(env, repo)

    def run_import() -> api.ImportStatusInfo:
        import_id = start_import(
            env.stub, repo, Location(type=PREFIX, path=f"local://{landing}/new", destination="in/")
        )
        return wait_for(env.stub, repo, import_id)

    status = run_import()
    assert status.completed, status.error
    assert env.etag(repo, "main", "in/k") == hashlib.md5(b"k").hexdigest()
    diff = env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main")).items
    assert [d.key for d in diff] == ["other"]
    committed = env.commit(repo, "main")
    assert env.etag(repo, committed.id, "other") == "in flight"

    # The head's own entry staged again: a copy (what a partial commit leaves in its tokens).
    env.stub.StageEntry(
        api.StageEntryRequest(
            repository=repo,
            branch="main",
            key="in/k",
            entry=env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main@", key="in/k")).entry,
        )
    )
    env.put(repo, "main", "other", "again")
    _seal_by_a_commit_in_flight(env, repo)
    monkeypatch.setattr(manager, "COMMIT_WAIT_SECONDS", 0.5)
    status = run_import()
    assert status.error and not status.completed, status


def test_a_staging_token_left_closed_by_a_mover_that_died_is_sealed_by_the_writers_it_refuses(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mover closed the staging token and died before its set_if (no move, no release): the
    conditional writers it refuses seal it once it has stayed closed for SEAL_AFTER_S (shortened
    here to within one write's retries), and the write succeeds in the fresh token; what the
    closed token held stays, sealed."""
    monkeypatch.setattr(closed_staging, "SEAL_AFTER_S", 0.2)
    repo = env.new_repo("stuck")
    env.put(repo, "main", "before", "kept")
    token = _token(env, repo)
    env.graveler.staging.close(token)
    assert _stage(env, repo, "k", "a", if_absent=True) == "ok"
    branch = env.graveler.refs.get_branch(env.graveler.refs.repository(repo), "main").branch
    assert branch.staging_token != token and token in branch.sealed_tokens
    assert env.etag(repo, "main", "k") == "a" and env.etag(repo, "main", "before") == "kept"
    env.commit(repo, "main")
    assert env.etag(repo, "main", "before") == "kept"
