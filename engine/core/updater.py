"""BranchUpdater: the one compare-and-set loop on branch records (docs/design/lockfree-staging.md).

Every flow that depends on the branch record staying put — sealing, unsealing, moving the
branch after a commit or merge, resetting, and the writer's and reader's re-checks — runs
its attempt here. An attempt that lost a race (set_if failed, or the re-check saw another
record) is run again after an exponential, fully jittered backoff, so racing committers
spread out instead of colliding in lockstep; after max_attempts it gives up with Aborted,
and it never runs past the caller's deadline (DeadlineExceeded).

One rule for what runs inside an attempt: update's change callback only computes (it gets
the record read and returns the new branch; it runs again on every attempt). A flow that must
do I/O for each attempt — a commit or a merge building a metarange and storing a commit on the
head it found — runs its whole attempt through retry: read the branch, build and store what
the new record points at, then set_if against the record it read. Those writes are immutable
and content-addressed, so an attempt that loses leaves only unreferenced objects behind.

Every set_if on a branch record goes through set_branch_if here, which also resolves a
compare-and-set the store could not tell the outcome of (OutcomeUnknown: on Cassandra, a Paxos
round interrupted by a fault after which another writer changed the record). The store knows
only bytes; the branch record says more. Each caller states, with an `applied` hook, how to
tell from the record as it is now whether its change is in: a flow that moves the branch to a
new commit looks for that commit in the head's history (moved_to), a change that may simply be
made again on the record as it is now (a seal, an unseal, a soft reset) passes REDO, and a
caller that passes no hook gets the OutcomeUnknown. See docs/design/kv.md.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from engine.core.commit_graph import descends_from
from engine.core.deadline import Deadline
from engine.core.model import CommitId
from engine.core.refs import BranchRecord, RefManager, RepoHandle, branch_tokens
from silt.errors import Aborted, DeadlineExceeded, OutcomeUnknown, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb

_T = TypeVar("_T")
log = logging.getLogger(__name__)


class Raced(Exception):
    """An attempt saw the branch change under it; the updater runs it again."""


# Whether a branch change whose outcome the store could not tell is in the branch record as it
# is now: True (it applied), False (it did not), None (that cannot be told from the record).
Applied = Callable[[BranchRecord], "bool | None"]

# Sends of one branch change whose outcome stays unknown before OutcomeUnknown is passed on.
UNKNOWN_SENDS = 3
# Commits walked back from the head looking for a commit whose move's outcome was unknown.
UNKNOWN_WALK = 1000


def REDO(_: BranchRecord) -> bool | None:
    """The hook of a change that may be made again on the branch as it is now, whether or not
    it applied: an unknown outcome is treated as a lost race, and the change runs again."""
    return False


def set_branch_if(
    refs: RefManager,
    repo: RepoHandle,
    current: BranchRecord,
    updated: pb.Branch,
    what: str,
    applied: Applied | None,
) -> None:
    """Replace current (as read) with updated; PredicateFailed if the branch changed since.

    An OutcomeUnknown from the store is resolved from the branch record as it is now, when the
    caller gave an applied hook (without one it propagates):

    * applied(record) is True: the change is in, return as if the set_if had succeeded;
    * the record is still the one read: the change is not in, or (when the store could not read
      its Paxos round back) still pending. It is sent again, at most UNKNOWN_SENDS times in all:
      a compare-and-set first finishes any round pending on the key, so a PredicateFailed then
      means the first send (or another writer) got in, and the record is looked at again;
    * the record has changed and applied is False: the change is not in and can no longer
      land (a later compare-and-set superseded it): Raced, and the caller's attempt runs again;
    * applied is None (the record cannot tell): the OutcomeUnknown is passed on.

    One warning line says how each unknown outcome was resolved.

    The tokens the update leaves unreachable (those of current that updated no longer names:
    tokens never come back to a branch) get their drop records in the same batch, so a record
    exists exactly when the update applied (engine/core/drop_records.py); the caller then
    has the cleaner drop them (Cleaner.drop_recorded).
    """
    kept = set(branch_tokens(updated))
    dropping = [token for token in current.tokens if token not in kept]
    try:
        refs.set_branch_if(repo, updated, current.predicate, dropping)
        return
    except OutcomeUnknown as exc:
        if applied is None:
            raise
        unknown = exc
    sends = 1
    while True:
        fresh = refs.get_branch(repo, updated.name)  # NotFound: the branch was deleted meanwhile
        verdict = applied(fresh)
        if verdict:
            _resolved(what, unknown, "the branch shows it applied; done")
            return
        if fresh.predicate != current.predicate:
            if verdict is None:
                raise unknown
            if applied is REDO:
                _resolved(what, unknown, "the branch has changed since; making the change again on it")
            else:
                _resolved(what, unknown, "the branch shows it did not apply; trying again as after a lost race")
            raise Raced from None
        if sends >= UNKNOWN_SENDS:
            raise unknown
        sends += 1
        try:
            refs.set_branch_if(repo, updated, current.predicate, dropping)
        except PredicateFailed:
            continue  # the first send, or another writer, got in: look again
        except OutcomeUnknown as exc:
            unknown = exc
            continue
        _resolved(what, unknown, "the branch was unchanged; sent again: applied")
        return


def _resolved(what: str, unknown: OutcomeUnknown, how: str) -> None:
    log.warning("%s: %s; %s", what, unknown, how)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 50
    # Backoff before attempt n+1 is uniform in [0, min(max_wait, first_wait * 2**(n-1))].
    first_wait: float = 0.001
    max_wait: float = 0.05


class BranchUpdater:
    def __init__(
        self, refs: RefManager, policy: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._refs = refs
        self.policy = policy or RetryPolicy()
        self._sleep = sleep

    def retry(self, attempt: Callable[[int], _T], what: str, deadline: Deadline) -> _T:
        """Run attempt(attempt number, from 1) until it neither raises Raced nor PredicateFailed."""
        # Nearly every read and write wins its first attempt: it runs here directly, and only a
        # race pays for tenacity's machinery, which cost a staged read a fifth of its time.
        deadline.check(what)
        try:
            return attempt(1)
        except (Raced, PredicateFailed):
            if self.policy.max_attempts <= 1:
                raise Aborted(f"{what} raced with other changes once; retry") from None
        return self._retry_after_race(attempt, what, deadline)

    def _retry_after_race(self, attempt: Callable[[int], _T], what: str, deadline: Deadline) -> _T:
        """Attempts 2 onwards, after an exponential, fully jittered backoff each."""
        policy = self.policy
        first_wait = random.uniform(0, min(policy.max_wait, policy.first_wait))
        remaining = deadline.remaining()
        if deadline.expired() or (remaining is not None and remaining <= first_wait):
            raise DeadlineExceeded(f"{what}: deadline exceeded while racing with other changes")
        self._sleep(first_wait)
        # Tenacity numbers these attempts from 1 again: the doubled multiplier keeps the wait
        # after attempt n at up to first_wait * 2**(n-1), as if it had counted from the start.
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(policy.max_attempts - 1) | _OutOfTime(deadline),
            wait=tenacity.wait_random_exponential(multiplier=policy.first_wait * 2, max=policy.max_wait),
            retry=tenacity.retry_if_exception_type((Raced, PredicateFailed)),
            sleep=self._sleep,
        )
        try:
            for round_ in retrying:
                with round_:
                    deadline.check(what)
                    result = attempt(round_.retry_state.attempt_number + 1)
        except tenacity.RetryError as exc:
            if exc.last_attempt.attempt_number + 1 < policy.max_attempts:
                raise DeadlineExceeded(f"{what}: deadline exceeded while racing with other changes") from None
            raise Aborted(f"{what} raced with other changes {policy.max_attempts} times; retry") from None
        return result

    def update(
        self,
        repo: RepoHandle,
        name: str,
        change: Callable[[BranchRecord], pb.Branch],
        what: str,
        deadline: Deadline,
        applied: Applied | None = None,
    ) -> tuple[BranchRecord, pb.Branch]:
        """Read the branch, set_if change(record) over it; on a race re-read and redo.

        change gets the current record and returns the new branch (modify_branch builds one);
        it must only compute (see the module's rule). Returns the record replaced and the new
        branch. applied resolves a set_if whose outcome the store could not tell (see
        set_branch_if): REDO where running change again on the record as it is now is right
        whether or not it applied; None passes OutcomeUnknown on.
        """

        def attempt(_: int) -> tuple[BranchRecord, pb.Branch]:
            current = self._refs.get_branch(repo, name)
            updated = change(current)
            self.set_if(repo, current, updated, f"{what} of branch {name!r}", applied)
            return current, updated

        return self.retry(attempt, f"{what} of branch {name!r}", deadline)

    def set_if(
        self, repo: RepoHandle, current: BranchRecord, updated: pb.Branch, what: str, applied: Applied | None
    ) -> None:
        """set_branch_if (the module's function) with this updater's refs: inside an attempt,
        PredicateFailed and Raced make the updater run the attempt again."""
        set_branch_if(self._refs, repo, current, updated, what, applied)

    def moved_to(self, repo: RepoHandle, commit: pb.Commit) -> Applied:
        """The applied hook of a flow that moves the branch to commit (a commit, merge, revert,
        cherry-pick): whether commit is the branch's head or in its history.

        Commit ids are content hashes over parents, time and metadata, so no other flow makes
        this commit. Had the move applied, every later compare-and-set on the branch started
        from it, and moves only ever add commits on top of the head: the head descends from
        it. So a head that descends from the commit the move was built on (its first parent)
        but not from commit says it did not apply. A head that descends from neither was moved
        elsewhere meanwhile (a hard reset, the branch deleted and created again): whether the
        move applied before that cannot be told, and making it again could undo that reset, so
        that is None. Each walk goes back from the head through every parent, not below the
        generation looked for, and gives up (None) after UNKNOWN_WALK commits.
        """

        def get_commit(commit_id: str) -> pb.Commit:
            return self._refs.get_commit(repo, CommitId(commit_id))

        def applied(record: BranchRecord) -> bool | None:
            found = descends_from(get_commit, record.commit_id, commit, UNKNOWN_WALK)
            if found is not False or not commit.parents:
                return found
            on_base = descends_from(get_commit, record.commit_id, get_commit(commit.parents[0]), UNKNOWN_WALK)
            return False if on_base else None

        return applied


class _OutOfTime(tenacity.stop.stop_base):
    """Stop when the deadline has passed or would pass during the next backoff."""

    def __init__(self, deadline: Deadline) -> None:
        self._deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        remaining = self._deadline.remaining()
        if self._deadline.expired():
            return True
        return remaining is not None and remaining <= (retry_state.upcoming_sleep or 0.0)


def modify_branch(current: BranchRecord, change: Callable[[pb.Branch], None]) -> pb.Branch:
    """A copy of the branch in current with change applied to it."""
    updated = pb.Branch()
    updated.CopyFrom(current.branch)
    change(updated)
    return updated
