"""Graveler: the versioning engine's facade, composed of components with one job each.

* RefManager (refs/): repositories, branches, tags, commits on KV, and resolving ref expressions;
* StagingStore (staging.py): staged values per staging token;
* CommittedManager (committed/): immutable ranges and metaranges in the object store;
* BranchUpdater (updater.py): the one set_if-and-retry loop on branch records;
* Entries (entries.py): the writer and reader flows; Committer (commits.py): the commit flow;
* Branching (branching.py): diff, merge, revert, cherry-pick, reset;
* Lifecycle (lifecycle.py): creating, deleting, dumping and restoring repositories;
* Protection (protection.py): branch protection rules, checked by every write to a branch here;
* PullRequests (pulls.py): pull requests, comments and reviews; the one way into a branch
  whose protection requires approvals;
* Compaction, CompactedState (compaction.py): folding staged changes into a compacted metarange;
* Retention (retention.py): garbage-collection rules and the export a GC run starts from;
* LastAccess (last_access.py): the export a last-access run reads, and the expiries it asks for;
* Cleaner (cleanup.py): background deletion of staged values nothing refers to.

No lock anywhere (docs/design/lockfree-staging.md). Every public method takes the caller's
Deadline; the gRPC layer (server.py) passes the call's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from services.graveler.branching import Branching, CherryPickOverrides, MergeOutcome
from services.graveler.builder import InProcessBuilder, MetaRangeBuilder
from services.graveler.cleanup import Cleaner
from services.graveler.commits import Committer
from services.graveler.committed.diff import Difference
from services.graveler.committed.manager import CommittedManager
from services.graveler.committed.model import MetaRangeId
from services.graveler.compaction import CompactedState, Compaction, CompactionResult, NoObserver, StagingObserver
from services.graveler.deadline import NO_DEADLINE, Clock, Deadline
from services.graveler.entries import MAX_DELETE_KEYS, Condition, DeleteOutcome, Entries, ListPage, StoredListPage
from services.graveler.history import LogFilter, LogPage, log_page
from services.graveler.last_access import Expiry, LastAccess, PreparedLastAccess
from services.graveler.lifecycle import DEFAULT_BRANCH, Dumped, Lifecycle, Restored
from services.graveler.model import CommitId, MergeStrategy
from services.graveler.paging import Page
from services.graveler.placement import Placement, ShareCheck, nobody
from services.graveler.protection import Protection
from services.graveler.pulls import PullRequests, Standing
from services.graveler.refs import RefManager, RepoHandle, Resolved
from services.graveler.refs import expr as refexpr
from services.graveler.repo_metadata import RepositoryMetadata
from services.graveler.retention import PreparedRun, Retention
from services.graveler.staging import StagingStore, new_token
from services.graveler.updater import BranchUpdater, RetryPolicy
from services.graveler.validation import validate_key, validate_prefix, validate_ref_name
from silt.errors import FailedPrecondition, InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import background_context
from silt.kv import Store
from silt.paging import page_size, take_page

_T = TypeVar("_T")

# Objects and prefixes one log may filter by: each commit of the walk is compared on all of them.
MAX_LOG_PATHS = 100

__all__ = ["DEFAULT_BRANCH", "Graveler", "GravelerOptions", "ListPage", "Resolved"]


@dataclass
class GravelerOptions:
    # How often a flow re-runs after losing a race before it gives up with Aborted.
    max_retries: int = 50
    # Backoff between those runs: exponential from this, fully jittered, capped at retry_max_wait.
    retry_first_wait: float = 0.001
    retry_max_wait: float = 0.05
    # The writer/reader flows may start from a cached branch record this young; the re-check
    # after the write or read always reads the KV store (docs/design/lockfree-staging.md).
    branch_cache_seconds: float = 0.05
    # Staged values of committed tokens are deleted in the background after the commit.
    cleanup_workers: int = 1
    # Absolute physical addresses outside a repository's namespace that entries may still name.
    allowed_import_prefixes: tuple[str, ...] = ()
    # Where repositories' storage namespaces may lie; the first root is where unnamed ones go.
    allowed_namespace_roots: tuple[str, ...] = ("local://",)


class Graveler:
    def __init__(
        self,
        kv: Store,
        committed: CommittedManager,
        options: GravelerOptions | None = None,
        builder: MetaRangeBuilder | None = None,
        clock: Clock = time.monotonic,
        observer: StagingObserver | None = None,
    ) -> None:
        self.options = options = options or GravelerOptions()
        # What must stop before the engine does (and before whoever opened the store closes it).
        self._on_close: list[Callable[[], None]] = []
        self.refs = RefManager(kv, options.branch_cache_seconds, clock)
        self.staging = StagingStore(kv)
        self.committed = committed
        builder = builder or InProcessBuilder(self.staging, committed)
        self.updater = BranchUpdater(
            self.refs, RetryPolicy(options.max_retries, options.retry_first_wait, options.retry_max_wait)
        )
        self.cleaner = Cleaner(builder, options.cleanup_workers)
        observer = observer or NoObserver()
        self.compacted = CompactedState(self.refs, self.staging, committed)
        self.entries = Entries(
            self.refs,
            self.staging,
            committed,
            self.updater,
            self.compacted,
            observer,
            options.allowed_import_prefixes,
        )
        self.committer = Committer(
            self.refs, self.staging, builder, self.updater, self.cleaner, committed, self.compacted, observer
        )
        self.branching = Branching(
            self.refs, self.staging, committed, self.updater, self.entries, self.cleaner, self.compacted
        )
        self.protection = Protection(kv, self.updater, options.branch_cache_seconds, clock)
        self.repo_metadata = RepositoryMetadata(kv, self.updater)
        self.pulls = PullRequests(self.refs, self.updater, self.branching, self.protection)
        self.lifecycle = Lifecycle(
            self.refs,
            committed,
            self.cleaner,
            Placement(options.allowed_namespace_roots),
            self.pulls,
            self.protection,
        )
        self.compaction = Compaction(
            self.refs, self.compacted, lambda: self.committer.builder, self.updater, self.cleaner, observer
        )
        self.retention = Retention(self.refs, kv, self.staging, committed.adapter, self.lifecycle)
        self.last_access = LastAccess(
            self.refs, kv, self.entries, self.retention, self.committer, self.protection, committed.adapter
        )

    @property
    def observer(self) -> StagingObserver:
        return self.entries.observer

    @observer.setter
    def observer(self, observer: StagingObserver) -> None:
        # The sensor is built after the engine (it rebuilds its counts from the engine's KV).
        self.entries.observer = self.committer.observer = self.compaction.observer = observer

    @property
    def builder(self) -> MetaRangeBuilder:
        return self.committer.builder

    @builder.setter
    def builder(self, builder: MetaRangeBuilder) -> None:
        # Tests swap in a builder they control; the committer and the cleaner share it.
        self.committer.builder = builder
        self.cleaner.builder = builder

    def on_close(self, stop: Callable[[], None]) -> None:
        """Run stop when the engine closes, before its own workers (latest registered first)."""
        self._on_close.append(stop)

    def close(self) -> None:
        while self._on_close:
            self._on_close.pop()()
        self.cleaner.close()
        self.builder.close()

    def _repo(self, name: str, deadline: Deadline) -> RepoHandle:
        deadline.check(f"call on repository {name!r}")
        return self.refs.repository(name)

    # --- repositories --------------------------------------------------------------------

    def create_repository(
        self,
        name: str,
        storage_namespace: str,
        default_branch: str = "",
        bare: bool = False,
        *,
        may_share: ShareCheck = nobody,
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.Repository:
        deadline.check(f"creating repository {name!r}")
        return self.lifecycle.create_repository(name, storage_namespace, default_branch, bare, may_share)

    def get_repository(self, name: str, *, deadline: Deadline = NO_DEADLINE) -> pb.Repository:
        deadline.check(f"reading repository {name!r}")
        return self.refs.get_repository(name).record

    def update_repository_metadata(
        self, name: str, set_keys: dict[str, str], delete_keys: list[str], *, deadline: Deadline = NO_DEADLINE
    ) -> pb.Repository:
        deadline.check(f"updating the metadata of repository {name!r}")
        return self.repo_metadata.update(name, set_keys, delete_keys, deadline)

    def list_repositories(
        self, after: str, amount: int, *, deadline: Deadline = NO_DEADLINE
    ) -> tuple[list[pb.Repository], bool]:
        deadline.check("listing repositories")
        return take_page(self.refs.list_repositories(after), amount)

    def delete_repository(self, name: str, *, deadline: Deadline = NO_DEADLINE) -> None:
        deadline.check(f"deleting repository {name!r}")
        self.lifecycle.delete_repository(name)

    def clean_deleted_repositories(self) -> int:
        return self.lifecycle.clean_deleted_repositories()

    def dump_refs(self, repository: str, *, deadline: Deadline = NO_DEADLINE) -> Dumped:
        return self.lifecycle.dump_refs(self._repo(repository, deadline))

    def restore_refs(self, repository: str, location: str, *, deadline: Deadline = NO_DEADLINE) -> Restored:
        return self.lifecycle.restore_refs(self._repo(repository, deadline), location)

    # --- branches ------------------------------------------------------------------------

    def create_branch(
        self, repository: str, name: str, source_ref: str, *, hidden: bool = False, deadline: Deadline = NO_DEADLINE
    ) -> pb.Branch:
        repo = self._repo(repository, deadline)
        validate_ref_name(name)
        source = self.refs.resolve(repo, source_ref or repo.record.default_branch)
        branch = pb.Branch(
            name=name, commit_id=source.commit_id, staging_token=new_token(repo.partition, name), hidden=hidden
        )
        self.refs.create_branch(repo, branch)
        return branch

    def get_branch(self, repository: str, name: str, *, deadline: Deadline = NO_DEADLINE) -> pb.Branch:
        return self.refs.get_branch(self._repo(repository, deadline), name).branch

    def list_branches(
        self, repository: str, after: str, amount: int, *, deadline: Deadline = NO_DEADLINE
    ) -> tuple[list[pb.Branch], bool]:
        return take_page(self.refs.list_branches(self._repo(repository, deadline), after), amount)

    def delete_branch(self, repository: str, name: str, *, deadline: Deadline = NO_DEADLINE) -> None:
        repo = self._repo(repository, deadline)
        if name == repo.record.default_branch:
            raise FailedPrecondition(f"branch {name!r} is the default branch of {repository!r} and cannot be deleted")
        self.protection.check_direct_write(repo, name, "deleting the branch")
        record = self.refs.get_branch(repo, name)
        self.refs.delete_branch(repo, name)
        self.cleaner.drop_tokens(record.tokens)

    def reset_branch(
        self,
        repository: str,
        branch_name: str,
        *,
        key: str | None = None,
        prefix: str | None = None,
        hard_ref: str | None = None,
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.Branch:
        """Drop uncommitted changes: all of them, one key's, a prefix's; or move the branch to a ref."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "reset")
        return self.branching.reset_branch(repo, branch_name, key, prefix, hard_ref, deadline)

    # --- tags ----------------------------------------------------------------------------

    def create_tag(self, repository: str, tag_id: str, ref: str, *, deadline: Deadline = NO_DEADLINE) -> pb.Tag:
        repo = self._repo(repository, deadline)
        validate_ref_name(tag_id, "tag")
        tag = pb.Tag(id=tag_id, commit_id=self.refs.resolve(repo, ref).commit_id)
        self.refs.create_tag(repo, tag)
        return tag

    def get_tag(self, repository: str, tag_id: str, *, deadline: Deadline = NO_DEADLINE) -> pb.Tag:
        return self.refs.get_tag(self._repo(repository, deadline), tag_id)

    def list_tags(
        self, repository: str, after: str, amount: int, *, deadline: Deadline = NO_DEADLINE
    ) -> tuple[list[pb.Tag], bool]:
        return take_page(self.refs.list_tags(self._repo(repository, deadline), after), amount)

    def delete_tag(self, repository: str, tag_id: str, *, deadline: Deadline = NO_DEADLINE) -> None:
        repo = self._repo(repository, deadline)
        self.refs.get_tag(repo, tag_id)
        self.refs.delete_tag(repo, tag_id)

    # --- refs and history ----------------------------------------------------------------

    def resolve_ref(self, repository: str, ref: str, *, deadline: Deadline = NO_DEADLINE) -> Resolved:
        return self.refs.resolve(self._repo(repository, deadline), ref)

    def get_commit(self, repository: str, commit_id: str, *, deadline: Deadline = NO_DEADLINE) -> pb.Commit:
        repo = self._repo(repository, deadline)
        if not refexpr.looks_like_commit_prefix(commit_id):
            raise InvalidArgument(f"invalid commit id {commit_id!r}")
        return self.refs.get_commit(repo, self.refs.commit_by_prefix(repo, commit_id))

    def log(
        self,
        repository: str,
        ref: str,
        after: str = "",
        amount: int = 0,
        objects: list[str] | None = None,
        prefixes: list[str] | None = None,
        first_parent: bool = False,
        limit: int = 0,
        since_nanos: int = 0,
        stop_at: str = "",
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> LogPage:
        """A page of the history of ref (see history.log_page: bounded work per call)."""
        size = page_size(amount)
        if limit < 0:
            raise InvalidArgument(f"limit must not be negative, got {limit}")
        paths = len(objects or ()) + len(prefixes or ())
        if paths > MAX_LOG_PATHS:
            raise InvalidArgument(f"a log filters by at most {MAX_LOG_PATHS} objects and prefixes, got {paths}")
        repo = self._repo(repository, deadline)
        head = self.refs.resolve(repo, ref).commit_id
        filters = LogFilter(first_parent=first_parent, since_nanos=since_nanos)
        if stop_at:
            filters.stop_at = self.refs.resolve(repo, stop_at).commit_id
        if objects or prefixes:
            keys = [validate_key(k) for k in objects or []]
            under = [validate_prefix(p) for p in prefixes or []]
            filters.touches = lambda commit: self._touches(repo, commit, keys, under)
        return log_page(lambda cid: self.refs.get_commit(repo, cid), head, filters, after, size, limit, deadline)

    def _touches(self, repo: RepoHandle, commit: pb.Commit, keys: list[bytes], prefixes: list[bytes]) -> bool:
        """Whether commit changed any of keys or anything under prefixes, against its first parent."""
        if commit.parents:
            parent_metarange = MetaRangeId(self.refs.get_commit(repo, commit.parents[0]).metarange_id)
        else:
            parent_metarange = self.committed.write_metarange(repo.namespace, iter(()))
        return self.committed.changed_paths(
            repo.namespace, parent_metarange, MetaRangeId(commit.metarange_id), keys, prefixes
        )

    def find_merge_base(
        self, repository: str, left_ref: str, right_ref: str, *, deadline: Deadline = NO_DEADLINE
    ) -> CommitId:
        return self.branching.find_merge_base(self._repo(repository, deadline), left_ref, right_ref)

    # --- compaction ----------------------------------------------------------------------

    def compact(self, repository: str, branch_name: str, *, deadline: Deadline = NO_DEADLINE) -> CompactionResult:
        """Fold the branch's staged changes into its compacted metarange (docs/design/compaction.md).

        Raises CompactionLost (Aborted) when a commit, reset or another compaction changed the
        branch meanwhile; nothing changed then.
        """
        # The compactor service calls this in its own process, outside any gRPC call.
        with background_context("compaction", repository):
            repo = self._repo(repository, deadline)
            return self.compaction.compact(repo, branch_name, deadline)

    # --- commits -------------------------------------------------------------------------

    def commit(
        self,
        repository: str,
        branch_name: str,
        message: str,
        metadata: dict[str, str] | None = None,
        committer: str = "",
        allow_empty: bool = False,
        prefixes: list[str] | None = None,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.Commit:
        """Commit the staged changes of a branch (only those under prefixes, if given)."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "commit")
        return self.committer.commit(
            repo, branch_name, message, dict(metadata or {}), committer, allow_empty, prefixes or [], deadline
        )

    # --- entries -------------------------------------------------------------------------

    def stage_entry(
        self,
        repository: str,
        branch_name: str,
        key: str,
        entry: pb.Entry,
        condition: Condition | None = None,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> None:
        """Stage entry at key; with a condition, only if it holds for the key's current value."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "writing an object")
        self.entries.stage(repo, branch_name, key, entry, deadline, condition)

    def delete_entry(self, repository: str, branch_name: str, key: str, *, deadline: Deadline = NO_DEADLINE) -> None:
        validate_key(key)
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "deleting an object")
        self.entries.delete(repo, branch_name, key, deadline)

    def delete_entries(
        self, repository: str, branch_name: str, keys: Sequence[str], *, deadline: Deadline = NO_DEADLINE
    ) -> list[DeleteOutcome]:
        """Delete each key from the branch's staging area, one outcome per key in order.

        The repository and the branch's protection are looked up once for all the keys. A key
        that is not there or is not a valid key has that outcome; anything else (a missing
        branch, a refused write, an unavailable store) fails the call, as for one delete.
        """
        if len(keys) > MAX_DELETE_KEYS:
            raise InvalidArgument(f"at most {MAX_DELETE_KEYS} keys per call, got {len(keys)}")
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "deleting an object")
        outcomes: list[DeleteOutcome] = []
        for key in keys:
            try:
                validate_key(key)
                self.entries.delete(repo, branch_name, key, deadline)
            except InvalidArgument as exc:
                outcomes.append(DeleteOutcome(key, "invalid", str(exc)))
            except NotFound as exc:
                if exc.what != "object":
                    raise
                outcomes.append(DeleteOutcome(key, "not_found", str(exc)))
            else:
                outcomes.append(DeleteOutcome(key, "deleted"))
        return outcomes

    def stat_entry(self, repository: str, ref: str, key: str, *, deadline: Deadline = NO_DEADLINE) -> pb.Entry:
        validate_key(key)
        return self.entries.stat(self._repo(repository, deadline), ref, key, deadline)

    def list_entries(
        self,
        repository: str,
        ref: str,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> ListPage:
        repo = self._repo(repository, deadline)
        return self.entries.list(repo, ref, prefix, delimiter, after, amount, deadline)

    def list_stored_entries(
        self,
        repository: str,
        ref: str,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> StoredListPage:
        """list_entries with each entry as stored (serialized), for callers that pass them on."""
        repo = self._repo(repository, deadline)
        return self.entries.list_stored(repo, ref, prefix, delimiter, after, amount, deadline)

    # --- comparing and combining ---------------------------------------------------------

    def diff(
        self,
        repository: str,
        left_ref: str,
        right_ref: str,
        three_dot: bool,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> Page[Difference]:
        repo = self._repo(repository, deadline)
        return self.branching.diff(repo, left_ref, right_ref, three_dot, prefix, delimiter, after, amount)

    def diff_branch(
        self,
        repository: str,
        branch_name: str,
        prefix: str,
        delimiter: str,
        after: str,
        amount: int,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> Page[Difference]:
        """The uncommitted changes of a branch: staged values against its head commit."""
        repo = self._repo(repository, deadline)
        return self.branching.diff_branch(repo, branch_name, prefix, delimiter, after, amount, deadline)

    def merge(
        self,
        repository: str,
        source_ref: str,
        destination: str,
        strategy: MergeStrategy = "fail",
        path_strategies: list[tuple[str, MergeStrategy]] | None = None,
        squash: bool = False,
        allow_empty: bool = False,
        message: str = "",
        metadata: dict[str, str] | None = None,
        committer: str = "",
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> MergeOutcome:
        repo = self._repo(repository, deadline)
        self.protection.check_direct_merge(repo, destination)
        return self.branching.merge(
            repo,
            source_ref,
            destination,
            strategy,
            path_strategies or [],
            squash,
            allow_empty,
            message,
            dict(metadata or {}),
            committer,
            deadline,
        )

    def revert(
        self,
        repository: str,
        branch_name: str,
        ref: str,
        parent_number: int = 0,
        message: str = "",
        metadata: dict[str, str] | None = None,
        committer: str = "",
        *,
        allow_empty: bool = False,
        deadline: Deadline = NO_DEADLINE,
    ) -> MergeOutcome:
        """Undo a commit's change on a branch: a three-way merge from the commit to its parent."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "revert")
        return self.branching.revert(
            repo, branch_name, ref, parent_number, message, dict(metadata or {}), committer, deadline, allow_empty
        )

    def cherry_pick(
        self,
        repository: str,
        branch_name: str,
        ref: str,
        parent_number: int = 0,
        committer: str = "",
        *,
        pick: CherryPickOverrides | None = None,
        deadline: Deadline = NO_DEADLINE,
    ) -> MergeOutcome:
        """Apply a commit's change onto a branch: a three-way merge from its parent to it."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "cherry-pick")
        return self.branching.cherry_pick(repo, branch_name, ref, parent_number, committer, deadline, pick)

    # --- branch protection ---------------------------------------------------------------

    def get_branch_protection(
        self, repository: str, *, deadline: Deadline = NO_DEADLINE
    ) -> tuple[pb.BranchProtectionRules, str]:
        """The rules and their etag."""
        return self.protection.get(self._repo(repository, deadline))

    def set_branch_protection(
        self,
        repository: str,
        rules: list[pb.BranchProtectionRule],
        if_match: str = "",
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> tuple[pb.BranchProtectionRules, str]:
        """Replace every rule (only if they still have etag if_match, when given)."""
        return self.protection.set(self._repo(repository, deadline), rules, if_match, deadline)

    # --- pull requests -------------------------------------------------------------------

    def create_pull_request(
        self,
        repository: str,
        title: str,
        description: str,
        source_branch: str,
        destination_branch: str,
        author: str,
        *,
        submitted_by: str = "",
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.PullRequest:
        repo = self._repo(repository, deadline)
        return self.pulls.create(repo, title, description, source_branch, destination_branch, author, submitted_by)

    def get_pull_request(
        self, repository: str, pull_id: str, *, deadline: Deadline = NO_DEADLINE
    ) -> tuple[pb.PullRequest, Standing]:
        """A pull request, and where it stands against its destination's protection."""
        repo = self._repo(repository, deadline)
        pull = self.pulls.get(repo, pull_id)
        return pull, self.pulls.standing(repo, pull, deadline)

    def pull_request_standings(
        self, repository: str, pulls: list[pb.PullRequest], *, deadline: Deadline = NO_DEADLINE
    ) -> list[Standing]:
        """Where each pull request stands against its destination's protection (one repository read)."""
        repo = self._repo(repository, deadline)
        return [self.pulls.standing(repo, pull, deadline) for pull in pulls]

    def list_pull_requests(
        self,
        repository: str,
        status: pb.PullRequestStatus.ValueType,
        after: str,
        amount: int,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> tuple[list[pb.PullRequest], bool, str]:
        """(page, has_more, next_after): continue from next_after (a filter examines a bounded
        number of records per call, so a page may be short yet have more)."""
        return self.pulls.list_page(self._repo(repository, deadline), status, after, amount, deadline)

    def update_pull_request(
        self,
        repository: str,
        pull_id: str,
        title: str | None = None,
        description: str | None = None,
        status: pb.PullRequestStatus.ValueType = pb.PULL_REQUEST_STATUS_UNSPECIFIED,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.PullRequest:
        repo = self._repo(repository, deadline)
        return self.pulls.update(repo, pull_id, title, description, status, deadline)

    def merge_pull_request(
        self,
        repository: str,
        pull_id: str,
        strategy: MergeStrategy = "fail",
        message: str = "",
        metadata: dict[str, str] | None = None,
        committer: str = "",
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> tuple[pb.PullRequest, MergeOutcome]:
        """Merge a pull request's source into its destination: refused (ProtectedBranch) while
        the destination's protection is not satisfied; conflicts leave it open."""
        repo = self._repo(repository, deadline)
        return self.pulls.merge(repo, pull_id, strategy, message, dict(metadata or {}), committer, deadline)

    def add_pull_request_comment(
        self,
        repository: str,
        pull_id: str,
        author: str,
        body: str,
        *,
        submitted_by: str = "",
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.PullRequestComment:
        return self.pulls.comment(self._repo(repository, deadline), pull_id, author, body, submitted_by)

    def list_pull_request_comments(
        self, repository: str, pull_id: str, after: str, amount: int, *, deadline: Deadline = NO_DEADLINE
    ) -> tuple[list[pb.PullRequestComment], bool]:
        return self.pulls.comments(self._repo(repository, deadline), pull_id, after, amount)

    def submit_pull_request_review(
        self,
        repository: str,
        pull_id: str,
        author: str,
        verdict: pb.ReviewVerdict.ValueType,
        body: str = "",
        *,
        submitted_by: str = "",
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.PullRequest:
        repo = self._repo(repository, deadline)
        return self.pulls.review(repo, pull_id, author, verdict, body, deadline, submitted_by)

    # --- garbage collection --------------------------------------------------------------

    def set_gc_rules(
        self,
        repository: str,
        rules: pb.GCRules,
        keep_last_access_rules: bool = False,
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> pb.GCRules:
        return self.retention.set_rules(self._repo(repository, deadline), rules, keep_last_access_rules)

    def get_gc_rules(self, repository: str, *, deadline: Deadline = NO_DEADLINE) -> pb.GCRules | None:
        return self.retention.get_rules(self._repo(repository, deadline))

    def delete_gc_rules(self, repository: str, *, deadline: Deadline = NO_DEADLINE) -> None:
        self.retention.delete_rules(self._repo(repository, deadline))

    def prepare_gc(self, repository: str, *, deadline: Deadline = NO_DEADLINE) -> PreparedRun:
        """Export what a GC run of the repository starts from (services/graveler/retention.py)."""
        return self.retention.prepare(self._repo(repository, deadline), deadline)

    def prepare_last_access(
        self, repository: str, branch: str, *, deadline: Deadline = NO_DEADLINE
    ) -> PreparedLastAccess:
        """Export what a last-access run of the branch reads (services/graveler/last_access.py)."""
        return self.last_access.prepare(self._repo(repository, deadline), branch, deadline)

    def expire_entries(
        self,
        repository: str,
        branch: str,
        rule: pb.LastAccessRule,
        batch: list[tuple[str, str]],
        run_id: str,
        requested_by: str = "",
        *,
        deadline: Deadline = NO_DEADLINE,
    ) -> Expiry:
        """Delete one batch of a last-access run's findings and commit it as the system user."""
        repo = self._repo(repository, deadline)
        return self.last_access.expire(repo, branch, rule, batch, run_id, requested_by, deadline)
