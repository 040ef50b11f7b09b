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
* PrepareTasks (gc_tasks.py): that export in the background, its status in KV;
* LastAccess (last_access.py): the export a last-access run reads, and the expiries it asks for;
* Cleaner (cleanup.py): background deletion of staged values nothing refers to;
* NeutralKeys (neutral_keys.py): each key's entry as first written through a ref-neutral address.

Graveler's own methods are the operations that span components or carry logic of their own
(a write checked against protection first, a branch or tag made from a resolved ref, a log);
an operation that only forwards to one component is called on that component (as the gRPC
handlers in servicer.py do), never through a copy here.

No lock anywhere (docs/design/lockfree-staging.md). Every public method takes the caller's
Deadline; the gRPC layer (server.py) passes the call's.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from engine.actions.checks import Checks
from engine.actions.manager import Actions, ActionsOptions
from engine.actions.reads import RepositoryReads
from engine.actions.runs import RunStore
from engine.core.branching import Branching, CherryPickOverrides, MergeOutcome
from engine.core.builder import InProcessBuilder, MetaRangeBuilder
from engine.core.cleanup import Cleaner
from engine.core.commit_graph import LogFilter, LogPage, log_page
from engine.core.commits import Committer, Recorded
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import MetaRangeId
from engine.core.compaction import CompactedState, Compaction, CompactionResult, NoObserver, StagingObserver
from engine.core.deadline import NO_DEADLINE, Clock, Deadline
from engine.core.entries import (
    MAX_DELETE_KEYS,
    MAX_STAGE_ENTRIES,
    Condition,
    DeleteOutcome,
    Entries,
    StageOutcome,
)
from engine.core.hooks import EventUser, HookRecord, after_commit
from engine.core.key_changes import KeyCheck
from engine.core.merge_resolutions import MergeResolution, Resolutions
from engine.core.model import MergeStrategy
from engine.core.parts import CoreParts
from engine.core.placement import Placement
from engine.core.refs import BranchRecord, RefManager, RepoHandle
from engine.core.refs import expr as refexpr
from engine.core.repo_metadata import RepositoryMetadata
from engine.core.staging import StagingStore, new_token
from engine.core.updater import BranchUpdater, RetryPolicy
from engine.core.validation import validate_key, validate_prefix, validate_ref_name
from engine.features.gc_tasks import PrepareTasks
from engine.features.imports.locations import STORE_SCHEMES, ImportRules
from engine.features.imports.manager import Imports
from engine.features.imports.runner import IngestRunner, InProcessRunner
from engine.features.last_access import LastAccess
from engine.features.lifecycle import DEFAULT_BRANCH, Lifecycle
from engine.features.neutral_keys import MAX_RECORD_ENTRIES, NeutralKeys
from engine.features.protection import COMMIT, Protection
from engine.features.pulls import PullRequests
from engine.features.refs_tasks import RefsTasks
from engine.features.retention import Retention
from silt.block.external import ExternalFiles
from silt.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import background_context
from silt.journal.store import raw_store
from silt.kv import Store
from silt.paging import page_size

_T = TypeVar("_T")

# Objects and prefixes one log may filter by: each commit of the walk is compared on all of them.
MAX_LOG_PATHS = 100
# Commits a log call keeps once read: a merge commit's parents, and then some.
_LOG_COMMITS_KEPT = 64

__all__ = ["DEFAULT_BRANCH", "Graveler", "GravelerOptions"]


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
    # Hooks (engine/actions/): their bounds, webhook targets and Lua limits.
    actions: ActionsOptions = field(default_factory=ActionsOptions)


def import_rules(scheme: str, allowed_import_prefixes: Sequence[str]) -> ImportRules:
    """What imports may read: the import prefixes of the blockstore's own kind (s3://, gs://,
    https:// for azure), and local:/// ones (the local blockstore's allowed_external_prefixes,
    silt/block/external.py) on the local blockstore."""
    own = STORE_SCHEMES.get(scheme, ())
    return ImportRules(
        scheme,
        tuple(p for p in allowed_import_prefixes if p.partition("://")[0].lower() in own),
        ExternalFiles([p for p in allowed_import_prefixes if p.startswith("local:///")]),
    )


class Graveler:
    def __init__(
        self,
        kv: Store,
        committed: CommittedManager,
        options: GravelerOptions | None = None,
        builder: MetaRangeBuilder | None = None,
        clock: Clock = time.monotonic,
        observer: StagingObserver | None = None,
        import_runner: IngestRunner | None = None,
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
        self.cleaner = Cleaner(
            builder, options.cleanup_workers, pending=raw_store(kv), repositories=self._repository_partitions
        )
        observer = observer or NoObserver()
        self.compacted = CompactedState(self.refs, self.staging, committed)
        core = CoreParts(self.refs, self.staging, committed, self.updater, self.compacted)
        self.entries = Entries(core, observer, options.allowed_import_prefixes)
        self.committer = Committer(
            self.refs, self.staging, builder, self.updater, self.cleaner, committed, self.compacted, observer
        )
        self.branching = Branching(core, self.entries, self.cleaner)
        self.protection = Protection(kv, self.updater, options.branch_cache_seconds, clock)
        self.repo_metadata = RepositoryMetadata(kv, self.updater)
        rules = import_rules(committed.adapter.scheme, options.allowed_import_prefixes)
        self.actions = Actions(
            RepositoryReads(self.refs, self.entries, self.branching, committed.adapter, rules.local),
            RunStore(kv),
            self._tag_from_hook,
            options.actions,
        )
        self.pulls = PullRequests(self.refs, self.updater, self.branching, self.protection, self.actions)
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
        self.retention = Retention(self.refs, kv, self.staging, committed.adapter, self.lifecycle, committed)
        self.gc_tasks = PrepareTasks(kv, self.retention)
        self.last_access = LastAccess(
            self.refs, kv, self.entries, self.retention, self.committer, self.protection, committed.adapter
        )
        self.checks = Checks(self.refs, self.actions, self.pulls)
        self.imports: Imports = Imports(
            core,
            self.cleaner,
            self.protection,
            self.repo_metadata,
            import_runner or InProcessRunner(kv, committed.adapter),
            rules,
            self.actions,
            self.checks,
        )
        self.refs_tasks = RefsTasks(kv, self.lifecycle)
        self.neutral = NeutralKeys(kv, committed.adapter)
        # Drops a graveler asked for and did not finish (it was killed): done in the background.
        self.cleaner.resume()

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
        self.actions.close()
        self.refs_tasks.close()
        self.gc_tasks.close()
        self.imports.close()
        self.cleaner.close()
        self.builder.close()

    def _repository_partitions(self, after: str) -> Iterator[tuple[str, bytes]]:
        """(name, partition) of the repositories named after `after`: where the cleaner looks
        for drop records."""
        for record in self.refs.list_repositories(after):
            yield record.name, RepoHandle(record).partition

    def _repo(self, name: str, deadline: Deadline) -> RepoHandle:
        deadline.check(f"call on repository {name!r}")
        return self.refs.repository(name)

    def _written_repo(self, name: str, repository_id: str, deadline: Deadline) -> RepoHandle:
        """The repository an edge wrote an entry's bytes for: `repository_id` is the identity it
        looked up with the storage namespace it wrote them in. A repository deleted and created
        again under its name since is another one, whose namespace does not hold those bytes:
        the write is refused as for a missing repository, and the caller may delete its bytes.
        An empty id (a client older than identities) is not checked."""
        repo = self._repo(name, deadline)
        if repository_id and repository_id != repo.record.unique_id:
            raise NotFound(
                f"repository {name!r} not found: it was deleted (and created again) since its namespace was looked up",
                what="repository",
            )
        return repo

    # --- branches ------------------------------------------------------------------------

    def create_branch(
        self,
        repository: str,
        name: str,
        source_ref: str,
        *,
        hidden: bool = False,
        deadline: Deadline = NO_DEADLINE,
        by: EventUser | None = None,
    ) -> pb.Branch:
        """by: who creates it (its hooks read as that user; engine/core/hooks.py), as for every
        operation that runs hooks."""
        repo = self._repo(repository, deadline)
        validate_ref_name(name)
        source_ref = source_ref or repo.record.default_branch
        source = self.refs.resolve(repo, source_ref)
        branch = pb.Branch(
            name=name, commit_id=source.commit_id, staging_token=new_token(repo.partition, name), hidden=hidden
        )
        # Hidden branches are Silt's own machinery (imports), not a user's operation.
        record = HookRecord(
            "pre-create-branch", repository, source_ref, branch_id=name, commit_id=source.commit_id, user=by
        )
        pre_run = "" if hidden else self.actions.pre(repo, record, deadline)
        self.refs.create_branch(repo, branch)
        if not hidden:
            self.actions.post(repo, replace(record, event_type="post-create-branch", pre_run_id=pre_run))
        return branch

    def delete_branch(
        self,
        repository: str,
        name: str,
        *,
        deadline: Deadline = NO_DEADLINE,
        check: KeyCheck | None = None,
        by: EventUser | None = None,
    ) -> None:
        """check: the keys the deletion removes, when the caller's policies name keys (deleting
        and creating a branch again is a hard reset)."""
        repo = self._repo(repository, deadline)
        if name == repo.record.default_branch:
            raise FailedPrecondition(f"branch {name!r} is the default branch of {repository!r} and cannot be deleted")
        self.protection.check_direct_write(repo, name, "deleting the branch")
        record = self.refs.get_branch(repo, name)
        if check is not None:
            self.branching.check_deletion(repo, record, check)
        hooks = HookRecord(
            "pre-delete-branch", repository, record.branch.commit_id, branch_id=name, immutable=True, user=by
        )
        pre_run = "" if record.branch.hidden else self.actions.pre(repo, hooks, deadline)
        deleted = self._delete_branch_record(repo, name, deadline)
        if deleted is not None:
            self.cleaner.drop_recorded(repo.partition, deleted.tokens)
        if not record.branch.hidden:
            self.actions.post(repo, replace(hooks, event_type="post-delete-branch", pre_run_id=pre_run))

    def _delete_branch_record(self, repo: RepoHandle, name: str, deadline: Deadline) -> BranchRecord | None:
        """Delete the branch record as read, its tokens' drop records in the same batch (a
        seal in between would leave a token unrecorded: read again and retried); the record
        deleted, or None if another deletion got there first (and recorded the tokens)."""

        def attempt(_: int) -> BranchRecord | None:
            try:
                current = self.refs.get_branch(repo, name)
            except NotFound:
                return None
            self.refs.delete_branch_if(repo, current)
            return current

        return self.updater.retry(attempt, f"deleting branch {name!r}", deadline)

    def reset_branch(
        self,
        repository: str,
        branch_name: str,
        *,
        key: str | None = None,
        prefix: str | None = None,
        hard_ref: str | None = None,
        deadline: Deadline = NO_DEADLINE,
        check: KeyCheck | None = None,
    ) -> pb.Branch:
        """Drop uncommitted changes: all of them, one key's, a prefix's; or move the branch to a ref.
        check: the keys it changes, when the caller's policies name keys (engine/core/key_changes.py)."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "reset")
        return self.branching.reset_branch(repo, branch_name, key, prefix, hard_ref, deadline, check)

    # --- tags ----------------------------------------------------------------------------

    def create_tag(
        self, repository: str, tag_id: str, ref: str, *, deadline: Deadline = NO_DEADLINE, by: EventUser | None = None
    ) -> pb.Tag:
        repo = self._repo(repository, deadline)
        validate_ref_name(tag_id, "tag")
        tag = pb.Tag(id=tag_id, commit_id=self.refs.resolve(repo, ref).commit_id)
        record = HookRecord(
            "pre-create-tag", repository, tag.commit_id, tag_id=tag_id, commit_id=tag.commit_id, immutable=True, user=by
        )
        pre_run = self.actions.pre(repo, record, deadline)
        self.refs.create_tag(repo, tag)
        self.actions.post(repo, replace(record, event_type="post-create-tag", pre_run_id=pre_run))
        return tag

    def _tag_from_hook(self, repo: RepoHandle, tag_id: str, ref: str, deadline: Deadline, by: EventUser | None) -> None:
        """A tag a Lua hook creates (lakefs.create_tag) passes the repository's pre-create-tag hooks
        as any other tag does (lakeFS runs them too), within the creating hook's deadline: a rule
        on tags cannot be got round by having a hook make the tag. A hook of that run creating a
        tag again nests one more run, each holding a run slot, so nesting ends at
        actions.max_runs_per_repository. Its post-create-tag hooks do not run: a post-create-tag
        hook that tags would otherwise feed itself an endless chain of background runs. Its hooks
        read as the creating hook's user (by)."""
        validate_ref_name(tag_id, "tag")
        tag = pb.Tag(id=tag_id, commit_id=self.refs.resolve(repo, ref).commit_id)
        record = HookRecord(
            "pre-create-tag", repo.name, tag.commit_id, tag_id=tag_id, commit_id=tag.commit_id, immutable=True, user=by
        )
        self.actions.pre(repo, record, deadline)
        self.refs.create_tag(repo, tag)

    def delete_tag(
        self, repository: str, tag_id: str, *, deadline: Deadline = NO_DEADLINE, by: EventUser | None = None
    ) -> None:
        repo = self._repo(repository, deadline)
        tag = self.refs.get_tag(repo, tag_id)
        record = HookRecord(
            "pre-delete-tag", repository, tag.commit_id, tag_id=tag_id, commit_id=tag.commit_id, immutable=True, user=by
        )
        pre_run = self.actions.pre(repo, record, deadline)
        self.refs.delete_tag(repo, tag_id)
        self.actions.post(repo, replace(record, event_type="post-delete-tag", pre_run_id=pre_run))

    # --- refs and history ----------------------------------------------------------------

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
        # Commits are immutable: the walk reads a commit's parent as it takes the commit, and the
        # path filter, comparing the commit with that parent next, reads it from here.
        get_commit = functools.lru_cache(maxsize=_LOG_COMMITS_KEPT)(lambda cid: self.refs.get_commit(repo, cid))
        if objects or prefixes:
            keys = [validate_key(k) for k in objects or []]
            under = [validate_prefix(p) for p in prefixes or []]
            filters.touches = lambda commit: self._touches(repo, commit, keys, under, get_commit)
        return log_page(get_commit, head, filters, after, size, limit, deadline)

    def _touches(
        self,
        repo: RepoHandle,
        commit: pb.Commit,
        keys: list[bytes],
        prefixes: list[bytes],
        get_commit: Callable[[str], pb.Commit],
    ) -> bool:
        """Whether commit changed any of keys or anything under prefixes, against its first parent."""
        if commit.parents:
            parent_metarange = MetaRangeId(get_commit(commit.parents[0]).metarange_id)
        else:
            parent_metarange = self.committed.write_metarange(repo.namespace, iter(()))
        return self.committed.changed_paths(
            repo.namespace, parent_metarange, MetaRangeId(commit.metarange_id), keys, prefixes
        )

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
        recorded: Recorded | None = None,
        by: EventUser | None = None,
    ) -> pb.Commit:
        """Commit the staged changes of a branch (only those under prefixes, if given).

        recorded: a commit made elsewhere, recorded with its date and parents; no hooks run for
        it, as none run for a restore: it is history already made, not a change being made."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, COMMIT)
        metadata = dict(metadata or {})
        if recorded is not None:
            return self.committer.commit(
                repo, branch_name, message, metadata, committer, allow_empty, prefixes or [], deadline, None, recorded
            )
        record = HookRecord(
            "pre-commit",
            repository,
            branch_name,
            branch_id=branch_name,
            commit_message=message,
            committer=committer,
            commit_metadata=metadata,
            user=by,
        )
        pre_runs: list[str] = []

        def hooks(sealed: BranchRecord) -> None:
            # After the staging token is sealed: what the hooks passed is what is committed; a
            # write that lands while they run goes to the new token, for the next commit.
            pre_runs.append(self.actions.pre(repo, record, deadline, at=sealed))

        commit = self.committer.commit(
            repo, branch_name, message, metadata, committer, allow_empty, prefixes or [], deadline, after_seal=hooks
        )
        pre_run = pre_runs[0] if pre_runs else ""
        self._after(repo, record, pre_run, commit, deadline)
        return commit

    def _after(self, repo: RepoHandle, record: HookRecord, pre_run: str, commit: pb.Commit, deadline: Deadline) -> None:
        """What follows an operation that made a commit on a branch: its hooks (after_commit),
        and the checks of pull requests from the branch re-run."""
        after_commit(self.actions, repo, record, pre_run, commit)
        self.checks.pushed(repo, record.branch_id)

    # --- entries -------------------------------------------------------------------------

    def stage_entry(
        self,
        repository: str,
        branch_name: str,
        key: str,
        entry: pb.Entry,
        condition: Condition | None = None,
        *,
        repository_id: str = "",
        deadline: Deadline = NO_DEADLINE,
        neutral: bool = False,
    ) -> None:
        """Stage entry at key; with a condition, only if it holds for the key's current value.
        repository_id: the identity the caller wrote the entry's bytes under (see `_written_repo`).
        neutral: record key -> entry in the ref-neutral index first (create-only), and stage the
        entry recorded (engine/features/neutral_keys.py)."""
        repo = self._written_repo(repository, repository_id, deadline)
        self.protection.check_direct_write(repo, branch_name, "writing an object")
        if not neutral:
            self.entries.stage(repo, branch_name, key, entry, deadline, condition)
            return
        # What would refuse the staging is checked before anything is recorded: a refused write's
        # bytes are deleted by its edge, and a record must not name them.
        validate_key(key)
        self.refs.get_branch(repo, branch_name)
        deadline.check(f"recording {key!r}")
        recorded = self.neutral.record(repo, branch_name, key, entry)
        try:
            self.entries.stage(repo, branch_name, key, recorded.entry, deadline, condition)
        except (NotFound, FailedPrecondition, InvalidArgument) as exc:
            if not recorded.created:
                raise
            # Refused after the record was made (the branch went meanwhile): answered as an
            # outcome the edge may not act on, so it keeps the bytes the record names (garbage
            # collection removes them if nothing stages them).
            raise Unavailable(f"{key!r} was recorded but not staged ({exc}); retry") from exc

    def record_neutral_entries(
        self,
        repository: str,
        branch_name: str,
        entries: Sequence[tuple[str, pb.Entry]],
        *,
        repository_id: str = "",
        deadline: Deadline = NO_DEADLINE,
    ) -> None:
        """Record each (key, entry) in the ref-neutral index, in order, without staging it (a
        merge stages them); ConditionFailed naming the first key recorded with other content."""
        if len(entries) > MAX_RECORD_ENTRIES:
            raise InvalidArgument(f"at most {MAX_RECORD_ENTRIES} entries per call, got {len(entries)}")
        repo = self._written_repo(repository, repository_id, deadline)
        for key, entry in entries:
            deadline.check(f"recording {key!r}")
            self.neutral.record(repo, branch_name, key, entry)

    def stage_entries(
        self,
        repository: str,
        branch_name: str,
        entries: Sequence[tuple[str, pb.Entry]],
        *,
        repository_id: str = "",
        deadline: Deadline = NO_DEADLINE,
        entry_deadlines: Sequence[Deadline] | None = None,
    ) -> list[StageOutcome]:
        """Stage each (key, entry) unconditionally, one outcome per entry in order.

        The repository and the branch's protection are looked up once for all the entries. An
        entry that is not valid has that outcome, and one whose own deadline (entry_deadlines,
        in order; the call's by default) passed before it was written is "expired"; anything
        else (a missing branch, a refused write, an unavailable store) fails the call, as for
        one stage_entry.
        """
        if len(entries) > MAX_STAGE_ENTRIES:
            raise InvalidArgument(f"at most {MAX_STAGE_ENTRIES} entries per call, got {len(entries)}")
        repo = self._written_repo(repository, repository_id, deadline)
        self.protection.check_direct_write(repo, branch_name, "writing an object")
        return self.entries.stage_many(repo, branch_name, entries, deadline, entry_deadlines)

    def stage_entries_if(
        self,
        repository: str,
        branch_name: str,
        writes: Sequence[tuple[str, pb.Entry, Condition]],
        *,
        repository_id: str = "",
        deadline: Deadline = NO_DEADLINE,
    ) -> None:
        """Stage every (key, entry) only if every condition holds, as one compare-and-set:
        all of them or none (ConditionFailed naming the first key whose condition failed)."""
        repo = self._written_repo(repository, repository_id, deadline)
        self.protection.check_direct_write(repo, branch_name, "writing an object")
        self.entries.stage_if_many(repo, branch_name, writes, deadline)

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

    # --- comparing and combining ---------------------------------------------------------

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
        check: KeyCheck | None = None,
        by: EventUser | None = None,
        resolutions: Sequence[MergeResolution] = (),
    ) -> MergeOutcome:
        repo = self._repo(repository, deadline)
        resolved = Resolutions(resolutions, repo.namespace, self.options.allowed_import_prefixes)
        self.protection.check_direct_merge(repo, destination)
        source_commit = self.refs.resolve(repo, source_ref).commit_id
        message = message or f"Merge {source_ref!r} into {destination!r}"
        record = HookRecord.pre_merge(
            repository, source_commit, destination, source_ref, message, committer, metadata, by
        )
        # The commit the hooks were shown, not the ref: a push to the source meanwhile is not merged.
        return self._hooked_merge(
            repo,
            record,
            deadline,
            lambda: self.branching.merge(
                repo,
                source_commit,
                destination,
                strategy,
                path_strategies or [],
                squash,
                allow_empty,
                message,
                dict(metadata or {}),
                committer,
                deadline,
                check,
                resolved,
            ),
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
        check: KeyCheck | None = None,
        by: EventUser | None = None,
    ) -> MergeOutcome:
        """Undo a commit's change on a branch: a three-way merge from the commit to its parent."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "revert")
        record = HookRecord(
            "pre-revert",
            repository,
            branch_name,
            branch_id=branch_name,
            commit_message=message,
            committer=committer,
            commit_metadata=dict(metadata or {}),
            user=by,
        )
        return self._hooked_merge(
            repo,
            record,
            deadline,
            lambda: self.branching.revert(
                repo,
                branch_name,
                ref,
                parent_number,
                message,
                dict(metadata or {}),
                committer,
                deadline,
                allow_empty,
                check,
            ),
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
        check: KeyCheck | None = None,
        by: EventUser | None = None,
    ) -> MergeOutcome:
        """Apply a commit's change onto a branch: a three-way merge from its parent to it."""
        repo = self._repo(repository, deadline)
        self.protection.check_direct_write(repo, branch_name, "cherry-pick")
        record = HookRecord(
            "pre-cherry-pick", repository, branch_name, branch_id=branch_name, committer=committer, user=by
        )
        return self._hooked_merge(
            repo,
            record,
            deadline,
            lambda: self.branching.cherry_pick(repo, branch_name, ref, parent_number, committer, deadline, pick, check),
        )

    def _hooked_merge(
        self, repo: RepoHandle, record: HookRecord, deadline: Deadline, run: Callable[[], MergeOutcome]
    ) -> MergeOutcome:
        """A merge, revert or cherry-pick between its hooks: the pre-hooks of `record` first, then
        `run`; the post-hooks only when it made a commit."""
        pre_run = self.actions.pre(repo, record, deadline)
        outcome = run()
        if outcome.commit is not None:
            self._after(repo, record, pre_run, outcome.commit, deadline)
        return outcome
