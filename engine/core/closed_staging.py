"""A staging token left closed as its branch's staging token: sealed by the writers it refuses.

A move of the head (head_moves.py) closes the branch's staging token right before the
branch-record set_if that seals it on top of the new head. A graveler that dies between the two
(or whose release fails) leaves the branch with a staging token closed to conditional writers,
and nothing of its own ever seals it. So the conditional writers it refuses (StagingClosed) note
when they first saw it closed, and once that is longer ago than a live mover's close and set_if
ever take (SEAL_AFTER_S), one of them seals it: the change release makes, the token sealed and a
fresh staging token in its place, made only while that token is still the staging token. A
mover that was only slow then fails its set_if on the changed record and goes again, as after
any race; nothing in the token is lost (it is read as a sealed token, and committed with the next
commit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from engine.core.deadline import Deadline
from engine.core.model import StagingToken
from engine.core.refs import BranchRecord, RepoHandle, set_tokens
from engine.core.staging import new_token
from engine.core.updater import REDO, BranchUpdater, modify_branch
from silt.errors import PredicateFailed, SiltError
from silt.graveler.v1 import model_pb2 as pb

log = logging.getLogger(__name__)

# How long a staging token may stay closed under writers before one of them seals it: longer than
# a live mover's close and set_if ever take (a round stuck at a frozen Cassandra coordinator is
# settled within about 4 s), since sealing under a live one makes its next attempt find the
# writes that raced it and fail. A mover's death then costs conditional writes to its branch this
# long (answered Aborted, retryable), once.
SEAL_AFTER_S = 10.0
# Closed staging tokens remembered per process (a token that became the staging token of no
# branch is never seen again; the oldest are forgotten first).
_REMEMBERED = 1024
# How long sealing a closed staging token may take (past the refused writer's own deadline).
_SEAL_TIMEOUT_S = 2.0


class StagingClosed(PredicateFailed):
    """The staging token a conditional writer read is closed (a commit or a move of the head
    closed it): the writer reads the branch again."""

    def __init__(self, message: str, token: StagingToken) -> None:
        super().__init__(message)
        self.token = token


def seal_staging(updater: BranchUpdater, repo: RepoHandle, branch_name: str, token: StagingToken, what: str) -> None:
    """Seal token, if it is still branch_name's staging token, with a fresh staging token in its
    place (idempotent: made again on the record as it is now)."""

    def seal(record: BranchRecord) -> pb.Branch:
        if record.branch.staging_token != token:
            return record.branch
        return modify_branch(
            record,
            lambda branch: set_tokens(branch, new_token(repo.partition, branch.name), [token, *branch.sealed_tokens]),
        )

    updater.update(repo, branch_name, seal, what, Deadline.after(_SEAL_TIMEOUT_S), REDO)


class ClosedStagingWatch:
    """When each closed staging token was first seen by a conditional writer it refused."""

    def __init__(self, updater: BranchUpdater, clock: Callable[[], float] = time.monotonic) -> None:
        self._updater = updater
        self._clock = clock
        self._first_seen: OrderedDict[StagingToken, float] = OrderedDict()
        self._lock = threading.Lock()

    def refused(self, repo: RepoHandle, branch_name: str, token: StagingToken) -> None:
        """A conditional writer found token, branch_name's staging token as it read the branch,
        closed: seal it once it has been closed under writers for SEAL_AFTER_S."""
        now = self._clock()
        with self._lock:
            first = self._first_seen.setdefault(token, now)
            self._first_seen.move_to_end(token)
            while len(self._first_seen) > _REMEMBERED:
                self._first_seen.popitem(last=False)
            if now - first < SEAL_AFTER_S:
                return
            del self._first_seen[token]
        log.warning(
            "branch %r: staging token closed for %.1f s with no move of the head; sealing it", branch_name, now - first
        )
        try:
            seal_staging(self._updater, repo, branch_name, token, "sealing a closed staging token")
        except SiltError as exc:
            log.warning("branch %r: sealing its closed staging token failed: %s", branch_name, exc)
