"""Recording the source's history in the target, commit by commit, parents first.

Each source commit is rebuilt on a hidden working branch: reset to the target commit of its
first parent, its changes against that parent staged (entries naming the source's objects where
they are: zero-copy), then committed as a recorded commit (graveler's CommitRequest.recorded:
the source's committer, message, metadata and date, and its further parents mapped). Branches
and tags are pointed at the mapped commits at the end, and each branch's uncommitted changes
are staged on it. Everything is idempotent or guarded by the ledger, so a rerun after a kill
goes on from where the last one stopped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from cli.lakefs_migration.history import parents_first
from cli.lakefs_migration.ledger import Ledger
from cli.lakefs_migration.source import Changes, LakeFSSource, SourceCommit, SourceObject
from silt.client_base import EXIT_FAILURE, EXIT_NOT_FOUND, ClientError
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import MAX_USER_METADATA_BYTES, user_metadata_problem, user_metadata_size, with_user_metadata

WORKING_BRANCH = "_silt-migrate-lakefs"
STAGE_BATCH = 256  # StageEntries' limit
DELETE_BATCH = 1000  # DeleteEntries' limit

_T = TypeVar("_T")


@dataclass
class Counts:
    commits: int = 0  # in the source's history
    recorded: int = 0  # recorded in the target by this run
    branches: int = 0
    tags: int = 0
    uncommitted: int = 0  # staged changes brought to the target's branches


class Progress(Protocol):
    """What the command shows while the history is recorded."""

    def start(self, commits: int, done: int) -> None: ...

    def advance(self, objects: int, size: int) -> None: ...


def _batches(items: list[_T], size: int) -> Iterator[list[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _entry(found: SourceObject) -> pb.Entry:
    """The entry naming the source's object. lakeFS's metadata is the user's: kept as Silt keeps
    user metadata (x-amz-meta-), bounded as every write's is, so it can never pose as what Silt
    keeps for itself (checksums, the pinned version of an outside object)."""
    problem = user_metadata_problem(found.metadata)
    if problem is None and user_metadata_size(found.metadata) > MAX_USER_METADATA_BYTES:
        problem = f"user metadata over {MAX_USER_METADATA_BYTES} bytes"
    if problem is not None:
        raise ClientError(f"source object {found.path!r}: {problem}", EXIT_FAILURE)
    return pb.Entry(
        physical_address=found.physical_address,
        size=found.size,
        etag=found.checksum,
        last_modified=Timestamp(seconds=found.mtime),
        content_type=found.content_type,
        metadata=with_user_metadata({}, found.metadata),
    )


class Replay:
    def __init__(self, source: LakeFSSource, graveler: Any, target: str, ledger: Ledger, progress: Progress) -> None:
        self.source = source
        self.graveler = graveler
        self.target = target
        self.ledger = ledger
        self.progress = progress
        self.counts = Counts()

    def run(self, storage_namespace: str) -> Counts:
        info = self.source.repository_info()
        branches, tags = self.source.branches(), self.source.tags()
        commits = self.source.history([*branches.values(), *tags.values()])
        self.counts.commits, self.counts.branches, self.counts.tags = len(commits), len(branches), len(tags)
        initial = self._target(storage_namespace, info.default_branch)
        order = parents_first(commits)
        if self.ledger.unsure is not None and self.ledger.unsure in commits:
            self._settle(commits[self.ledger.unsure], initial)
        self.progress.start(len(order), sum(1 for commit in order if commit.id in self.ledger.mapped))
        for commit in order:
            if commit.id not in self.ledger.mapped:
                self._record(commit, initial)
        self._point_refs(branches, tags)
        for branch in branches:
            self.counts.uncommitted += self._stage_changes(branch, self.source.uncommitted(branch))[0]
        done = api.DeleteBranchRequest(repository=self.target, name=WORKING_BRANCH)
        self._call("DeleteBranch", done, missing_ok=True)
        return self.counts

    # --- the target repository ---------------------------------------------------------

    def _target(self, storage_namespace: str, default_branch: str) -> str:
        """The target's initial commit (where the source's roots go), creating the repository
        on the first run; a target that exists without this ledger having made it is refused."""
        if self.ledger.created is not None:
            return self.ledger.created
        try:
            info = self.graveler.CreateRepository(
                api.CreateRepositoryRequest(
                    name=self.target, storage_namespace=storage_namespace, default_branch=default_branch
                )
            )
        except ClientError as exc:
            raise ClientError(
                f"target repository {self.target!r}: {exc} (a migration creates its target: name a new one)",
                exc.exit_code,
            ) from None
        head = self.graveler.GetBranch(api.GetBranchRequest(repository=info.name, name=default_branch))
        self.ledger.note_created(head.commit_id)
        return str(head.commit_id)

    def _call(self, method: str, request: Any, missing_ok: bool = False) -> Any:
        try:
            return getattr(self.graveler, method)(request)
        except ClientError as exc:
            if missing_ok and exc.exit_code == EXIT_NOT_FOUND:
                return None
            raise

    # --- commits -----------------------------------------------------------------------

    def _parents(self, commit: SourceCommit, initial: str) -> tuple[str, list[str]]:
        """(the target commit the working branch starts from, the further parents), mapped."""
        if not commit.parents:
            return initial, []
        return self.ledger.mapped[commit.parents[0]], [self.ledger.mapped[p] for p in commit.parents[1:]]

    def _record(self, commit: SourceCommit, initial: str) -> None:
        base, merged = self._parents(commit, initial)
        changes = self.source.changes(commit.parents[0] if commit.parents else None, commit.id)
        if not commit.parents and not changes.written:
            # A root with nothing in it (lakeFS's "Repository created"): the target's own initial commit.
            self.ledger.map(commit.id, initial)
            self.progress.advance(0, 0)
            return
        self._start_working_branch(base)
        objects, size = self._stage_changes(WORKING_BRANCH, changes)
        self.ledger.recording(commit.id)
        made = self.graveler.Commit(
            api.CommitRequest(
                repository=self.target,
                branch=WORKING_BRANCH,
                message=commit.message,
                metadata=commit.metadata,
                committer=commit.committer,
                allow_empty=True,
                recorded=api.RecordedCommit(
                    creation_date=Timestamp(seconds=commit.creation_date), merge_parents=merged
                ),
            )
        )
        self.ledger.map(commit.id, made.id, objects, size)
        self.counts.recorded += 1
        self.progress.advance(objects, size)

    def _settle(self, commit: SourceCommit, initial: str) -> None:
        """A commit whose recording was cut short: if the working branch's head is it (its
        parents, message, committer and date), that is its target commit; otherwise it was not
        recorded and is recorded again (the working branch is reset first: nothing of the cut
        attempt stays)."""
        if any(parent not in self.ledger.mapped for parent in commit.parents):
            return
        branch = self._call("GetBranch", api.GetBranchRequest(repository=self.target, name=WORKING_BRANCH), True)
        if branch is None:
            return
        head = self.graveler.GetCommit(api.GetCommitRequest(repository=self.target, commit_id=branch.commit_id))
        base, merged = self._parents(commit, initial)
        if (
            list(head.parents) == [base, *merged]
            and head.message == commit.message
            and head.committer == commit.committer
            and head.creation_date.seconds == commit.creation_date
        ):
            changes = self.source.changes(commit.parents[0] if commit.parents else None, commit.id)
            self.ledger.map(commit.id, head.id, len(changes.written), sum(o.size for o in changes.written))

    def _start_working_branch(self, base: str) -> None:
        """The working branch at base with nothing staged: created, or hard-reset (which drops
        whatever a cut attempt had staged)."""
        reset = api.ResetBranchRequest(repository=self.target, branch=WORKING_BRANCH, hard_ref=base)
        if self._call("ResetBranch", reset, missing_ok=True) is None:
            self.graveler.CreateBranch(
                api.CreateBranchRequest(repository=self.target, name=WORKING_BRANCH, source_ref=base, hidden=True)
            )

    def _stage_changes(self, branch: str, changes: Changes) -> tuple[int, int]:
        """Stage changes on a target branch: (objects written, their bytes)."""
        for batch in _batches(changes.written, STAGE_BATCH):
            answer = self.graveler.StageEntries(
                api.StageEntriesRequest(
                    repository=self.target,
                    branch=branch,
                    entries=[api.StagedEntry(key=found.path, entry=_entry(found)) for found in batch],
                )
            )
            _refused(answer.outcomes, api.StageEntryOutcome.RESULT_STAGED, "stage")
        for keys in _batches(changes.removed, DELETE_BATCH):
            request = api.DeleteEntriesRequest(repository=self.target, branch=branch, keys=keys)
            answer = self.graveler.DeleteEntries(request)
            _refused(
                answer.outcomes,
                (api.DeleteEntryOutcome.RESULT_DELETED, api.DeleteEntryOutcome.RESULT_NOT_FOUND),
                "delete",
            )
        return len(changes.written) + len(changes.removed), sum(found.size for found in changes.written)

    # --- refs ---------------------------------------------------------------------------

    def _point_refs(self, branches: Mapping[str, str], tags: Mapping[str, str]) -> None:
        mapped = self.ledger.mapped
        for name, head in sorted(branches.items()):
            if name == WORKING_BRANCH:
                continue
            reset = api.ResetBranchRequest(repository=self.target, branch=name, hard_ref=mapped[head])
            if self._call("ResetBranch", reset, missing_ok=True) is None:
                create = api.CreateBranchRequest(repository=self.target, name=name, source_ref=mapped[head])
                self.graveler.CreateBranch(create)
        for name, commit_id in sorted(tags.items()):
            existing = self._call("GetTag", api.GetTagRequest(repository=self.target, id=name), missing_ok=True)
            if existing is None:
                self.graveler.CreateTag(api.CreateTagRequest(repository=self.target, id=name, ref=mapped[commit_id]))
            elif existing.commit_id != mapped[commit_id]:
                raise ClientError(f"target tag {name!r} exists at another commit ({existing.commit_id})", EXIT_FAILURE)


def _refused(outcomes: Iterable[Any], fine: Any, what: str) -> None:
    allowed = fine if isinstance(fine, tuple) else (fine,)
    bad = [outcome for outcome in outcomes if outcome.result not in allowed]
    if bad:
        raise ClientError(f"target refused to {what} {bad[0].key!r}: {bad[0].message}", EXIT_FAILURE)
