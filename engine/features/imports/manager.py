"""Imports: starting one, its status, canceling it, and the commit that ends it.

An import (lakeFS's importStart) is checked and recorded synchronously, then runs in the
background in two steps:

1. ingest (ingest.py, in a worker process or a thread, runner.py): the sources' listings become
   one metarange in the repository's namespace. This is the long part; progress and cancels go
   through the import's record.
2. commit, here: the branch's head with the import's region replaced by that metarange
   (committed/replace.py: whole ranges reused, so a few range reads), as one commit with the
   caller's message and metadata, the branch moved with set_if like a merge.

Uncommitted changes stay uncommitted, on top of the new head, as lakeFS leaves them: the
staging token is closed and sealed on top of the new head, a fresh one taking its place
(engine/core/head_moves.py: no conditional write judged on the old head lands on top of the
new one), and a compaction's changes are applied onto the new head. Sealed tokens holding
changes (uncommitted changes sealed by an earlier import or merge, or a commit in flight, which
then builds on the import's head) stay on top too; those holding only copies of what the head
shows (a partial commit's) go. While a copy lies inside the import's region, where it would
hide the imported value, the import waits for the partial commit's clean-up.

A graveler thread owns each running import: it keeps the record's update_time fresh (a record
that stops beating for STALE_SECONDS reads as interrupted: the process owning it stopped), waits
for the ingestion and makes the commit.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from engine.core.builder import staged_changes
from engine.core.cleanup import Cleaner
from engine.core.committed.model import Change, MetaRangeId
from engine.core.committed.replace import Region
from engine.core.deadline import Deadline
from engine.core.head_moves import HeadMove
from engine.core.hooks import BranchWatch, EventUser, HookRecord, Hooks, after_commit
from engine.core.key_changes import KeyCheck, applied
from engine.core.model import CommitId, StagingToken
from engine.core.parts import CoreParts, OnCore
from engine.core.refs import BranchRecord, RepoHandle, new_commit
from engine.core.repo_metadata import RepositoryMetadata
from engine.core.updater import Raced, modify_branch
from engine.features.imports.ingest import IngestJob, IngestResult
from engine.features.imports.locations import ImportRules, Kind, check_sources
from engine.features.imports.records import (
    CANCELED,
    ImportCanceled,
    ImportRecords,
    is_open,
    new_import_id,
    stamp,
)
from engine.features.imports.runner import IngestRunner
from engine.features.protection import Protection
from silt.errors import Aborted, AlreadyExists, InvalidArgument, NotFound, SiltError
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import SYSTEM_CLIENT, journal_context

log = logging.getLogger(__name__)

DEFAULT_MESSAGE = "Import objects"
# lakeFS's repository metadata key for when the last import committed (Unix seconds).
LAST_IMPORT_KEY = ".lakefs.last.import.timestamp"
BEAT_SECONDS = 1.0
STALE_SECONDS = 30.0
# How long the commit waits for a commit in flight on the branch (its sealed tokens) to finish.
COMMIT_WAIT_SECONDS = 120.0
MAX_MESSAGE_BYTES = 64 * 1024
MAX_METADATA_BYTES = 64 * 1024


@dataclass(frozen=True)
class ImportStatus:
    record: pb.ImportRecord
    commit: pb.Commit | None


@dataclass(frozen=True)
class _Plan:
    """What the commit step needs, fixed when the import starts."""

    repository: str
    partition: bytes
    branch: str
    region: Region
    message: str
    metadata: dict[str, str]
    committer: str
    # The keys the commit changes, when the caller's policies name keys (engine/core/key_changes.py).
    check: KeyCheck | None = None
    # Who started it: the commit's hooks read as that user (engine/core/hooks.py).
    user: EventUser | None = None


class Imports(OnCore):
    def __init__(
        self,
        core: CoreParts,
        cleaner: Cleaner,
        protection: Protection,
        repo_metadata: RepositoryMetadata,
        runner: IngestRunner,
        rules: ImportRules,
        hooks: Hooks,
        watch: BranchWatch,
    ) -> None:
        super().__init__(core)
        self._core = core
        self._cleaner = cleaner
        self._protection = protection
        self._repo_metadata = repo_metadata
        self.runner = runner
        self.rules = rules
        # An import's commit runs the branch's commit hooks, as lakeFS runs them, and re-runs the
        # checks of pull requests from the branch, as any commit does.
        self._hooks = hooks
        self._watch = watch
        self.records = ImportRecords(core.refs.kv)
        self._owners = ThreadPoolExecutor(max_workers=8, thread_name_prefix="import-owner")
        self._active: dict[tuple[bytes, str], None] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._beater: threading.Thread | None = None
        # Told (repository, branch, commit) of each import's commit; the servicer records its history event.
        self.on_commit: Callable[[str, str, pb.Commit], None] | None = None

    # --- the calls --------------------------------------------------------------------------

    def start(
        self,
        repository: str,
        branch: str,
        locations: Sequence[tuple[Kind, str, str]],
        message: str,
        metadata: dict[str, str],
        committer: str,
        deadline: Deadline,
        check: KeyCheck | None = None,
        by: EventUser | None = None,
    ) -> str:
        """Check and record an import, start it in the background; its id.

        check: the keys the import changes, when the caller's policies name keys. An object's
        destination, and a prefix's where no key may be written, are refused here, before
        anything starts; every change (keys replaced under a prefix included) is checked when
        the import commits, and a refusal then fails the import, nothing committed."""
        repo = self._refs.repository(repository, deadline)
        self._refs.get_branch(repo, branch)
        self._protection.check_direct_write(repo, branch, "import")
        if len(message.encode()) > MAX_MESSAGE_BYTES:
            raise InvalidArgument(f"commit message is longer than {MAX_MESSAGE_BYTES} bytes")
        if sum(len(k.encode()) + len(v.encode()) for k, v in metadata.items()) > MAX_METADATA_BYTES:
            raise InvalidArgument(f"commit metadata is larger than {MAX_METADATA_BYTES} bytes")
        sources, region = check_sources(locations, self.rules, repo.namespace)
        if check is not None:
            check.check_keys(sorted(key.decode() for key in region.keys), "the import")
            check.check_prefixes([prefix.decode() for prefix in region.prefixes], "the import")
        now = stamp()
        record = pb.ImportRecord(id=new_import_id(), branch=branch, created=now, update_time=now)
        self.records.create(repo.partition, record)
        plan = _Plan(
            repository,
            repo.partition,
            branch,
            region,
            message or DEFAULT_MESSAGE,
            dict(metadata),
            committer,
            check,
            by,
        )
        job = IngestJob(
            record.id,
            repo.partition,
            repo.namespace,
            tuple(sources),
            tuple("local://" + root for root in self.rules.local.roots),
            self._committed.policy,
        )
        with self._lock:
            self._active[(repo.partition, record.id)] = None
            if self._beater is None:
                self._beater = threading.Thread(target=self._beat, name="import-heartbeat", daemon=True)
                self._beater.start()
        if sources:
            self._owners.submit(self._own, plan, job)
        else:
            self._own(plan, job)  # nothing to ingest: the (empty) commit is made at once
        return record.id

    def status(self, repository: str, branch: str, import_id: str, deadline: Deadline) -> ImportStatus:
        repo = self._refs.repository(repository, deadline)
        record = self._record(repo, branch, import_id)
        if is_open(record) and time.time() - record.update_time.ToNanoseconds() / 1e9 > STALE_SECONDS:
            record.error = (
                f"the import stopped: nothing was heard of it for over {STALE_SECONDS:.0f} s (the graveler running "
                "it stopped or restarted); nothing was committed, start it again"
            )
        commit = self._refs.get_commit(repo, record.commit_id) if record.commit_id else None
        return ImportStatus(record, commit)

    def cancel(self, repository: str, branch: str, import_id: str, deadline: Deadline) -> None:
        """Cancel a running import (again: nothing to do); AlreadyExists (409) once it completed."""
        repo = self._refs.repository(repository, deadline)
        self._record(repo, branch, import_id)

        def mark(record: pb.ImportRecord) -> bool:
            if record.completed:
                raise AlreadyExists(f"import {import_id!r} has completed: there is nothing to cancel")
            if record.canceled:
                return False
            record.canceled = True
            record.error = CANCELED
            return True

        self.records.change(repo.partition, import_id, mark)

    def close(self) -> None:
        self._closing.set()
        self.runner.close()
        self._owners.shutdown(wait=True, cancel_futures=True)
        if self._beater is not None:
            self._beater.join()

    def _record(self, repo: RepoHandle, branch: str, import_id: str) -> pb.ImportRecord:
        record = self.records.get(repo.partition, import_id)
        if record.branch != branch:
            raise NotFound(f"import {import_id!r} not found on branch {branch!r}")
        return record

    # --- in the background ------------------------------------------------------------------

    def _beat(self) -> None:
        while not self._closing.wait(BEAT_SECONDS):
            with self._lock:
                active = list(self._active)
            for partition, import_id in active:
                try:
                    alive = self.records.beat(partition, import_id)
                except SiltError:
                    continue  # the next beat tries again; a record gone with its repository stays gone
                if not alive:
                    with self._lock:
                        self._active.pop((partition, import_id), None)

    def _own(self, plan: _Plan, job: IngestJob) -> None:
        try:
            if job.sources:
                result = self.runner.submit(job).result()
            else:
                result = IngestResult(self._committed.write_metarange(job.namespace, iter(())), 0)
            self._finish(plan, job.import_id, result)
        except ImportCanceled:
            pass
        except Exception as exc:
            if self._closing.is_set():
                return  # stopped with this process: the record, no longer beating, says so
            if not isinstance(exc, SiltError):
                log.exception("import %s of repository %r failed", job.import_id, plan.repository)
            self._fail(plan, job.import_id, str(exc) or type(exc).__name__)
        finally:
            with self._lock:
                self._active.pop((plan.partition, job.import_id), None)

    def _fail(self, plan: _Plan, import_id: str, error: str) -> None:
        def failed(record: pb.ImportRecord) -> bool:
            if not is_open(record):
                return False
            record.error = f"import failed: {error}"
            return True

        with contextlib.suppress(SiltError):
            self.records.change(plan.partition, import_id, failed)

    def _finish(self, plan: _Plan, import_id: str, result: IngestResult) -> None:
        with journal_context("import", plan.committer or SYSTEM_CLIENT, plan.repository):
            commit = self._commit(plan, import_id, result.metarange_id)

        def completed(record: pb.ImportRecord) -> bool:
            # Also over a cancel that came after the commit was decided: the commit is made.
            record.completed = True
            record.canceled = False
            record.error = ""
            record.ingested_objects = result.ingested
            record.commit_id = commit.id
            record.metarange_id = commit.metarange_id
            return True

        self.records.change(plan.partition, import_id, completed)
        if self.on_commit is not None:
            with contextlib.suppress(Exception):  # an event is droppable; the commit stands
                self.on_commit(plan.repository, plan.branch, commit)
        with contextlib.suppress(SiltError):
            seconds = str(commit.creation_date.seconds)
            self._repo_metadata.update(plan.repository, {LAST_IMPORT_KEY: seconds}, [], Deadline.after(30))

    def _commit(self, plan: _Plan, import_id: str, source: MetaRangeId) -> pb.Commit:
        repo = self._refs.get_repository(plan.repository)
        if repo.partition != plan.partition:
            raise NotFound(f"repository {plan.repository!r} was deleted while the import ran")
        self._protection.check_direct_write(repo, plan.branch, "import")
        hooked = HookRecord(
            "pre-commit",
            repo.name,
            plan.branch,
            branch_id=plan.branch,
            commit_message=plan.message,
            committer=plan.committer,
            commit_metadata=dict(plan.metadata),
            user=plan.user,
        )
        pre_run = self._hooks.pre(repo, hooked)
        what = f"import onto branch {plan.branch!r}"
        dropped: list[StagingToken] = []
        move = HeadMove(self._core, self._cleaner, repo, plan.branch)
        moved_over: list[BranchRecord] = []

        def attempt(_: int) -> pb.Commit:
            if self.records.get(plan.partition, import_id).canceled:
                raise ImportCanceled
            current = self._refs.get_branch(repo, plan.branch)
            head = self._refs.get_commit(repo, current.branch.commit_id)
            kept = self._kept_sealed(repo, current, MetaRangeId(head.metarange_id), plan.region)
            metarange = self._committed.replace(repo.namespace, MetaRangeId(head.metarange_id), source, plan.region)
            if plan.check is not None and metarange != head.metarange_id:
                changes = self._committed.diff_grouped(repo.namespace, MetaRangeId(head.metarange_id), metarange)
                plan.check.check(applied(changes), "the import")
            compacted = self._rebased_compaction(repo, current, MetaRangeId(head.metarange_id), metarange)
            commit = new_commit(
                plan.message, dict(plan.metadata), plan.committer, metarange, [CommitId(head.id)], head.generation + 1
            )
            self._refs.put_commit(repo, commit)

            def point(branch: pb.Branch) -> None:
                branch.commit_id = commit.id
                branch.compacted_metarange_id = compacted
                # The uncommitted changes stay on top of the new head: the staging token sealed
                # over the sealed tokens holding changes (checked above), a fresh one in its
                # place; sealed tokens holding nothing go.
                move.seal_on_top(branch, kept)

            moved_to = self._updater.moved_to(repo, commit)
            updated = modify_branch(current, point)
            move.close_staging(current)
            self._updater.set_if(repo, current, updated, what, moved_to)
            dropped[:] = [token for token in current.sealed_tokens if token not in kept]
            moved_over[:] = [current]
            return commit

        waited_until = time.monotonic() + COMMIT_WAIT_SECONDS
        try:
            while True:
                try:
                    commit = self._updater.retry(attempt, what, Deadline.after(COMMIT_WAIT_SECONDS))
                    break
                except Aborted:
                    if time.monotonic() > waited_until or self._closing.is_set():
                        raise
                    time.sleep(0.5)  # a commit in flight on the branch: let it finish
        except BaseException:
            move.release()
            raise
        self._cleaner.drop_recorded(repo.partition, dropped)  # recorded with the move (updater.set_branch_if)
        move.settle(moved_over[0])
        after_commit(self._hooks, repo, hooked, pre_run, commit)
        self._watch.pushed(repo, plan.branch)
        return commit

    def _kept_sealed(self, repo: RepoHandle, current: BranchRecord, head: MetaRangeId, region: Region) -> list[str]:
        """The sealed tokens the move keeps on top of the new head: none when they only hold
        what their view below already shows (copies a partial commit left: they go), all of
        them when they hold changes (uncommitted changes a merge or an earlier import sealed on
        top of its head, or a commit in flight, which then builds on the import's head from its
        tokens still sealed). Raced (the import waits) while a staged key inside the import's
        region shows nothing against the view below: a copy there would hide the import's value.
        """
        sealed = current.sealed_tokens
        if not sealed:
            return []
        for token in sealed:
            # The import drops them or keeps them on top: every conditional write admitted into
            # one must show in the checks below (StagingStore.close).
            self._staging.close(token)
        below = MetaRangeId(current.branch.compacted_metarange_id) if current.branch.compacted_metarange_id else head
        if next(iter(self._committed.diff_changes(repo.namespace, below, staged_changes(self._staging, sealed))), None):
            if any(self._shows_nothing(repo.namespace, below, change) for change in self._staged_in(sealed, region)):
                raise Raced
            return list(sealed)
        return []

    def _staged_in(self, tokens: Sequence[str], region: Region) -> Iterator[Change]:
        """The changes tokens hold inside region."""
        staged = [StagingToken(token) for token in tokens]
        for prefix in region.prefixes:
            for change in staged_changes(self._staging, staged, prefix):
                if not change.key.startswith(prefix):
                    break
                yield change
        for key in sorted(region.keys):
            found = next(iter(staged_changes(self._staging, staged, key)), None)
            if found is not None and found.key == key:
                yield found

    def _shows_nothing(self, namespace: str, below: MetaRangeId, change: Change) -> bool:
        """Whether change leaves below as it is at its key (the same record, or a delete of a key it lacks)."""
        record = self._committed.get(namespace, below, change.key)
        if change.record is None:
            return record is None
        return record is not None and record.identity == change.record.identity

    def _rebased_compaction(
        self, repo: RepoHandle, current: BranchRecord, head: MetaRangeId, new_head: MetaRangeId
    ) -> str:
        """The branch's compacted changes (if any) applied onto the import's head instead."""
        if not current.branch.compacted_metarange_id:
            return ""
        changes = self._state.pending(repo, current.branch, [], head)
        rebased = self._committed.apply(repo.namespace, new_head, changes).metarange_id
        return "" if rebased == new_head else rebased
