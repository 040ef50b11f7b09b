"""Committer: the commit flow — seal, build, move the branch (docs/design/lockfree-staging.md).

1. Seal the staging token (set_if): from then on writers go to a fresh token.
2. Plan: build the new metarange from the sealed tokens over the base commit and store the commit.
3. Move the branch to it with set_if, trimming the sealed tokens it committed.

Steps 2 and 3 are one attempt of the branch updater's retry loop, like a merge's: the set_if
only computes, and an attempt that finds the branch moved since its plan (another commit won
and holds the tokens it trimmed, a compaction folded some in, a commit with nothing to commit
unsealed them) plans again on top of what it finds, from the tokens still sealed, so every
acknowledged commit stays in history.

Each step first checks the caller's deadline: a commit whose client gave up stops building.
The tokens it sealed stay sealed, so their changes stay visible and the next commit takes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.builder import Build, MetaRangeBuilder, until
from engine.core.cleanup import Cleaner
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import ApplyResult, MetaRangeId
from engine.core.compaction import CompactedState, StagingObserver
from engine.core.deadline import Deadline
from engine.core.model import CommitId, StagingToken
from engine.core.refs import BranchRecord, RefManager, RepoHandle, new_commit, set_tokens
from engine.core.staging import StagingStore, new_token
from engine.core.updater import REDO, BranchUpdater, modify_branch
from silt.errors import FailedPrecondition, InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb


@dataclass(frozen=True)
class Recorded:
    """A commit as it was made elsewhere, recorded here (a history brought across from another
    system): its date, and its parents after the branch's head (a merge's source)."""

    creation_date: Timestamp
    merge_parents: tuple[CommitId, ...] = ()


@dataclass(frozen=True)
class _Message:
    message: str
    metadata: dict[str, str]
    committer: str
    recorded: Recorded | None = None


@dataclass(frozen=True)
class _Plan:
    """A stored commit, built for one state of the branch: its head, its compacted metarange
    and the sealed tokens the commit holds (newest first)."""

    commit: pb.Commit
    tokens: list[StagingToken]
    compacted: str
    kept: str  # the compacted metarange the branch keeps after the commit
    message: _Message

    def still_sealed(self, current: BranchRecord) -> list[StagingToken]:
        return [t for t in current.sealed_tokens if t in self.tokens]

    def fits(self, current: BranchRecord) -> bool:
        """Whether the branch is still in the state this plan was built for.

        If not, some of the plan's tokens left the branch: another commit won (it holds the
        tokens it trimmed), a compaction folded them into the compacted metarange (even one
        whose id did not change, or none: its changes may cancel ours), or a commit that found
        nothing to commit unsealed them. The commit is then planned again (Committer._replan).
        """
        return (
            current.branch.commit_id == self.commit.parents[0]
            and current.branch.compacted_metarange_id == self.compacted
            and self.still_sealed(current) == self.tokens
        )

    def moved(self, current: BranchRecord, partial: bool) -> pb.Branch:
        """The branch pointed at the commit, without the sealed tokens it holds."""

        def point(branch: pb.Branch) -> None:
            branch.commit_id = self.commit.id
            branch.compacted_metarange_id = self.kept
            if not partial:
                # A partial commit keeps its tokens sealed: they still hold the changes it left out.
                set_tokens(branch, branch.staging_token, [t for t in branch.sealed_tokens if t not in self.tokens])

        return modify_branch(current, point)


class Committer:
    def __init__(
        self,
        refs: RefManager,
        staging: StagingStore,
        builder: MetaRangeBuilder,
        updater: BranchUpdater,
        cleaner: Cleaner,
        committed: CommittedManager,
        state: CompactedState,
        observer: StagingObserver,
    ) -> None:
        self._refs = refs
        self._committed = committed
        self._state = state
        self.observer = observer
        self._staging = staging
        self.builder = builder
        self._updater = updater
        self._cleaner = cleaner

    def commit(
        self,
        repo: RepoHandle,
        branch_name: str,
        message: str,
        metadata: dict[str, str],
        committer: str,
        allow_empty: bool,
        prefixes: list[str],
        deadline: Deadline,
        after_seal: Callable[[BranchRecord], None] | None = None,
        recorded: Recorded | None = None,
    ) -> pb.Commit:
        """Commit the staged changes of a branch (only those under prefixes, if given).

        recorded: the commit is one made elsewhere, with its date and further parents.

        after_seal runs once the staging token is sealed (given the branch as sealed), before
        anything is built: what it
        raises stops the commit, leaving the sealed tokens sealed (still read and committed by
        the next commit: nothing staged is lost or changed) — the branch's pre-commit hooks."""
        if not message:
            raise InvalidArgument("commit message must not be empty")
        only = [p.encode() for p in prefixes] or None
        if only is not None and not all(only):
            raise InvalidArgument("commit prefixes must not be empty")
        if recorded is not None:
            # Before sealing: a refused recording leaves the branch as it was.
            for parent in recorded.merge_parents:
                self._refs.get_commit(repo, parent)
        sealed = self._seal(repo, branch_name, deadline)
        if after_seal is not None:
            after_seal(sealed)
        to_commit = sealed.sealed_tokens  # newest first
        base = self._refs.get_commit(repo, sealed.branch.commit_id)
        head = MetaRangeId(base.metarange_id)
        deadline.check(f"commit on branch {branch_name!r}")
        built = self._build(repo, sealed.branch, head, to_commit, only, deadline)
        if not self._changes(repo, sealed.branch, head, built) and not allow_empty:
            if only is None:
                self.unseal(repo, branch_name, to_commit, deadline, settled=sealed.branch)
            raise FailedPrecondition(f"nothing to commit on branch {branch_name!r}")
        deadline.check(f"commit on branch {branch_name!r}")
        plan = self._plan(
            repo,
            sealed.branch,
            base,
            built,
            to_commit,
            only,
            _Message(message, metadata, committer, recorded),
            deadline,
        )

        def attempt(_: int) -> None:
            nonlocal plan
            current = self._refs.get_branch(repo, branch_name)
            if not plan.fits(current):
                plan = self._replan(repo, current, plan, only, deadline)
            # PredicateFailed: the branch moved since it was read; the updater runs the attempt again.
            # An unknown outcome: the commit is in the head's history or the move did not apply.
            moved = plan.moved(current, partial=only is not None)
            self._updater.set_if(repo, current, moved, what, self._updater.moved_to(repo, plan.commit))

        what = f"commit of branch {branch_name!r}"
        self._updater.retry(attempt, what, deadline)
        to_commit = plan.tokens
        if only is None:
            self._cleaner.drop_recorded(repo.partition, to_commit)  # recorded with the move (updater.set_branch_if)
            self.observer.cleared(repo.name, branch_name)
        else:
            self._cleaner.submit(self._drop_committed_part, repo, branch_name, to_commit, only)
        return plan.commit

    def _plan(
        self,
        repo: RepoHandle,
        branch: pb.Branch,
        base: pb.Commit,
        built: ApplyResult,
        tokens: list[StagingToken],
        only: list[bytes] | None,
        message: _Message,
        deadline: Deadline,
    ) -> _Plan:
        """Store the commit of built over base, and what the branch keeps of its compaction."""
        parents, generation, created = [CommitId(base.id)], base.generation + 1, None
        if message.recorded is not None:
            merged = [self._refs.get_commit(repo, parent) for parent in message.recorded.merge_parents]
            parents += [CommitId(parent.id) for parent in merged]
            generation = max([base.generation, *(parent.generation for parent in merged)]) + 1
            created = message.recorded.creation_date
        commit = new_commit(
            message.message, message.metadata, message.committer, built.metarange_id, parents, generation, created
        )
        self._refs.put_commit(repo, commit)
        # A prefix commit keeps the compaction, with the committed prefixes brought up to date
        # (see _kept_compaction); a full commit folds it in and clears it.
        kept = self._kept_compaction(repo, branch, tokens, only, deadline)
        return _Plan(commit, tokens, branch.compacted_metarange_id, kept, message)

    def _replan(
        self, repo: RepoHandle, current: BranchRecord, plan: _Plan, only: list[bytes] | None, deadline: Deadline
    ) -> _Plan:
        """Plan again on the branch as it is now: what is left of the plan's tokens (all newer
        than its compacted metarange) over its head; with nothing left, an empty commit."""
        still_sealed = plan.still_sealed(current)
        winner = self._refs.get_commit(repo, current.branch.commit_id)
        rebuilt = self._build(repo, current.branch, MetaRangeId(winner.metarange_id), still_sealed, only, deadline)
        return self._plan(repo, current.branch, winner, rebuilt, still_sealed, only, plan.message, deadline)

    def _build(
        self,
        repo: RepoHandle,
        branch: pb.Branch,
        head: MetaRangeId,
        tokens: list[StagingToken],
        only: list[bytes] | None,
        deadline: Deadline,
    ) -> ApplyResult:
        """The metarange a commit of tokens (and of the branch's compaction) makes over head."""
        for token in tokens:
            # Every conditional write admitted into a token is in what is built from it.
            self._staging.close(token)
        if not branch.compacted_metarange_id:
            return self.builder.apply_tokens(Build(repo.namespace, head, tokens, only), deadline)
        if only is None:
            # The compacted metarange is the branch's content below its sealed tokens.
            compacted = MetaRangeId(branch.compacted_metarange_id)
            return self.builder.apply_tokens(Build(repo.namespace, compacted, tokens), deadline)
        # Only the prefixes: the tokens' changes and the compaction's under them, onto the head.
        changes = self._state.pending(repo, branch, tokens, head, prefixes=only)
        return self._committed.apply(repo.namespace, head, until(deadline, changes))

    def _kept_compaction(
        self,
        repo: RepoHandle,
        branch: pb.Branch,
        tokens: list[StagingToken],
        only: list[bytes] | None,
        deadline: Deadline,
    ) -> str:
        """The compacted metarange a commit leaves on the branch.

        A full commit holds all of it: none. A prefix commit leaves the tokens sealed (their
        committed part is dropped later): bring the compacted metarange's prefixes up to the
        tokens' values, so that it still shows the branch's content below the tokens once
        that part is gone, and keeps the changes outside the prefixes.
        """
        if only is None or not branch.compacted_metarange_id:
            return ""
        compacted = MetaRangeId(branch.compacted_metarange_id)
        return self.builder.apply_tokens(Build(repo.namespace, compacted, tokens, only), deadline).metarange_id

    def _changes(self, repo: RepoHandle, branch: pb.Branch, head: MetaRangeId, built: ApplyResult) -> bool:
        if not branch.compacted_metarange_id:
            return built.changed
        # Built over a compacted metarange, "changed" is against that, not the head: compare.
        if built.metarange_id == head:
            return False
        return next(iter(self._committed.diff(repo.namespace, head, built.metarange_id)), None) is not None

    def _seal(self, repo: RepoHandle, branch_name: str, deadline: Deadline) -> BranchRecord:
        def seal(current: BranchRecord) -> pb.Branch:
            branch = current.branch
            return modify_branch(
                current,
                lambda b: set_tokens(
                    b, new_token(repo.partition, branch_name), [branch.staging_token, *branch.sealed_tokens]
                ),
            )

        # Sealing again on the branch as it is now is right whether or not an unknown outcome
        # applied: the commit takes every token sealed then (an extra one, maybe empty, too).
        current, updated = self._updater.update(repo, branch_name, seal, "sealing", deadline, REDO)
        return BranchRecord(updated, current.predicate)

    def unseal(
        self,
        repo: RepoHandle,
        branch_name: str,
        tokens: list[StagingToken],
        deadline: Deadline,
        settled: pb.Branch | None = None,
    ) -> None:
        """Drop sealed tokens that hold nothing left to commit.

        settled: the branch as it was when the tokens were found, together with its compacted
        metarange, to show exactly its head. The compaction goes with them then (if the
        branch still has that head and that compaction): on its own it would show changes the
        tokens undid (a key compacted in and then deleted would come back).
        """

        def unseal(current: BranchRecord) -> pb.Branch:
            def change(branch: pb.Branch) -> None:
                set_tokens(branch, branch.staging_token, [t for t in branch.sealed_tokens if t not in tokens])
                if (
                    settled is not None
                    and branch.commit_id == settled.commit_id
                    and branch.compacted_metarange_id == settled.compacted_metarange_id
                ):
                    branch.compacted_metarange_id = ""

            return modify_branch(current, change)

        # Unsealing is idempotent: made again on the branch as it is now, it removes what is left.
        self._updater.update(repo, branch_name, unseal, "unsealing", deadline, REDO)
        # Recorded with the update that removed them (this one, or an earlier change that did).
        self._cleaner.drop_recorded(repo.partition, tokens)

    def _drop_committed_part(
        self, repo: RepoHandle, branch_name: str, tokens: list[StagingToken], prefixes: list[bytes]
    ) -> None:
        """After a partial commit: drop what it committed from the sealed tokens, unseal emptied ones.

        Until this runs the tokens hold copies of committed values, which reads see first.
        They equal the head's values as long as the head stays; every operation that moves the
        head (a commit of the tokens, merge, revert, cherry-pick, a hard reset) drops the
        tokens it read in the same set_if, so a copy never outlives its head. That makes this
        safe at any time, and only storage when it is late: it runs in the background, after
        the call that made the commit returned (no deadline), and the cleaner tries it again
        until it succeeds.
        """
        emptied = []
        # Oldest token first. Reads take a key from the newest token holding it, and the commit
        # took each key's newest staged value: dropping from the old end keeps every copy still
        # readable equal to the committed value. Newest first would, between two tokens, show an
        # older copy of a key the commit had overwritten.
        for token in reversed(tokens):  # tokens are newest first, as on the branch record
            for prefix in prefixes:
                self._staging.drop_under(token, prefix)
            if self._staging.is_empty(token):
                emptied.append(token)
        if emptied:
            try:
                self.unseal(repo, branch_name, emptied, Deadline())
            except NotFound:
                # The branch or its repository was deleted: their tokens go with them. Recorded
                # already: a branch deletion records every token of the branch in its batch (or
                # the change that removed one before did), a repository's clean-up drops them all.
                self._cleaner.drop_recorded(repo.partition, emptied)
