"""Comparing, combining and undoing: diff, merge, revert, cherry-pick and reset.

Everything here works on metaranges through the committed layer, whose walks skip ranges
with equal ids, so the cost follows the size of the change, not of the repository. Branch
moves use the same set_if-and-retry discipline as commits: no lock anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.graveler.builder import staged_changes
from services.graveler.committed.diff import Difference
from services.graveler.committed.merge import Conflict, Resolver, by_pattern
from services.graveler.history import find_merge_base
from services.graveler.paging import CommonPrefix, Page, delimiter_bytes, page_amount, paginate
from services.graveler.refs import BranchRecord, RepoHandle, set_tokens
from services.graveler.staging import new_token
from services.graveler.validation import validate_key
from silt.errors import Aborted, FailedPrecondition, InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb

if TYPE_CHECKING:
    from services.graveler.graveler import Graveler, Resolved


STRATEGIES = {"fail", "source-wins", "dest-wins"}


@dataclass
class MergeOutcome:
    """Either the commit made, or the conflicts that stopped the operation (nothing changed)."""

    commit: pb.Commit | None = None
    conflicts: list[Conflict] = field(default_factory=list)


def resolver_for(strategy: str, path_strategies: list[tuple[str, str]]) -> Resolver | None:
    if strategy not in STRATEGIES or any(s not in STRATEGIES for _, s in path_strategies):
        raise InvalidArgument(f"merge strategy must be one of {sorted(STRATEGIES)}")
    if not path_strategies and strategy == "fail":
        return None
    return by_pattern(path_strategies, strategy)


class BranchingMixin:
    """Operations of Graveler that compare or combine refs (mixed into Graveler)."""

    # --- diff --------------------------------------------------------------------------------

    def diff(
        self: Graveler,
        repository: str,
        left_ref: str,
        right_ref: str,
        three_dot: bool,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
    ) -> Page[Difference]:
        repo = self._repo(repository)
        left = self.refs.get_commit(repo, self._resolve(repo, left_ref).commit_id)
        right = self.refs.get_commit(repo, self._resolve(repo, right_ref).commit_id)
        if three_dot:
            base_id = self.merge_base_of(repo, left.id, right.id)
            left = self.refs.get_commit(repo, base_id)
        return paginate(
            lambda start: self.committed.diff(repo.namespace, left.metarange_id, right.metarange_id, start),
            _difference_key,
            prefix.encode(),
            delimiter_bytes(delimiter),
            after.encode(),
            page_amount(amount),
            size_of=_difference_size,
        )

    def diff_branch(
        self: Graveler, repository: str, branch_name: str, prefix: str, delimiter: str, after: str, amount: int
    ) -> Page[Difference]:
        """The uncommitted changes of a branch: staged values against its head commit."""
        repo = self._repo(repository)

        def body(resolved: Resolved) -> Page[Difference]:
            branch = resolved.branch
            assert branch is not None  # a plain branch name always resolves with its staging area
            return paginate(
                lambda start: self._uncommitted(repo, branch, start),
                _difference_key,
                prefix.encode(),
                delimiter_bytes(delimiter),
                after.encode(),
                page_amount(amount),
                size_of=_difference_size,
            )

        return self._read(repo, self._plain_branch(repo, branch_name), body)

    def _uncommitted(
        self: Graveler, repo: RepoHandle, branch: BranchRecord, start: bytes = b""
    ) -> Iterator[Difference]:
        tokens = [branch.branch.staging_token, *branch.branch.sealed_tokens]
        head = self.refs.get_commit(repo, branch.branch.commit_id)
        return self.committed.diff_changes(
            repo.namespace, head.metarange_id, staged_changes(self.staging, tokens, start)
        )

    def _plain_branch(self: Graveler, repo: RepoHandle, name: str) -> str:
        # A branch name, exactly: an expression like main~1 or main@ has no staging area.
        self.refs.get_branch(repo, name)
        return name

    def _require_clean(self: Graveler, repo: RepoHandle, branch: BranchRecord, what: str) -> None:
        if next(self._uncommitted(repo, branch), None) is not None:
            raise FailedPrecondition(
                f"branch {branch.branch.name!r} has uncommitted changes; commit or reset them before {what}"
            )

    def merge_base_of(self: Graveler, repo: RepoHandle, left: str, right: str) -> str:
        base = find_merge_base(lambda cid: self.refs.get_commit(repo, cid), left, right)
        if base is None:
            raise FailedPrecondition(f"commits {left[:12]} and {right[:12]} have no common ancestor")
        return base

    def find_merge_base(self: Graveler, repository: str, left_ref: str, right_ref: str) -> str:
        repo = self._repo(repository)
        return self.merge_base_of(
            repo, self._resolve(repo, left_ref).commit_id, self._resolve(repo, right_ref).commit_id
        )

    # --- merge, revert, cherry-pick -----------------------------------------------------------

    def merge(
        self: Graveler,
        repository: str,
        source_ref: str,
        destination: str,
        strategy: str = "fail",
        path_strategies: list[tuple[str, str]] | None = None,
        squash: bool = False,
        allow_empty: bool = False,
        message: str = "",
        metadata: dict[str, str] | None = None,
        committer: str = "",
    ) -> MergeOutcome:
        repo = self._repo(repository)
        resolver = resolver_for(strategy, path_strategies or [])
        source_id = self._resolve(repo, source_ref).commit_id
        source = self.refs.get_commit(repo, source_id)

        def plan(dest: BranchRecord) -> tuple[str, str, str, list[str], str, int] | None:
            dest_head = self.refs.get_commit(repo, dest.branch.commit_id)
            base_id = self.merge_base_of(repo, source_id, dest_head.id)
            if base_id == source_id and not allow_empty:
                raise FailedPrecondition(f"nothing to merge: {source_ref!r} is already in {destination!r}")
            base = self.refs.get_commit(repo, base_id)
            parents = [dest_head.id] if squash else [dest_head.id, source_id]
            generation = max(dest_head.generation, source.generation) + 1
            text = message or f"Merge {source_ref!r} into {destination!r}"
            return base.metarange_id, source.metarange_id, dest_head.metarange_id, parents, text, generation

        # A merge records the source's history even when the content ends up unchanged (e.g.
        # dest-wins on every conflict); "nothing to merge" is decided by ancestry above.
        return self._combine(repo, destination, "merging", plan, resolver, True, metadata, committer)

    def revert(
        self: Graveler,
        repository: str,
        branch_name: str,
        ref: str,
        parent_number: int = 0,
        message: str = "",
        metadata: dict[str, str] | None = None,
        committer: str = "",
    ) -> MergeOutcome:
        """Undo a commit's change on a branch: a three-way merge from the commit to its parent."""
        repo = self._repo(repository)
        target = self.refs.get_commit(repo, self._resolve(repo, ref).commit_id)
        parent = self.refs.get_commit(repo, _parent_of(target, parent_number))

        def plan(dest: BranchRecord) -> tuple[str, str, str, list[str], str, int]:
            head = self.refs.get_commit(repo, dest.branch.commit_id)
            text = message or f"Revert {target.id}"
            return target.metarange_id, parent.metarange_id, head.metarange_id, [head.id], text, head.generation + 1

        return self._combine(repo, branch_name, "reverting", plan, None, False, metadata, committer)

    def cherry_pick(
        self: Graveler, repository: str, branch_name: str, ref: str, parent_number: int = 0, committer: str = ""
    ) -> MergeOutcome:
        """Apply a commit's change onto a branch: a three-way merge from its parent to it."""
        repo = self._repo(repository)
        target = self.refs.get_commit(repo, self._resolve(repo, ref).commit_id)
        parent = self.refs.get_commit(repo, _parent_of(target, parent_number))
        metadata = {**target.metadata, "cherry-picked-from": target.id}

        def plan(dest: BranchRecord) -> tuple[str, str, str, list[str], str, int]:
            head = self.refs.get_commit(repo, dest.branch.commit_id)
            return (
                parent.metarange_id,
                target.metarange_id,
                head.metarange_id,
                [head.id],
                target.message,
                head.generation + 1,
            )

        return self._combine(
            repo, branch_name, "cherry-picking", plan, None, False, metadata, committer or target.committer
        )

    def _combine(
        self: Graveler,
        repo: RepoHandle,
        branch_name: str,
        what: str,
        plan: Callable[[BranchRecord], tuple[str, str, str, list[str], str, int] | None],
        resolver: Resolver | None,
        allow_empty: bool,
        metadata: dict[str, str] | None,
        committer: str,
    ) -> MergeOutcome:
        """Three-way merge onto a branch's head, committed and moved with set_if; redone if the branch moved."""
        for _ in range(self.options.max_retries):
            dest = self.refs.get_branch(repo, branch_name)
            self._require_clean(repo, dest, what)
            planned = plan(dest)
            assert planned is not None
            base_mr, source_mr, dest_mr, parents, text, generation = planned
            result = self.committed.merge(repo.namespace, base_mr, source_mr, dest_mr, resolver)
            if not result.succeeded:
                return MergeOutcome(conflicts=list(result.conflicts))
            assert result.metarange_id is not None
            if result.metarange_id == dest_mr and not allow_empty:
                raise FailedPrecondition(f"{what} changes nothing on branch {branch_name!r}")
            commit = self._make_commit(
                repo, text, dict(metadata or {}), committer, result.metarange_id, parents, generation
            )
            self.refs.put_commit(repo, commit)
            updated = pb.Branch()
            updated.CopyFrom(dest.branch)
            updated.commit_id = commit.id
            try:
                self.refs.set_branch_if(repo, updated, dest.predicate)
            except PredicateFailed:
                continue  # the branch moved (a commit or another merge): start over on its new head
            return MergeOutcome(commit=commit)
        raise Aborted(f"{what} onto {branch_name!r} raced with other changes {self.options.max_retries} times; retry")

    # --- reset ---------------------------------------------------------------------------------

    def reset_branch(
        self: Graveler,
        repository: str,
        branch_name: str,
        *,
        key: str | None = None,
        prefix: str | None = None,
        hard_ref: str | None = None,
    ) -> pb.Branch:
        """Drop uncommitted changes: all of them, one key's, a prefix's; or move the branch to a ref."""
        repo = self._repo(repository)
        if key is not None or prefix is not None:
            under = validate_key(key) if key is not None else (prefix or "").encode()
            branch = self.refs.get_branch(repo, branch_name)
            for token in [branch.branch.staging_token, *branch.branch.sealed_tokens]:
                if key is not None:
                    self.staging.drop_key(token, under)
                else:
                    for kv in list(self._staged_under(token, under)):
                        self.staging.drop_key(token, kv)
            return self.refs.get_branch(repo, branch_name).branch
        target = self._resolve(repo, hard_ref).commit_id if hard_ref else None

        def reset(branch: pb.Branch) -> None:
            set_tokens(branch, new_token(repo.partition, branch_name), [])
            if target is not None:
                branch.commit_id = target

        current, updated = self._update_branch(repo, branch_name, reset, "reset")
        for token in [current.branch.staging_token, *current.branch.sealed_tokens]:
            self._cleanup.submit(self._drop_token, token)
        return updated

    def _staged_under(self: Graveler, token: str, prefix: bytes) -> Iterator[bytes]:
        for kv in self.staging.scan(token, prefix):
            if not kv.key.startswith(prefix):
                return
            yield kv.key


def _parent_of(commit: pb.Commit, parent_number: int) -> str:
    if not commit.parents:
        raise FailedPrecondition(f"commit {commit.id[:12]} has no parent")
    if len(commit.parents) > 1 and parent_number == 0:
        raise InvalidArgument(f"commit {commit.id[:12]} is a merge commit: choose a parent number (1-based)")
    number = parent_number or 1
    if not 1 <= number <= len(commit.parents):
        raise NotFound(f"commit {commit.id[:12]} has no parent number {number}")
    return commit.parents[number - 1]


def _difference_key(difference: Difference) -> bytes:
    return difference.key


def _difference_size(difference: Difference) -> int:
    sides = (difference.left, difference.right)
    return len(difference.key) + sum(len(side.value) for side in sides if side is not None)


__all__ = ["BranchingMixin", "CommonPrefix", "MergeOutcome"]
