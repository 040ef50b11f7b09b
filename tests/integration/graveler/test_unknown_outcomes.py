"""A compare-and-set of a branch record whose outcome the KV store cannot tell (OutcomeUnknown:
on Cassandra, a Paxos round that timed out, after which another writer changed the record) is
resolved by graveler from the record itself (engine/core/updater.py, docs/design/kv.md).

A store wrapper makes one chosen conditional write of a branch record end in OutcomeUnknown: after
applying it or without, and with another writer's change of the branch landing in between or
not. Whichever way it went, the flow must finish as it would have without the fault: the call
succeeds, the branch's history gains its commit exactly once (no duplicate, no "nothing to
commit"), every staged write is committed, and nothing stays staged that was committed. Every
leg runs on each KV driver, Cassandra's included (marked ``cassandra``).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.entries import Condition as WriteCondition
from engine.core.key_changes import KeyCheck
from engine.core.model import StagingToken
from engine.core.refs import BranchRecord
from engine.core.staging import ADMISSION
from engine.graveler import Graveler, GravelerOptions
from silt.changed_keys import ChangeScope, narrowed
from silt.errors import FailedPrecondition, OutcomeUnknown, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.journal import envelope
from silt.key_scope import KeyScope
from silt.kv import Store
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import AllOf, Condition, Predicate
from silt.kv.store import Timestamp as KvTimestamp
from tests.integration.graveler.conftest import GravelerEnv, graveler_env
from tests.integration.graveler.test_branching import contents

BRANCH_KEY = b"branches/main"

# Which write of the branch record to fault: (record replaced, new record) -> whether this one.
Picks = Callable[[pb.Branch, pb.Branch], bool]


def moves_head(old: pb.Branch, new: pb.Branch) -> bool:
    return new.commit_id != old.commit_id


def seals(old: pb.Branch, new: pb.Branch) -> bool:
    return new.staging_token != old.staging_token and list(new.sealed_tokens) == [
        old.staging_token,
        *old.sealed_tokens,
    ]


def publishes(old: pb.Branch, new: pb.Branch) -> bool:
    return new.compacted_metarange_id != old.compacted_metarange_id and new.commit_id == old.commit_id


@dataclass
class Fault:
    picks: Picks
    applied: bool  # whether the write lands before the error
    between: Callable[[], None] | None  # another writer's change, after it and before the error


def _branch(stored: bytes) -> pb.Branch:
    return pb.Branch.FromString(envelope.unwrap(stored)[1])


class UnknownOutcomes(ForwardingStore):
    """inner, except that the conditional write of the branch record `main` that an armed fault
    picks raises OutcomeUnknown, as Cassandra's driver does when it cannot tell; every staging
    token any branch record named is noted."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.fault: Fault | None = None
        self.fired = 0
        self.tokens: set[StagingToken] = set()

    def arm(self, picks: Picks, applied: bool, between: Callable[[], None] | None = None) -> None:
        self.fault = Fault(picks, applied, between)

    def _note(self, key: bytes, value: bytes) -> None:
        if key.startswith(b"branches/"):
            branch = _branch(value)
            self.tokens.update(StagingToken(t) for t in [branch.staging_token, *branch.sealed_tokens])

    def _conditional(
        self, key: bytes, value: bytes | None, predicate: Predicate | None, write: Callable[[], None]
    ) -> None:
        fault = self.fault
        if (
            fault is None
            or key != BRANCH_KEY
            or value is None
            or predicate is None
            or not fault.picks(_branch(predicate), _branch(value))
        ):
            write()
            if value is not None:
                self._note(key, value)
            return
        self.fault = None  # one fault per arming; the writer in between goes through
        self.fired += 1
        if fault.applied:
            write()
            self._note(key, value)
        if fault.between is not None:
            fault.between()
        changed = "; another writer has changed the key since" if fault.between is not None else ""
        raise OutcomeUnknown(f"test: apply: outcome unknown, the write may or may not have been applied{changed}")

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        self.inner.set(partition, key, value)
        self._note(key, value)

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        self._conditional(key, value, predicate, lambda: self.inner.set_if(partition, key, value, predicate))

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: KvTimestamp | None = None,
    ) -> None:
        def write() -> None:
            self.inner.apply(partition, puts, deletes, condition, timestamp)

        if condition is None:
            write()
            for key, put in puts:
                self._note(key, put)
            return
        # Several conditions (one batch, all or none): judged by the first, as the driver does.
        key, predicate = condition[0] if isinstance(condition, AllOf) else condition
        self._conditional(key, next((v for k, v in puts if k == key), None), predicate, write)

    def close(self) -> None:
        pass  # the store fixture's to close


@pytest.fixture
def faulty(store: Store) -> UnknownOutcomes:
    return UnknownOutcomes(store)


@pytest.fixture
def env(faulty: UnknownOutcomes, tmp_path: Path) -> Iterator[GravelerEnv]:
    # No branch cache: a write started from a cached record lands in a token a commit has
    # already dropped before it writes again (the writer flow's rule), and would leave staged
    # values in a token nothing names, which assert_nothing_left_staged would report.
    yield from graveler_env(faulty, tmp_path, GravelerOptions(branch_cache_seconds=0))


def entry(etag: str) -> pb.Entry:
    return pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", size=len(etag), etag=etag)


def stage(graveler: Graveler, repo: str, branch: str, key: str, etag: str) -> None:
    graveler.stage_entry(repo, branch, key, entry(etag))


def history(graveler: Graveler, repo: str, ref: str = "main") -> list[str]:
    """Commit messages of ref, newest first, the repository's first commit left out."""
    return [c.message for c in graveler.log(repo, ref, amount=1000).commits][:-1]


def record(graveler: Graveler, repo: str, branch: str = "main") -> BranchRecord:
    return graveler.refs.get_branch(graveler.refs.repository(repo), branch)


def another_commit(graveler: Graveler, repo: str, key: str) -> Callable[[], None]:
    """Another writer stages key and commits it (on top of whatever the branch is now)."""

    def run() -> None:
        stage(graveler, repo, "main", key, f"{key}@theirs")
        graveler.commit(repo, "main", "theirs")

    return run


def a_claim(graveler: Graveler, repo: str) -> Callable[[], None]:
    """Another writer changes the branch record without moving it: the compaction sensor's claim."""

    def run() -> None:
        current = record(graveler, repo)
        claimed = pb.Branch()
        claimed.CopyFrom(current.branch)
        claimed.compaction_start_time.CopyFrom(Timestamp(seconds=1_700_000_000, nanos=uuid.uuid4().int % 10**9))
        graveler.refs.set_branch_if(graveler.refs.repository(repo), claimed, current.predicate)

    return run


def assert_nothing_left_staged(env: GravelerEnv, faulty: UnknownOutcomes, repo: str) -> None:
    """The branch has no uncommitted changes, and once the clean-up ran every token it no longer
    names is empty: what was committed does not stay staged."""
    graveler = env.graveler
    current = record(graveler, repo)
    assert current.sealed_tokens == []
    assert contents(env, repo, "main") == contents(env, repo, "main@")
    graveler.cleaner.flush(60)
    left = [t for t in faulty.tokens - set(current.tokens) if not graveler.staging.is_empty(t)]
    assert left == []


def repository(env: GravelerEnv) -> str:
    repo = env.new_repo("unknown")
    stage(env.graveler, repo, "main", "base", "base@1")
    env.graveler.commit(repo, "main", "base")
    return repo


# --- commit ---------------------------------------------------------------------------------------

COMMIT_CASES = {
    # The store applied the move and only then failed to tell.
    "applied": (True, None),
    # It did not apply, and the record is as read: sent again.
    "not applied": (False, None),
    # It applied, and another commit landed on top before the error: ours is in the history.
    "applied, then another commit": (True, "commit"),
    # It applied, and another writer changed the record (a claim) before the error.
    "applied, then another change": (True, "claim"),
    # It did not apply, and another writer changed the record: redone on the new record.
    "not applied, another change": (False, "claim"),
}


@pytest.mark.parametrize("case", list(COMMIT_CASES))
def test_a_commit_whose_move_had_an_unknown_outcome_lands_once(
    env: GravelerEnv, faulty: UnknownOutcomes, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    graveler = env.graveler
    repo = repository(env)
    for key in ("a", "b", "c/d"):
        stage(graveler, repo, "main", key, f"{key}@1")
    applied, between = COMMIT_CASES[case]
    other = {"commit": another_commit(graveler, repo, "x"), "claim": a_claim(graveler, repo), None: None}[between]
    faulty.arm(moves_head, applied, other)

    with caplog.at_level(logging.WARNING, logger="engine.core.updater"):
        commit = graveler.commit(repo, "main", "ours")

    assert faulty.fired == 1
    expected = ["theirs", "ours", "base"] if between == "commit" else ["ours", "base"]
    assert history(graveler, repo) == expected
    ours = graveler.get_commit(repo, commit.id)
    assert ours.message == "ours"
    committed = {"base": "base@1", "a": "a@1", "b": "b@1", "c/d": "c/d@1"}
    assert contents(env, repo, commit.id) == committed
    assert contents(env, repo, "main@") == committed | ({"x": "x@theirs"} if between == "commit" else {})
    assert_nothing_left_staged(env, faulty, repo)
    resolved = [r for r in caplog.records if "outcome unknown" in r.getMessage()]
    assert len(resolved) == 1 and resolved[0].exc_info is None
    assert ("did not apply" in resolved[0].getMessage()) == (between == "claim" and not applied)


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not applied"])
def test_a_move_whose_branch_was_reset_meanwhile_is_not_made_again(
    env: GravelerEnv, faulty: UnknownOutcomes, applied: bool
) -> None:
    """A hard reset to an older commit between the move and its unknown outcome: the head then
    descends from neither the new commit nor the one it was built on, so whether the move
    applied cannot be told. Making it again could undo the reset: the unknown outcome is passed
    on, and the branch stays where the reset put it."""
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "a", "a@1")
    graveler.commit(repo, "main", "second")
    first = graveler.log(repo, "main", amount=10).commits[1].id  # "base"
    stage(graveler, repo, "main", "b", "b@1")

    def reset() -> None:
        graveler.reset_branch(repo, "main", hard_ref=first)

    faulty.arm(moves_head, applied, reset)
    with pytest.raises(OutcomeUnknown):
        graveler.commit(repo, "main", "ours")
    assert faulty.fired == 1
    assert history(graveler, repo) == ["base"]
    assert record(graveler, repo).commit_id == first


def test_a_commit_not_applied_while_another_commit_took_its_tokens_commits_on_top(
    env: GravelerEnv, faulty: UnknownOutcomes
) -> None:
    """The other commit sealed what ours had sealed and committed it: ours, made again on top,
    has nothing left but stays a commit (the lost race's rule), and nothing is lost."""
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "a", "a@1")
    faulty.arm(moves_head, False, another_commit(graveler, repo, "x"))
    commit = graveler.commit(repo, "main", "ours")
    assert history(graveler, repo) == ["ours", "theirs", "base"]
    assert record(graveler, repo).commit_id == commit.id
    assert contents(env, repo, "main@") == {"base": "base@1", "a": "a@1", "x": "x@theirs"}
    assert_nothing_left_staged(env, faulty, repo)


def test_a_partial_commit_whose_move_applied_unseen_still_drops_what_it_committed(
    env: GravelerEnv, faulty: UnknownOutcomes
) -> None:
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "in/a", "in/a@1")
    stage(graveler, repo, "main", "out/b", "out/b@1")
    faulty.arm(moves_head, True, a_claim(graveler, repo))
    commit = graveler.commit(repo, "main", "ours", prefixes=["in/"])
    assert history(graveler, repo) == ["ours", "base"]
    assert contents(env, repo, commit.id) == {"base": "base@1", "in/a": "in/a@1"}
    graveler.cleaner.flush(60)
    # The committed part left the sealed token; the rest is still staged, and committed next.
    assert contents(env, repo, "main") == {"base": "base@1", "in/a": "in/a@1", "out/b": "out/b@1"}
    graveler.commit(repo, "main", "rest")
    assert history(graveler, repo) == ["rest", "ours", "base"]
    assert_nothing_left_staged(env, faulty, repo)


# --- the commit's seal ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("applied", "write_between"), [(True, False), (True, True), (False, True)], ids=["applied", "applied+write", "lost"]
)
def test_a_commit_whose_seal_had_an_unknown_outcome_commits_every_write(
    env: GravelerEnv, faulty: UnknownOutcomes, applied: bool, write_between: bool
) -> None:
    """Sealed again on the branch as it is now: the commit takes every token sealed then, a
    write that landed in the first seal's new token included."""
    graveler = env.graveler
    repo = repository(env)
    for key in ("a", "b"):
        stage(graveler, repo, "main", key, f"{key}@1")
    claim = a_claim(graveler, repo)

    def between() -> None:
        if write_between:
            stage(graveler, repo, "main", "late", "late@1")
        claim()

    faulty.arm(seals, applied, between)
    commit = graveler.commit(repo, "main", "ours")
    assert faulty.fired == 1
    assert history(graveler, repo) == ["ours", "base"]
    expected = {"base": "base@1", "a": "a@1", "b": "b@1"} | ({"late": "late@1"} if write_between else {})
    assert contents(env, repo, commit.id) == expected
    assert_nothing_left_staged(env, faulty, repo)


# --- merge, revert, cherry-pick -------------------------------------------------------------------


def feature(env: GravelerEnv) -> str:
    """A repository whose branch feature has a commit main has not."""
    graveler = env.graveler
    repo = repository(env)
    graveler.create_branch(repo, "feature", "main")
    stage(graveler, repo, "feature", "f", "f@1")
    graveler.commit(repo, "feature", "feature work")
    return repo


MOVE_CASES = {
    "applied": (True, None),
    "not applied": (False, None),
    "applied, then another commit": (True, "commit"),
    "not applied, another change": (False, "claim"),
}


@pytest.mark.parametrize("case", list(MOVE_CASES))
def test_a_merge_whose_move_had_an_unknown_outcome_lands_once(
    env: GravelerEnv, faulty: UnknownOutcomes, case: str
) -> None:
    graveler = env.graveler
    repo = feature(env)
    applied, between = MOVE_CASES[case]
    other = {"commit": another_commit(graveler, repo, "x"), "claim": a_claim(graveler, repo), None: None}[between]
    faulty.arm(moves_head, applied, other)

    outcome = graveler.merge(repo, "feature", "main", message="merged")

    assert faulty.fired == 1
    assert outcome.commit is not None and not outcome.conflicts
    merged = graveler.get_commit(repo, outcome.commit.id)
    assert len(merged.parents) == 2
    first_parent = [c.message for c in graveler.log(repo, "main", first_parent=True, amount=100).commits][:-1]
    assert first_parent == (["theirs", "merged", "base"] if between == "commit" else ["merged", "base"])
    assert contents(env, repo, outcome.commit.id) == {"base": "base@1", "f": "f@1"}
    assert_nothing_left_staged(env, faulty, repo)


@pytest.mark.parametrize("operation", ["revert", "cherry-pick"])
@pytest.mark.parametrize(("applied", "between"), [(True, "commit"), (False, "claim")], ids=["applied", "lost"])
def test_a_revert_or_cherry_pick_whose_move_had_an_unknown_outcome_lands_once(
    env: GravelerEnv, faulty: UnknownOutcomes, operation: str, applied: bool, between: str
) -> None:
    graveler = env.graveler
    repo = feature(env)
    stage(graveler, repo, "main", "r", "r@1")
    to_revert = graveler.commit(repo, "main", "to revert")
    other = another_commit(graveler, repo, "x") if between == "commit" else a_claim(graveler, repo)
    faulty.arm(moves_head, applied, other)

    if operation == "revert":
        outcome = graveler.revert(repo, "main", to_revert.id, message="reverted")
        made, expected = "reverted", {"base": "base@1"}
    else:
        outcome = graveler.cherry_pick(repo, "main", "feature")
        made, expected = "feature work", {"base": "base@1", "r": "r@1", "f": "f@1"}

    assert faulty.fired == 1
    assert outcome.commit is not None
    newer = ["theirs"] if between == "commit" else []
    assert history(graveler, repo) == [*newer, made, "to revert", "base"]
    assert contents(env, repo, outcome.commit.id) == expected
    assert_nothing_left_staged(env, faulty, repo)


def test_a_merge_that_sealed_a_written_staging_token_with_an_unknown_outcome_still_merges(
    env: GravelerEnv, faulty: UnknownOutcomes
) -> None:
    """A merge seals a staging token that holds anything before it moves the head (a write that
    wrote back the head's value, say); that seal's unknown outcome is a race: look again."""
    graveler = env.graveler
    repo = feature(env)
    stage(graveler, repo, "main", "base", "base@1")  # the head's value again: still clean
    faulty.arm(seals, True, a_claim(graveler, repo))
    outcome = graveler.merge(repo, "feature", "main", message="merged")
    assert faulty.fired == 1
    assert outcome.commit is not None
    assert history(graveler, repo, "main")[0] == "merged"
    assert contents(env, repo, "main") == {"base": "base@1", "f": "f@1"}
    assert_nothing_left_staged(env, faulty, repo)


# --- resets and compaction ------------------------------------------------------------------------


def test_a_hard_reset_that_applied_unseen_is_done(env: GravelerEnv, faulty: UnknownOutcomes) -> None:
    graveler = env.graveler
    repo = repository(env)
    first = record(graveler, repo).commit_id
    stage(graveler, repo, "main", "a", "a@1")
    graveler.commit(repo, "main", "second")
    stage(graveler, repo, "main", "b", "b@1")
    faulty.arm(moves_head, True, a_claim(graveler, repo))
    graveler.reset_branch(repo, "main", hard_ref=first)
    assert faulty.fired == 1
    assert record(graveler, repo).commit_id == first
    assert contents(env, repo, "main") == {"base": "base@1"}
    assert_nothing_left_staged(env, faulty, repo)


def test_a_hard_reset_whose_outcome_its_tokens_cannot_tell_stays_unknown(
    env: GravelerEnv, faulty: UnknownOutcomes
) -> None:
    """Reset, then a commit on top took the reset's fresh token: made again, the reset would
    undo that commit. Not made again: OutcomeUnknown, and the commit stays."""
    graveler = env.graveler
    repo = repository(env)
    first = record(graveler, repo).commit_id
    stage(graveler, repo, "main", "a", "a@1")
    graveler.commit(repo, "main", "second")
    faulty.arm(moves_head, True, another_commit(graveler, repo, "x"))
    with pytest.raises(OutcomeUnknown):
        graveler.reset_branch(repo, "main", hard_ref=first)
    assert history(graveler, repo) == ["theirs", "base"]


@pytest.mark.parametrize("applied", [True, False])
def test_a_reset_of_uncommitted_changes_with_an_unknown_outcome_is_made_again(
    env: GravelerEnv, faulty: UnknownOutcomes, applied: bool
) -> None:
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "a", "a@1")
    faulty.arm(lambda old, new: new.staging_token != old.staging_token, applied, a_claim(graveler, repo))
    graveler.reset_branch(repo, "main")
    assert faulty.fired == 1
    assert contents(env, repo, "main") == {"base": "base@1"}
    assert history(graveler, repo) == ["base"]
    assert_nothing_left_staged(env, faulty, repo)


def narrowed_check(repo: str) -> KeyCheck:
    """A real check of a user denied only keys under secret/: the reset checks what it drops."""
    denied = KeyScope(repo, every_key=True, deny=(f"{repo}/secret/*",))
    check = narrowed(repo, [ChangeScope("u", denied, denied)], lambda user, key: True)
    assert check is not None
    return check


def drops_the_sealed_tokens(old: pb.Branch, new: pb.Branch) -> bool:
    """A checked reset's own update: the sealed tokens go, the staging token stays."""
    return bool(old.sealed_tokens) and not new.sealed_tokens and new.staging_token == old.staging_token


@pytest.mark.parametrize("applied", [True, False])
def test_a_checked_reset_with_an_unknown_outcome_is_checked_and_made_again(
    env: GravelerEnv, faulty: UnknownOutcomes, applied: bool
) -> None:
    """Checked, the reset seals the staging token first and then drops the sealed tokens; its
    update's unknown outcome is made again on the branch as it is now."""
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "a", "a@1")
    faulty.arm(drops_the_sealed_tokens, applied, a_claim(graveler, repo))
    graveler.reset_branch(repo, "main", check=narrowed_check(repo))
    assert faulty.fired == 1
    assert contents(env, repo, "main") == {"base": "base@1"}
    assert history(graveler, repo) == ["base"]
    assert_nothing_left_staged(env, faulty, repo)


def test_a_checked_hard_reset_that_applied_unseen_is_done(env: GravelerEnv, faulty: UnknownOutcomes) -> None:
    """Checked, the hard reset keeps the staging token it sealed on top of the new head (and
    unseals it once found empty) under a fresh one, by which the unknown outcome is told."""
    graveler = env.graveler
    repo = repository(env)
    first = record(graveler, repo).commit_id
    stage(graveler, repo, "main", "a", "a@1")
    graveler.commit(repo, "main", "second")
    stage(graveler, repo, "main", "b", "b@1")
    faulty.arm(moves_head, True, a_claim(graveler, repo))
    graveler.reset_branch(repo, "main", hard_ref=first, check=narrowed_check(repo))
    assert faulty.fired == 1
    assert record(graveler, repo).commit_id == first
    assert contents(env, repo, "main") == {"base": "base@1"}
    assert_nothing_left_staged(env, faulty, repo)


@pytest.mark.parametrize(("applied", "between"), [(True, True), (False, True), (True, False)])
def test_a_compaction_whose_publish_had_an_unknown_outcome(
    env: GravelerEnv, faulty: UnknownOutcomes, applied: bool, between: bool
) -> None:
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "a", "a@1")
    faulty.arm(publishes, applied, a_claim(graveler, repo) if between else None)
    result = graveler.compact(repo, "main")
    assert faulty.fired == 1
    assert result.tokens_compacted == 1
    current = record(graveler, repo)
    assert current.branch.compacted_metarange_id == result.compacted_metarange_id != ""
    assert current.sealed_tokens == []
    assert contents(env, repo, "main") == {"base": "base@1", "a": "a@1"}
    graveler.commit(repo, "main", "ours")
    assert history(graveler, repo) == ["ours", "base"]
    assert_nothing_left_staged(env, faulty, repo)


@pytest.mark.parametrize("between", [False, True], ids=["alone", "then a claim"])
def test_a_compaction_that_changes_nothing_whose_publish_applied_unseen_is_done(
    env: GravelerEnv, faulty: UnknownOutcomes, between: bool
) -> None:
    """Staged changes that amount to none (a key written, then deleted) compact to no metarange:
    the published record has none, as before the compaction. Its folded tokens gone while the
    branch keeps the staging token the seal gave it, on the same head, still tell that the
    publish applied: done, not OutcomeUnknown."""
    graveler = env.graveler
    repo = repository(env)
    stage(graveler, repo, "main", "a", "a@1")
    graveler.delete_entry(repo, "main", "a")
    faulty.arm(publishes_tokens, True, a_claim(graveler, repo) if between else None)
    result = graveler.compact(repo, "main")
    assert faulty.fired == 1
    assert result.compacted_metarange_id == ""
    current = record(graveler, repo)
    assert current.sealed_tokens == []
    assert current.branch.compacted_metarange_id == ""
    assert contents(env, repo, "main") == {"base": "base@1"}
    assert_nothing_left_staged(env, faulty, repo)


def publishes_tokens(old: pb.Branch, new: pb.Branch) -> bool:
    """A publish, whether or not it changes the compacted metarange: the sealed tokens go, the
    staging token and the head stay."""
    return (
        bool(old.sealed_tokens)
        and not new.sealed_tokens
        and new.staging_token == old.staging_token
        and new.commit_id == old.commit_id
    )


class RefusedAfterApplying(ForwardingStore):
    """inner, except that the first compare-and-set of the branch record `main` that the armed
    pick chooses is applied and then reported as refused (PredicateFailed): what a caller sees
    when a later Paxos round finishes its own round and then finds its condition false."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.picks: Picks | None = None
        self.fired = 0

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: KvTimestamp | None = None,
    ) -> None:
        self.inner.apply(partition, puts, deletes, condition, timestamp)
        if condition is None or isinstance(condition, AllOf) or self.picks is None:
            return
        key, predicate = condition
        if key != BRANCH_KEY or predicate is None:
            return
        new = next((v for k, v in puts if k == BRANCH_KEY), None)
        if new is not None and self.picks(_branch(predicate), _branch(new)):
            self.picks = None
            self.fired += 1
            raise PredicateFailed("test: the branch record changed since it was read")

    def close(self) -> None:
        pass  # the store fixture's to close


def test_a_publish_that_finds_its_own_compaction_in_place_is_done_not_lost(store: Store, tmp_path: Path) -> None:
    """The publish's check that nothing moved since the seal (else CompactionLost) runs on every
    attempt; an attempt that runs again after its own publish applied finds that publish, not a
    concurrent change, and the compaction is done. (A commit that really wins still makes the
    compaction fail: test_compaction.py.)"""
    refusing = RefusedAfterApplying(store)
    for env in graveler_env(refusing, tmp_path, GravelerOptions(branch_cache_seconds=0)):
        graveler = env.graveler
        repo = repository(env)
        stage(graveler, repo, "main", "a", "a@1")
        refusing.picks = publishes
        result = graveler.compact(repo, "main")
        assert refusing.fired == 1
        current = record(graveler, repo)
        assert current.sealed_tokens == []
        assert current.branch.compacted_metarange_id == result.compacted_metarange_id != ""
        assert contents(env, repo, "main") == {"base": "base@1", "a": "a@1"}


# --- conditional staging writes (their guards) ----------------------------------------------------


class UnknownGuard(ForwardingStore):
    """inner, except that the next compare-and-set of a staging guard runs `between` (another
    writer's conditional write of the same object) and then raises OutcomeUnknown, having applied
    first or not: Paxos contention under load, the other writer's guard read back at SERIAL."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed: tuple[bool, Callable[[], None]] | None = None
        self.fired = 0

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: KvTimestamp | None = None,
    ) -> None:
        armed = self.armed
        # One guard's compare-and-set (a key's guard and the token's ADMISSION row), not a
        # many-key one.
        conditions = [] if condition is None else list(condition) if isinstance(condition, AllOf) else [condition]
        keys = [key for key, _ in conditions if key != ADMISSION]
        guard = ADMISSION in [key for key, _ in conditions] and len(keys) == 1 and keys[0].startswith(b"guard/")
        if armed is None or not guard:
            self.inner.apply(partition, puts, deletes, condition, timestamp)
            return
        self.armed = None
        self.fired += 1
        applied, between = armed
        if applied:
            self.inner.apply(partition, puts, deletes, condition, timestamp)
        between()
        raise OutcomeUnknown("test: apply: outcome unknown; another writer has changed the key since")

    def close(self) -> None:
        pass  # the store fixture's to close


@pytest.mark.parametrize("applied", [True, False], ids=["applied, then theirs", "theirs won"])
def test_a_conditional_write_whose_guard_had_an_unknown_outcome_is_settled(
    store: Store, tmp_path: Path, applied: bool
) -> None:
    """Ours and theirs are conditional writes of one object. Ours applied and theirs then judged
    it (If-Match ours): ours succeeds, theirs is current. Or both judged the same entry and theirs
    won: ours is judged again on theirs and refused (412) — never a 503 either way."""
    faulty = UnknownGuard(store)
    for env in graveler_env(faulty, tmp_path, GravelerOptions(branch_cache_seconds=0)):
        graveler = env.graveler
        repo = repository(env)
        judged = WriteCondition(if_match_etag="ours" if applied else "base@1")
        theirs = functools.partial(graveler.stage_entry, repo, "main", "base", entry("theirs"), judged)
        faulty.armed = (applied, theirs)
        if applied:
            graveler.stage_entry(repo, "main", "base", entry("ours"), WriteCondition(if_match_etag="base@1"))
        else:
            with pytest.raises(FailedPrecondition):
                graveler.stage_entry(repo, "main", "base", entry("ours"), WriteCondition(if_match_etag="base@1"))
        assert faulty.fired == 1
        assert contents(env, repo, "main")["base"] == "theirs"
