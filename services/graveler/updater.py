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
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from services.graveler.deadline import Deadline
from services.graveler.refs import BranchRecord, RefManager, RepoHandle
from silt.errors import Aborted, DeadlineExceeded, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb

_T = TypeVar("_T")


class Raced(Exception):
    """An attempt saw the branch change under it; the updater runs it again."""


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
    ) -> tuple[BranchRecord, pb.Branch]:
        """Read the branch, set_if change(record) over it; on a race re-read and redo.

        change gets the current record and returns the new branch (modify_branch builds one);
        it must only compute (see the module's rule). Returns the record replaced and the new
        branch.
        """

        def attempt(_: int) -> tuple[BranchRecord, pb.Branch]:
            current = self._refs.get_branch(repo, name)
            updated = change(current)
            self._refs.set_branch_if(repo, updated, current.predicate)
            return current, updated

        return self.retry(attempt, f"{what} of branch {name!r}", deadline)


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
