"""A head that moves under the branch's staging area: merge, revert, cherry-pick, import, and a
hard reset that checks what it drops (docs/design/lockfree-staging.md, "Moving the head under
the staging area").

Such a move keeps the branch's uncommitted writes on top of the new head: writes that raced
with the operation (a merge or a revert checked the staging area clean before it) or, for an
import, the branch's uncommitted changes. A conditional write judges its key on the branch as
its writer read it; one judged on the old head must not land where it shows on top of the new
head. Whoever moves the head therefore closes the staging token *before* the move's set_if
(StagingStore.close: no conditional write is admitted into it afterwards, and those admitted
are finished), and the move seals it on top of the new head and gives the branch a fresh
staging token. A conditional writer whose compare-and-set comes after the close is refused
and judges again: on the old head while the move has not applied (it then waits for the
record to change, as after a commit's close), on the new head afterwards. One admitted before
the close landed before the move, judged on the head as it then was, and stays on top of the
new head, as any write acknowledged before the move does.

Between the close and the move the staging token admits no conditional write, so the close
comes last, right before the set_if; a move that does not apply leaves the closed token
sealed (release), so a live mover never leaves the branch's staging token closed to
conditional writers. A mover that dies between the close and the move does: the writers it
refuses seal that token themselves once it has stayed closed long enough (closed_staging.py).
A plain write into the kept token after the move finds its token sealed and writes again into
the fresh one; so a kept token still empty after the move holds nothing and is unsealed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.core.cleanup import Cleaner
from engine.core.closed_staging import seal_staging
from engine.core.deadline import Deadline
from engine.core.model import StagingToken
from engine.core.parts import CoreParts, OnCore
from engine.core.refs import BranchRecord, RepoHandle, branch_tokens, set_tokens
from engine.core.staging import new_token
from engine.core.updater import REDO, modify_branch
from silt.errors import SiltError
from silt.graveler.v1 import model_pb2 as pb

log = logging.getLogger(__name__)


class HeadMove(OnCore):
    """The staging side of one operation that moves a branch's head (its attempts included)."""

    def __init__(self, core: CoreParts, cleaner: Cleaner, repo: RepoHandle, branch_name: str) -> None:
        super().__init__(core)
        self._cleaner = cleaner
        self._repo = repo
        self._branch_name = branch_name
        self._closed: list[StagingToken] = []

    def close_staging(self, current: BranchRecord) -> None:
        """Close the staging token of current, the record the move is about to replace: right
        before the move's set_if, after everything that may fail the attempt otherwise."""
        token = StagingToken(current.branch.staging_token)
        self._staging.close(token)
        if token not in self._closed:
            self._closed.append(token)

    def seal_on_top(self, branch: pb.Branch, sealed: Sequence[str] = ()) -> None:
        """In the move's change: the staging token sealed on top of the new head, over the
        sealed tokens the move keeps, and a fresh staging token in its place."""
        set_tokens(branch, new_token(self._repo.partition, branch.name), [branch.staging_token, *sealed])

    def settle(self, before: BranchRecord) -> None:
        """After the move applied over before: unseal the staging token it sealed if that token
        holds nothing (nothing was written to it before the move, and a writer that finds it
        sealed writes again to the fresh token), and drop it. Best effort, past the caller's
        deadline (the move is done): an empty sealed token left is read past and committed
        with the next commit."""
        kept = StagingToken(before.branch.staging_token)
        try:
            self._unseal_if_empty(kept)
        except SiltError as exc:
            log.warning("branch %r keeps an empty sealed token: %s", self._branch_name, exc)

    def _unseal_if_empty(self, kept: StagingToken) -> None:
        current = self._refs.get_branch(self._repo, self._branch_name)
        if kept not in current.sealed_tokens or not self._staging.is_empty(kept):
            return

        def unseal(record: BranchRecord) -> pb.Branch:
            return modify_branch(
                record,
                lambda branch: set_tokens(branch, branch.staging_token, [t for t in branch.sealed_tokens if t != kept]),
            )

        # Idempotent: made again on the branch as it is now, it removes the token if still there.
        _, updated = self._updater.update(self._repo, self._branch_name, unseal, "unsealing", Deadline.after(30), REDO)
        if kept not in branch_tokens(updated):
            self._cleaner.drop_recorded(self._repo.partition, [kept])  # recorded with the unseal

    def release(self) -> None:
        """After the operation failed: seal a staging token it closed that is still the
        branch's staging token (the move did not apply), so that conditional writers get a
        fresh one. Best effort: a token left closed is sealed by the branch's next commit, or by
        the conditional writers it refuses (closed_staging.py)."""
        if not self._closed:
            return
        try:
            current = self._refs.get_branch(self._repo, self._branch_name)
            token = StagingToken(current.branch.staging_token)
            if token not in self._closed:
                return
            seal_staging(self._updater, self._repo, self._branch_name, token, "sealing")
        except SiltError as exc:
            log.warning("branch %r keeps a staging token closed to conditional writes: %s", self._branch_name, exc)
