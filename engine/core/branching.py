"""Branching: comparing, combining and undoing — diff, merge, revert, cherry-pick and reset.

Everything here works on metaranges through the committed layer, whose walks skip ranges
with equal ids, so the cost follows the size of the change, not of the repository. Branch
moves go through the BranchUpdater, like commits: no lock anywhere.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from engine.core.cleanup import Cleaner
from engine.core.commit_graph import find_merge_base
from engine.core.committed.diff import Difference, DifferenceRun
from engine.core.committed.merge import Conflict, Resolver, by_pattern
from engine.core.committed.model import MetaRangeId, Record
from engine.core.deadline import Deadline
from engine.core.entries import Entries
from engine.core.head_moves import HeadMove
from engine.core.key_changes import Change, KeyCheck, applied, undone
from engine.core.merge_resolutions import Resolutions
from engine.core.model import (
    MERGE_STRATEGIES,
    REQUESTED_COMMITTER_KEY,
    RESERVED_METADATA_KEYS,
    CommitId,
    DifferenceKind,
    MergeStrategy,
    StagingToken,
)
from engine.core.paging import (
    MAX_PAGE,
    MAX_PAGE_BYTES,
    CommonPrefix,
    Page,
    delimiter_bytes,
    page_amount,
    paginate,
)
from engine.core.parts import CoreParts, OnCore
from engine.core.refs import BranchRecord, RepoHandle, Resolved, branch_tokens, new_commit, set_tokens
from engine.core.staging import new_token
from engine.core.updater import REDO, Applied, Raced, modify_branch
from engine.core.validation import validate_key
from silt.errors import FailedPrecondition, InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb

# The longest page of diff_summary. Its items are a key, a type and a size, no entries:
# 100,000 of keys of the usual tens of bytes fit well within MAX_PAGE_BYTES.
MAX_SUMMARY_PAGE = 100_000
# What a summary item costs in its answer besides its key: tags, lengths, type and size.
SUMMARY_ITEM_BYTES = 16


class SummaryPage(NamedTuple):
    """A page of diff_summary: the i-th difference is keys[i], kinds[i] and values[i], the value
    on the side that has the key (the right one when changed)."""

    keys: list[bytes]
    kinds: list[DifferenceKind]
    values: list[bytes]
    has_more: bool


# lakeFS's metadata keys on a cherry-picked commit: the commit it came from, and who made that one.
CHERRY_PICK_ORIGIN_KEY = "cherry-pick-origin"
CHERRY_PICK_COMMITTER_KEY = "cherry-pick-committer"


@dataclass(frozen=True)
class CherryPickOverrides:
    """What a cherry-pick may change of the picked commit."""

    message: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    allow_empty: bool = False


@dataclass
class MergeOutcome:
    """Either the commit made, or the conflicts that stopped the operation (nothing changed)."""

    commit: pb.Commit | None = None
    conflicts: list[Conflict] = field(default_factory=list)
    conflicts_truncated: bool = False  # more conflicts may follow those listed (merge.py)


class Plan(NamedTuple):
    """A three-way merge onto a branch's head, and the commit that records it."""

    base: MetaRangeId
    source: MetaRangeId
    dest: MetaRangeId
    parents: list[CommitId]
    message: str
    generation: int


def resolver_for(strategy: str, path_strategies: list[tuple[str, MergeStrategy]]) -> Resolver | None:
    if strategy not in MERGE_STRATEGIES or any(s not in MERGE_STRATEGIES for _, s in path_strategies):
        raise InvalidArgument(f"merge strategy must be one of {sorted(MERGE_STRATEGIES)}")
    if not path_strategies and strategy == "fail":
        return None
    return by_pattern(path_strategies, strategy)


class Branching(OnCore):
    def __init__(self, core: CoreParts, entries: Entries, cleaner: Cleaner) -> None:
        super().__init__(core)
        self._core = core
        self._entries = entries
        self._cleaner = cleaner

    # --- diff --------------------------------------------------------------------------------

    def diff(
        self,
        repo: RepoHandle,
        left_ref: str,
        right_ref: str,
        three_dot: bool,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
    ) -> Page[Difference]:
        left_mr, right_mr = self._compared(repo, left_ref, right_ref, three_dot)
        return _differences_page(
            lambda start: self._committed.diff(repo.namespace, left_mr, right_mr, start),
            prefix,
            delimiter,
            after,
            amount,
        )

    def diff_summary(
        self, repo: RepoHandle, left_ref: str, right_ref: str, three_dot: bool, after: str, amount: int
    ) -> SummaryPage:
        """The differences of diff() without prefix or delimiter, as columns, in pages of up to
        MAX_SUMMARY_PAGE (10,000 when amount is 0) and MAX_PAGE_BYTES: a summary reads every
        change, and its answer holds no entries, so its pages can be longer."""
        if amount < 0:
            raise InvalidArgument(f"amount must not be negative, got {amount}")
        amount = min(amount or MAX_PAGE, MAX_SUMMARY_PAGE)
        left_mr, right_mr = self._compared(repo, left_ref, right_ref, three_dot)
        start = after.encode() + b"\x00" if after else b""
        page = SummaryPage([], [], [], False)
        keys, kinds, values = page.keys, page.kinds, page.values
        budget = MAX_PAGE_BYTES
        # Stretches of added or removed keys come as runs, taken whole; the rest one by one,
        # each taken apart as it comes and dropped: a page holding its differences (three
        # tuples each) would set off the cyclic garbage collector over and over, which costs
        # more than the walk itself.
        for item in self._committed.diff_grouped(repo.namespace, left_mr, right_mr, start):
            if isinstance(item, DifferenceRun):
                taken = _within(item.keys, amount - len(keys), budget, not keys)
                budget -= sum(map(len, item.keys[:taken])) + taken * SUMMARY_ITEM_BYTES
                keys += item.keys[:taken]
                kinds += [item.kind] * taken
                values += item.values[:taken]
                if taken < len(item.keys):
                    return page._replace(has_more=True)
                continue
            key, kind, left, right = item
            budget -= len(key) + SUMMARY_ITEM_BYTES
            if len(keys) == amount or (keys and budget < 0):
                return page._replace(has_more=True)
            side = right if right is not None else left
            assert side is not None  # a difference has at least one side
            keys.append(key)
            kinds.append(kind)
            values.append(side.value)
        return page

    def _compared(
        self, repo: RepoHandle, left_ref: str, right_ref: str, three_dot: bool
    ) -> tuple[MetaRangeId, MetaRangeId]:
        """The metaranges a diff compares: right's against left's, or against the merge base's
        when three_dot."""
        left = self._refs.get_commit(repo, self._refs.resolve(repo, left_ref).commit_id)
        right = self._refs.get_commit(repo, self._refs.resolve(repo, right_ref).commit_id)
        if three_dot:
            base_id = self.merge_base_of(repo, CommitId(left.id), CommitId(right.id))
            left = self._refs.get_commit(repo, base_id)
        return MetaRangeId(left.metarange_id), MetaRangeId(right.metarange_id)

    def diff_branch(
        self,
        repo: RepoHandle,
        branch_name: str,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
        deadline: Deadline,
    ) -> Page[Difference]:
        """The uncommitted changes of a branch: staged values against its head commit."""

        def body(resolved: Resolved) -> Page[Difference]:
            branch = resolved.branch
            assert branch is not None  # a plain branch name always resolves with its staging area
            return _differences_page(
                lambda start: self._uncommitted(repo, branch, start), prefix, delimiter, after, amount
            )

        return self._entries.read(repo, self._plain_branch(repo, branch_name), body, deadline)

    def _uncommitted(self, repo: RepoHandle, branch: BranchRecord, start: bytes = b"") -> Iterator[Difference]:
        # Staged values, then what a compaction folded in (the compacted metarange against
        # the head's): both are uncommitted.
        head = self._state.head_metarange(repo, branch.branch)
        changes = self._state.pending(repo, branch.branch, branch.tokens, head, start)
        return self._committed.diff_changes(repo.namespace, head, changes)

    def _plain_branch(self, repo: RepoHandle, name: str) -> str:
        # A branch name, exactly: an expression like main~1 or main@ has no staging area.
        self._refs.get_branch(repo, name)
        return name

    def _require_clean(self, repo: RepoHandle, branch: BranchRecord, what: str) -> None:
        if next(self._uncommitted(repo, branch), None) is not None:
            raise FailedPrecondition(
                f"branch {branch.branch.name!r} has uncommitted changes; commit or reset them before {what}"
            )

    def merge_base_of(self, repo: RepoHandle, left: CommitId, right: CommitId) -> CommitId:
        base = find_merge_base(lambda cid: self._refs.get_commit(repo, cid), left, right)
        if base is None:
            raise FailedPrecondition(f"commits {left[:12]} and {right[:12]} have no common ancestor")
        return CommitId(base)

    def find_merge_base(self, repo: RepoHandle, left_ref: str, right_ref: str) -> CommitId:
        return self.merge_base_of(
            repo, self._refs.resolve(repo, left_ref).commit_id, self._refs.resolve(repo, right_ref).commit_id
        )

    # --- merge, revert, cherry-pick -----------------------------------------------------------

    def merge(
        self,
        repo: RepoHandle,
        source_ref: str,
        destination: str,
        strategy: MergeStrategy,
        path_strategies: list[tuple[str, MergeStrategy]],
        squash: bool,
        allow_empty: bool,
        message: str,
        metadata: dict[str, str],
        committer: str,
        deadline: Deadline,
        check: KeyCheck | None = None,
        resolutions: Resolutions | None = None,
    ) -> MergeOutcome:
        """Merge source_ref into the branch destination; with resolutions, their keys get what
        they say, and only while both sides hold what they expect (merge_resolutions.py)."""
        resolver = resolver_for(strategy, path_strategies)
        source_id = self._refs.resolve(repo, source_ref).commit_id
        source = self._refs.get_commit(repo, source_id)

        def plan(dest: BranchRecord) -> Plan:
            dest_head = self._refs.get_commit(repo, dest.branch.commit_id)
            base_id = self.merge_base_of(repo, source_id, CommitId(dest_head.id))
            if base_id == source_id and not allow_empty:
                raise FailedPrecondition(f"nothing to merge: {source_ref!r} is already in {destination!r}")
            base = self._refs.get_commit(repo, base_id)
            parents = [CommitId(dest_head.id)] if squash else [CommitId(dest_head.id), source_id]
            generation = max(dest_head.generation, source.generation) + 1
            text = message or f"Merge {source_ref!r} into {destination!r}"
            return Plan(
                MetaRangeId(base.metarange_id),
                MetaRangeId(source.metarange_id),
                MetaRangeId(dest_head.metarange_id),
                parents,
                text,
                generation,
            )

        # A merge records the source's history even when the content ends up unchanged (e.g.
        # dest-wins on every conflict); "nothing to merge" is decided by ancestry above.
        return self._combine(
            repo, destination, "merging", plan, resolver, True, metadata, committer, deadline, check, resolutions
        )

    def revert(
        self,
        repo: RepoHandle,
        branch_name: str,
        ref: str,
        parent_number: int,
        message: str,
        metadata: dict[str, str],
        committer: str,
        deadline: Deadline,
        allow_empty: bool = False,
        check: KeyCheck | None = None,
    ) -> MergeOutcome:
        """Undo a commit's change on a branch: a three-way merge from the commit to its parent."""
        target, parent = self._with_parent(repo, ref, parent_number)

        def plan(dest: BranchRecord) -> Plan:
            return self._onto_head(repo, dest, target, parent, message or f"Revert {target.id}")

        return self._combine(
            repo, branch_name, "reverting", plan, None, allow_empty, metadata, committer, deadline, check
        )

    def cherry_pick(
        self,
        repo: RepoHandle,
        branch_name: str,
        ref: str,
        parent_number: int,
        committer: str,
        deadline: Deadline,
        pick: CherryPickOverrides | None = None,
        check: KeyCheck | None = None,
    ) -> MergeOutcome:
        """Apply a commit's change onto a branch: a three-way merge from its parent to it. The
        new commit keeps the picked one's message and metadata (unless overridden), says where
        it came from and who made that, under lakeFS's keys, and is by the picker."""
        pick = pick or CherryPickOverrides()
        target, parent = self._with_parent(repo, ref, parent_number)
        # The name the picked commit was made under (the user the REST API named, else its
        # committer) is recorded; the key that named it is not carried over: the new commit is
        # the picker's, labelled by the caller's own metadata.
        original = target.metadata.get(REQUESTED_COMMITTER_KEY) or target.committer
        kept = {k: v for k, v in target.metadata.items() if k not in RESERVED_METADATA_KEYS}
        metadata = {
            **kept,
            **pick.metadata,
            CHERRY_PICK_ORIGIN_KEY: target.id,
            CHERRY_PICK_COMMITTER_KEY: original,
        }
        message = pick.message or target.message

        def plan(dest: BranchRecord) -> Plan:
            return self._onto_head(repo, dest, parent, target, message)

        return self._combine(
            repo, branch_name, "cherry-picking", plan, None, pick.allow_empty, metadata, committer, deadline, check
        )

    def _with_parent(self, repo: RepoHandle, ref: str, parent_number: int) -> tuple[pb.Commit, pb.Commit]:
        """The commit `ref` names and its parent number `parent_number` (0: the first): what a
        revert or a cherry-pick merges between."""
        target = self._refs.get_commit(repo, self._refs.resolve(repo, ref).commit_id)
        return target, self._refs.get_commit(repo, _parent_of(target, parent_number))

    def _onto_head(
        self, repo: RepoHandle, dest: BranchRecord, base: pb.Commit, source: pb.Commit, message: str
    ) -> Plan:
        """The change from `base` to `source` merged onto `dest`'s head, committed with `message`
        as the head's only child."""
        head = self._refs.get_commit(repo, dest.branch.commit_id)
        return Plan(
            MetaRangeId(base.metarange_id),
            MetaRangeId(source.metarange_id),
            MetaRangeId(head.metarange_id),
            [CommitId(head.id)],
            message,
            head.generation + 1,
        )

    def _combine(
        self,
        repo: RepoHandle,
        branch_name: str,
        what: str,
        plan: Callable[[BranchRecord], Plan],
        resolver: Resolver | None,
        allow_empty: bool,
        metadata: dict[str, str],
        committer: str,
        deadline: Deadline,
        check: KeyCheck | None = None,
        resolutions: Resolutions | None = None,
    ) -> MergeOutcome:
        """Three-way merge onto a branch's head, committed and moved with set_if; redone if the branch moved.

        `resolutions` are checked against the plan's source and destination (a stale one fails
        the attempt as a conflict at its key) and written over the merged metarange.

        `check` is shown the keys the result changes on the head, before the commit is written:
        a refusal ends the operation with nothing committed (the ranges the merge wrote are
        referenced by nothing, and garbage collection removes them).

        The branch must be clean, but clean is a statement about what its staged values show,
        not that it has none: copies of committed values that a prefix commit left in its
        sealed tokens, a staged value equal to the head's, a tombstone for a key the head does
        not have. Staged values are read before the head, so any of them left in place would
        hide the new head. So the move drops every token it checked, in the same set_if: the
        sealed ones as they are (nothing writes to a sealed token and stays there: a writer
        that finds its token sealed writes again to the new one), and a staging token that
        holds anything is sealed first (a set_if of its own) and checked again, so that a
        write racing with the merge lands in a token the move keeps, on top of the new head.

        That token is closed right before the move, which seals it on top of the new head and
        gives the branch a fresh staging token (head_moves.py): a conditional write judged on
        the old head is admitted before the move or refused and judged again, never admitted
        into a token that shows on top of a head it did not judge. The kept token is unsealed
        afterwards when nothing was written to it.
        """
        move = HeadMove(self._core, self._cleaner, repo, branch_name)
        # The branch record the move applied over, once it has: its sealed tokens are dropped.
        moved_over: list[BranchRecord] = []

        def attempt(_: int) -> MergeOutcome:
            dest = self._refs.get_branch(repo, branch_name)
            for token in dest.sealed_tokens:
                # The move drops them: every conditional write admitted into one must show in
                # the check below (StagingStore.close).
                self._staging.close(token)
            self._require_clean(repo, dest, what)
            if not self._staging.is_empty(StagingToken(dest.branch.staging_token)):
                self._seal(repo, branch_name, dest)
                raise Raced
            planned = plan(dest)
            if resolutions:
                stale = resolutions.stale(lambda key: self._sides(repo, planned, key))
                if stale:
                    return MergeOutcome(conflicts=stale)
            result = self._committed.merge(
                repo.namespace,
                planned.base,
                planned.source,
                planned.dest,
                resolver if resolutions is None else resolutions.resolver(resolver),
                deadline,
            )
            if not result.succeeded:
                return MergeOutcome(conflicts=list(result.conflicts), conflicts_truncated=result.conflicts_truncated)
            assert result.metarange_id is not None
            merged = result.metarange_id
            if resolutions:
                merged = self._committed.apply(repo.namespace, merged, resolutions.changes()).metarange_id
            if merged == planned.dest and not allow_empty:
                raise FailedPrecondition(f"{what} changes nothing on branch {branch_name!r}")
            if check is not None and merged != planned.dest:
                changes = self._committed.diff_grouped(repo.namespace, planned.dest, merged)
                check.check(applied(changes), what)
            deadline.check(f"{what} onto {branch_name!r}")
            commit = new_commit(planned.message, dict(metadata), committer, merged, planned.parents, planned.generation)
            self._refs.put_commit(repo, commit)

            def point(branch: pb.Branch) -> None:
                branch.commit_id = commit.id
                # The branch was clean: a compacted metarange and the sealed tokens held only
                # the old head's content. The staging token holds what raced with the merge.
                branch.compacted_metarange_id = ""
                move.seal_on_top(branch)

            # PredicateFailed: the branch moved (a commit or another merge); the updater
            # starts over on its new head. An unknown outcome: the commit is in the head's
            # history (the move applied, finish as it does) or the move did not apply.
            moved_to = self._updater.moved_to(repo, commit)
            updated = modify_branch(dest, point)
            move.close_staging(dest)
            self._updater.set_if(repo, dest, updated, f"{what} onto {branch_name!r}", moved_to)
            moved_over[:] = [dest]
            return MergeOutcome(commit=commit)

        try:
            outcome = self._updater.retry(attempt, f"{what} onto {branch_name!r}", deadline)
        except BaseException:
            move.release()
            raise
        if not moved_over:
            move.release()  # conflicts, after an attempt that closed the token lost its move
            return outcome
        dropped = list(moved_over[0].sealed_tokens)
        if dropped:
            self._cleaner.drop_recorded(repo.partition, dropped)  # recorded with the move (updater.set_branch_if)
            self._entries.observer.cleared(repo.name, branch_name)
        move.settle(moved_over[0])
        return outcome

    def _sides(self, repo: RepoHandle, planned: Plan, key: bytes) -> tuple[Record | None, Record | None, Record | None]:
        """A key's records in a plan's base, source and destination."""
        get = self._committed.get
        return (
            get(repo.namespace, planned.base, key),
            get(repo.namespace, planned.source, key),
            get(repo.namespace, planned.dest, key),
        )

    def _seal(self, repo: RepoHandle, branch_name: str, current: BranchRecord) -> None:
        """Seal the staging token of the branch as read (PredicateFailed if it changed since;
        Raced if its outcome was unknown: the attempt, which reads the branch again and seals
        what it finds if need be, is run again as after either outcome)."""

        def seal(branch: pb.Branch) -> None:
            set_tokens(branch, new_token(repo.partition, branch_name), [branch.staging_token, *branch.sealed_tokens])

        self._updater.set_if(repo, current, modify_branch(current, seal), f"sealing {branch_name!r}", REDO)

    # --- reset ---------------------------------------------------------------------------------

    def reset_branch(
        self,
        repo: RepoHandle,
        branch_name: str,
        key: str | None,
        prefix: str | None,
        hard_ref: str | None,
        deadline: Deadline,
        check: KeyCheck | None = None,
    ) -> pb.Branch:
        """Drop uncommitted changes: all of them, one key's, a prefix's; or move the branch to a ref.

        `check` is shown the keys the reset changes before anything is dropped: the uncommitted
        changes it drops (a key added since the head is removed, any other written back) and,
        for a move, the differences between the head and the target.

        With a check, what is checked is exactly what is dropped. The reset then drops only
        sealed tokens (whole, or their keys at `key` or under `prefix`) and the compacted
        metarange, never the staging token writers are writing to: when that token holds
        something the reset drops, it is sealed first, once (the set_if a commit seals with),
        and the attempt runs again on the sealed record. Nothing written to a sealed token stays
        there unseen: a writer that finds its token sealed writes again to the new one, so every
        acknowledged value in a sealed token was there before the seal, hence before the check
        read it. A write that lands after the seal is in the new staging token, which the reset
        keeps, as it keeps a write made after it. Without a check (the caller holds every key)
        nothing needs sealing: the staging token's changes are dropped with the rest, and a
        write racing with the reset may go with them.
        """
        sealed_once: list[bool] = []

        def seal_once(current: BranchRecord, holds: Callable[[StagingToken], bool]) -> None:
            """Seal the staging token of current if it holds something the reset drops (Raced:
            the attempt runs again on the sealed record); after the reset's own seal, what the
            staging token holds was written since and stays."""
            if check is not None and not sealed_once and holds(StagingToken(current.branch.staging_token)):
                self._seal(repo, branch_name, current)
                sealed_once.append(True)
                raise Raced

        if key is not None or prefix is not None:
            under = validate_key(key) if key is not None else (prefix or "").encode()
            exact = key is not None

            def attempt_under(_: int) -> pb.Branch:
                current = self._refs.get_branch(repo, branch_name)
                seal_once(current, lambda token: self._staging.holds(token, under, exact))
                return self._reset_under(repo, current, under, exact, check, deadline)

            return self._updater.retry(attempt_under, f"reset of branch {branch_name!r}", deadline)

        target = self._refs.resolve(repo, hard_ref).commit_id if hard_ref else None
        # Every token of every record an attempt was made over: those the final record no
        # longer names were removed by the reset's update or by the change it lost a race to,
        # each of which recorded their drops (updater.set_branch_if).
        seen: dict[StagingToken, None] = {}

        def attempt(_: int) -> tuple[BranchRecord, pb.Branch]:
            current = self._refs.get_branch(repo, branch_name)
            seal_once(current, lambda token: self._staging.holds(token, b""))
            if check is not None:
                check.check(self._dropped(repo, current, b"", False), "the reset")
                if target is not None:
                    self._check_move(repo, current, target, check)
            seen.update(dict.fromkeys(current.tokens))
            updated = modify_branch(current, lambda branch: self._reset_record(repo, branch, target, check is None))
            if updated != current.branch:
                if target is not None and check is not None:
                    # The move keeps the staging token sealed on top of the new head: closed
                    # first, so that no conditional write judged on the old head lands there
                    # after the move (head_moves.py).
                    move.close_staging(current)
                # A reset of the uncommitted changes made again on the branch as it is now is
                # right whether or not it applied: it checks and drops what was sealed since,
                # which raced with it. A hard reset made again could undo a commit made on top
                # of it: only what its tokens tell (OutcomeUnknown when they cannot).
                applied = REDO if target is None else _moved_by(current, updated)
                self._updater.set_if(repo, current, updated, f"reset of branch {branch_name!r}", applied)
            return current, updated

        move = HeadMove(self._core, self._cleaner, repo, branch_name)
        try:
            before, updated = self._updater.retry(attempt, f"reset of branch {branch_name!r}", deadline)
        except BaseException:
            move.release()
            raise
        moved = StagingToken(before.branch.staging_token)
        if moved in updated.sealed_tokens:
            self._staging.close(moved)  # as _reset_under: before it is found empty and unsealed
        if moved in updated.sealed_tokens and self._staging.is_empty(moved):
            # Nothing was written to it before the move sealed it, and a writer that finds it
            # sealed writes again to the fresh token: it holds nothing to keep.
            self._unseal(repo, branch_name, moved, deadline)
            updated = self._refs.get_branch(repo, branch_name).branch
        kept = set(branch_tokens(updated))
        self._cleaner.drop_recorded(repo.partition, [token for token in seen if token not in kept])
        self._entries.observer.cleared(repo.name, branch_name)
        return updated

    def _unseal(self, repo: RepoHandle, branch_name: str, token: StagingToken, deadline: Deadline) -> None:
        def unseal(current: BranchRecord) -> pb.Branch:
            return modify_branch(
                current,
                lambda branch: set_tokens(
                    branch, branch.staging_token, [t for t in branch.sealed_tokens if t != token]
                ),
            )

        # Unsealing is idempotent: made again on the branch as it is now, it removes the token if still there.
        self._updater.update(repo, branch_name, unseal, "unsealing", deadline, REDO)

    @staticmethod
    def _reset_record(repo: RepoHandle, branch: pb.Branch, target: CommitId | None, everything: bool) -> None:
        """The branch without its sealed tokens and compaction, and without its staging token's
        changes too when everything goes (a fresh staging token); moved to target, if any.

        Otherwise a soft reset keeps the staging token (what it holds was written after the
        reset's seal), and a move keeps it sealed on top of the new head and gives the branch
        a fresh staging token, by which an unknown outcome of the move is told (_moved_by).
        """
        branch.compacted_metarange_id = ""
        if everything:
            set_tokens(branch, new_token(repo.partition, branch.name), [])
        elif target is None:
            set_tokens(branch, branch.staging_token, [])
        else:
            set_tokens(branch, new_token(repo.partition, branch.name), [branch.staging_token])
        if target is not None:
            branch.commit_id = target

    def _reset_under(
        self,
        repo: RepoHandle,
        current: BranchRecord,
        under: bytes,
        exact: bool,
        check: KeyCheck | None,
        deadline: Deadline,
    ) -> pb.Branch:
        """One attempt of a reset of one key (exact) or a prefix, on current: check what the
        sealed tokens and the compaction change there (the staging token holds nothing there
        the reset drops, or what it holds was written after the reset's seal), drop it from the
        sealed tokens, then give the compaction the head's values there and unseal the tokens
        left empty, all against current (Raced or PredicateFailed if the branch changed
        meanwhile: a commit or a compaction may have read the tokens before the drops, and the
        attempt runs again on what it made). Without a check, from the staging token too."""
        sealed = current.sealed_tokens
        for token in sealed:
            # Those left empty go: every conditional write admitted into one must be in it
            # first, and none admitted after (StagingStore.close).
            self._staging.close(token)
        if check is not None:
            check.check(self._dropped(repo, current, under, exact), "the reset")
        dropped_from = sealed if check is not None else current.tokens
        # Oldest token first, as a partial commit's clean-up does: until the newest copy goes,
        # reads keep answering it, never an older staged value it had overwritten.
        for token in reversed(dropped_from):
            if exact:
                self._staging.drop_key(token, under)
            else:
                self._staging.drop_under(token, under)
        emptied = [token for token in sealed if self._staging.is_empty(token)]
        compacted = current.branch.compacted_metarange_id
        restored = compacted
        if compacted:
            head = self._state.head_metarange(repo, current.branch)
            changes = self._state.restoring(repo.namespace, head, MetaRangeId(compacted), under)
            if exact:
                changes = (c for c in changes if c.key == under)
            deadline.check(f"reset of branch {current.branch.name!r}")
            result = self._committed.apply(repo.namespace, MetaRangeId(compacted), changes)
            restored = "" if result.metarange_id == head else result.metarange_id

        def change(branch: pb.Branch) -> None:
            set_tokens(branch, branch.staging_token, [t for t in branch.sealed_tokens if t not in emptied])
            branch.compacted_metarange_id = restored

        updated = modify_branch(current, change)
        what = f"reset of branch {current.branch.name!r}"
        if updated == current.branch:
            if self._refs.get_branch(repo, current.branch.name).predicate != current.predicate:
                raise Raced
            return updated
        # Made again on the branch as it is now, it checks and drops again what is there.
        self._updater.set_if(repo, current, updated, what, REDO)
        self._cleaner.drop_recorded(repo.partition, emptied)  # recorded with the update
        return updated

    def _dropped(self, repo: RepoHandle, branch: BranchRecord, under: bytes, exact: bool) -> Iterator[Change]:
        """What dropping the branch's sealed tokens and compaction at key `under` (exact) or
        under that prefix changes, lazily (the staging token stays: see reset_branch)."""
        head = self._state.head_metarange(repo, branch.branch)
        changes = self._state.pending(repo, branch.branch, branch.sealed_tokens, head, under)
        for change in undone(self._committed.diff_changes(repo.namespace, head, changes)):
            if (change[0] == under) if exact else change[0].startswith(under):
                yield change
            else:
                return

    def check_deletion(self, repo: RepoHandle, branch: BranchRecord, check: KeyCheck) -> None:
        """Deleting the branch removes its head's keys and drops its uncommitted changes: shown
        to check as removals, read only under the prefixes where it may refuse one (lazily, up
        to the first refused key)."""
        head = self._state.head_metarange(repo, branch.branch)

        def under(prefix: bytes) -> Iterator[Change]:
            for record in self._committed.iterate(repo.namespace, head, prefix):
                if not record.key.startswith(prefix):
                    break
                yield record.key, True
            for difference in self._uncommitted(repo, branch, prefix):
                if not difference.key.startswith(prefix):
                    break
                yield difference.key, True

        prefixes = [p.encode() for p in check.removal_prefixes()]
        check.check(itertools.chain.from_iterable(under(p) for p in prefixes), "deleting the branch")

    def _check_move(self, repo: RepoHandle, branch: BranchRecord, target: CommitId, check: KeyCheck) -> None:
        """A hard reset's committed changes: from the branch's head to the target's."""
        head = self._refs.get_commit(repo, branch.branch.commit_id).metarange_id
        moved = self._refs.get_commit(repo, target).metarange_id
        if head != moved:
            changes = self._committed.diff_grouped(repo.namespace, MetaRangeId(head), MetaRangeId(moved))
            check.check(applied(changes), "the reset")


def _moved_by(before: BranchRecord, after: pb.Branch) -> Applied:
    """Whether a hard reset whose outcome was unknown applied, by its tokens: the fresh one it
    gave the branch is there (it applied); the staging token it replaced is still the staging
    token, or a token it removed is there (it did not: tokens never come back); neither, when
    later changes replaced them all: cannot tell."""

    kept = set(branch_tokens(after))
    removed = [token for token in before.tokens if token not in kept]

    def applied(record: BranchRecord) -> bool | None:
        if after.staging_token in record.tokens:
            return True
        if record.branch.staging_token == before.branch.staging_token:
            return False
        if any(token in record.tokens for token in removed):
            return False
        return None

    return applied


def _within(keys: list[bytes], room: int, budget: int, first: bool) -> int:
    """How many of keys, at most room, fit in the budget (bytes) left on a summary page; the
    page's first item always does (first: the page is empty), as in paginate."""
    taken = min(len(keys), room)
    if taken and sum(map(len, keys[:taken])) + taken * SUMMARY_ITEM_BYTES > budget:
        ends = list(itertools.accumulate(len(key) + SUMMARY_ITEM_BYTES for key in keys[:taken]))
        taken = max(bisect.bisect_right(ends, budget), 1 if first else 0)
    return taken


def _parent_of(commit: pb.Commit, parent_number: int) -> CommitId:
    if not commit.parents:
        raise FailedPrecondition(f"commit {commit.id[:12]} has no parent")
    if len(commit.parents) > 1 and parent_number == 0:
        raise InvalidArgument(f"commit {commit.id[:12]} is a merge commit: choose a parent number (1-based)")
    number = parent_number or 1
    if not 1 <= number <= len(commit.parents):
        raise NotFound(f"commit {commit.id[:12]} has no parent number {number}", what="commit")
    return CommitId(commit.parents[number - 1])


def _differences_page(
    read: Callable[[bytes], Iterator[Difference]], prefix: str, delimiter: str, after: str, amount: int
) -> Page[Difference]:
    """One page of the differences `read` yields from a start key on (a diff's or a branch's
    uncommitted changes): under `prefix`, grouped by `delimiter`, after `after`."""
    return paginate(
        read,
        _difference_key,
        prefix.encode(),
        delimiter_bytes(delimiter),
        after.encode(),
        page_amount(amount),
        size_of=_difference_size,
    )


def _difference_key(difference: Difference) -> bytes:
    return difference.key


def _difference_size(difference: Difference) -> int:
    # Called once per item of a page (up to 10,000): no generator or tuple per call.
    key, _, left, right = difference
    return len(key) + (0 if left is None else len(left.value)) + (0 if right is None else len(right.value))


__all__ = ["Branching", "CommonPrefix", "MergeOutcome"]
