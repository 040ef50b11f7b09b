"""Garbage-collection rules per repository, and the export a GC run starts from (jobs/gc).

Rules live in the repository's partition under ``gc/rules``. A commit is *retained* if it
is the HEAD of a branch, tagged, or reachable from a branch HEAD through parents that are
all younger than that branch's retention; every other commit is *expired*.

``Retention.prepare`` writes, under ``_silt/gc/<run id>/`` in the storage namespace:

* ``commits.parquet``: every commit of the repository with its metarange and ``expired``;
* ``metaranges.parquet``: the metarange ids of every commit and of every branch's compaction,
  ``expired`` when only expired commits name it;
* ``staged.parquet``: the physical address of every staged entry of every staging token,
  current and sealed, of every branch;
* with ``lakefs_formats``, ``commits.csv``: the commits again in lakeFS's format (gc_lakefs.py).

``prepare_uncommitted`` writes only the uncommitted addresses (staged, and those a compaction
folded out of staging into a branch's compacted metarange), in lakeFS's format, under
``_silt/gc/<run id>/uncommitted/``, for lakeFS's GC client, which asks for them apart.

An export is refused (FailedPrecondition) when another live repository's namespace overlaps
this one's, or it lies outside the allowed roots: the run would delete what is not this
repository's (engine/core/placement.py).

The staging export is taken *before* the Spark job lists the committed layer, so an entry
that leaves staging by a commit meanwhile is found in that commit's ranges (see jobs/gc).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import MetaRangeId, Record
from engine.core.deadline import Deadline
from engine.core.refs import RefManager, RepoHandle, branch_tokens
from engine.core.staging import StagingStore
from engine.core.values import decode_entry
from engine.features.gc_lakefs import (
    COMMITS_CSV,
    UNCOMMITTED_DIR,
    UNCOMMITTED_FILE,
    UNCOMMITTED_SCHEMA,
    namespace_relative,
    uncommitted_batch,
    write_commits_csv,
)
from engine.features.last_access_rules import validate_last_access_rules
from engine.features.lifecycle import Lifecycle
from silt.block.adapter import BlockAdapter
from silt.errors import Aborted, FailedPrecondition, InvalidArgument, NotFound, PredicateFailed
from silt.gc_runs import GC_PREFIX, new_run_id
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from silt.kv.conditional import delete_current, replace
from silt.kv.store import Predicate

RULES_KEY = b"gc/rules"
MAX_RETENTION_DAYS = 36_500
MAX_BRANCH_RULES = 1000
_BATCH_ROWS = 50_000
_SET_ATTEMPTS = 10

COMMITS_SCHEMA = pa.schema(
    [
        pa.field("commit_id", pa.string(), nullable=False),
        pa.field("metarange_id", pa.string(), nullable=False),
        pa.field("creation_seconds", pa.int64(), nullable=False),
        pa.field("expired", pa.bool_(), nullable=False),
    ]
)
METARANGES_SCHEMA = pa.schema(
    [pa.field("metarange_id", pa.string(), nullable=False), pa.field("expired", pa.bool_(), nullable=False)]
)
STAGED_SCHEMA = pa.schema(
    [
        pa.field("staging_token", pa.string(), nullable=False),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("physical_address", pa.string(), nullable=False),
    ]
)


# --- rules ------------------------------------------------------------------------------


def validate_rules(rules: pb.GCRules) -> pb.GCRules:
    if not 0 <= rules.default_retention_days <= MAX_RETENTION_DAYS:
        raise InvalidArgument(f"default retention must be 0..{MAX_RETENTION_DAYS} days")
    if len(rules.branch_retention_days) > MAX_BRANCH_RULES:
        raise InvalidArgument(f"at most {MAX_BRANCH_RULES} branch rules")
    for branch, days in rules.branch_retention_days.items():
        if not branch or len(branch) > 256:
            raise InvalidArgument(f"invalid branch name {branch!r} in retention rules")
        if not 0 <= days <= MAX_RETENTION_DAYS:
            raise InvalidArgument(f"retention of branch {branch!r} must be 0..{MAX_RETENTION_DAYS} days")
    validate_last_access_rules(rules.last_access_rules)
    return rules


# --- expiry -----------------------------------------------------------------------------


def _seconds(stamp: Timestamp) -> float:
    return stamp.seconds + stamp.nanos / 1e9


def expired_commits(
    commits: dict[str, pb.Commit],
    heads: dict[str, str],
    tagged: Iterable[str],
    rules: pb.GCRules,
    now_seconds: float,
) -> set[str]:
    """Ids of the commits that no rule retains (``heads``: branch name -> commit id)."""
    retained = {commit_id for commit_id in tagged if commit_id in commits}
    for branch, head in heads.items():
        if head not in commits:
            continue
        days = rules.branch_retention_days.get(branch, rules.default_retention_days)
        cutoff = now_seconds - days * 86_400
        retained.add(head)
        stack, seen = [head], {head}
        while stack:
            for parent in commits[stack.pop()].parents:
                commit = commits.get(parent)
                # Only through young commits (age < retention): an old one ends the walk on this path.
                if parent in seen or commit is None or _seconds(commit.creation_date) <= cutoff:
                    continue
                seen.add(parent)
                retained.add(parent)
                stack.append(parent)
    return set(commits) - retained


# --- export -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedRun:
    run_id: str
    namespace: str
    location: str
    commits_location: str
    metaranges_location: str
    staged_location: str
    started: Timestamp
    commits: int
    expired_commits: int
    staged_entries: int
    lakefs_commits_location: str = ""


@dataclass(frozen=True)
class PreparedUncommitted:
    run_id: str
    namespace: str
    location: str  # "" when nothing was staged: no file written, as lakeFS answers
    staged_entries: int


class Retention:
    """The rules of each repository (in its partition) and the export of a GC run."""

    def __init__(
        self,
        refs: RefManager,
        kv: Store,
        staging: StagingStore,
        adapter: BlockAdapter,
        lifecycle: Lifecycle,
        committed: CommittedManager,
    ) -> None:
        self._refs = refs
        self._committed = committed
        self._kv = kv
        self._staging = staging
        self._adapter = adapter
        self._lifecycle = lifecycle

    def set_rules(self, repo: RepoHandle, rules: pb.GCRules, keep_last_access_rules: bool = False) -> pb.GCRules:
        validate_rules(rules)
        if not keep_last_access_rules:
            # The key is also written by set_if (below), so never by a plain write.
            replace(self._kv, repo.partition, RULES_KEY, rules.SerializeToString(deterministic=True))
            return rules
        # Compare-and-set on the record read, so that a concurrent change of the last-access
        # rules is either kept or makes this write read again, never lost.
        for _ in range(_SET_ATTEMPTS):
            kept: Sequence[pb.LastAccessRule] = []
            predicate: Predicate | None = None
            try:
                stored, predicate = self._kv.get(repo.partition, RULES_KEY)
                kept = pb.GCRules.FromString(stored).last_access_rules
            except NotFound:
                pass
            except DecodeError:
                raise InvalidArgument("corrupt GC rules record") from None
            merged = pb.GCRules()
            merged.CopyFrom(rules)
            merged.ClearField("last_access_rules")
            merged.last_access_rules.extend(kept)
            try:
                self._kv.set_if(repo.partition, RULES_KEY, merged.SerializeToString(deterministic=True), predicate)
            except PredicateFailed:
                continue
            return merged
        raise Aborted(f"the GC rules of repository {repo.name!r} kept changing; try again")

    def get_rules(self, repo: RepoHandle) -> pb.GCRules | None:
        try:
            data = self._kv.get(repo.partition, RULES_KEY).value
        except NotFound:
            return None
        rules = pb.GCRules()
        try:
            rules.ParseFromString(data)
        except DecodeError:
            raise InvalidArgument("corrupt GC rules record") from None
        return rules

    def delete_rules(self, repo: RepoHandle) -> None:
        delete_current(self._kv, repo.partition, RULES_KEY)

    def prepare(self, repo: RepoHandle, deadline: Deadline, lakefs_formats: bool = False) -> PreparedRun:
        """Write the run's export; stops between batches once the caller no longer waits.
        lakefs_formats: also the commits in lakeFS's CSV (gc_lakefs.py)."""
        what = f"preparing GC of repository {repo.name!r}"
        started = Timestamp()
        started.GetCurrentTime()
        # Checked on every export, the sweep's re-check included: a repository put on this
        # namespace while a run marks still stops the run before it deletes anything.
        self._lifecycle.check_collectable(repo)
        rules = self.get_rules(repo)
        if rules is None:
            raise FailedPrecondition(
                f"repository {repo.name!r} has no GC rules: set them first with `silt gc rules set {repo.name}`"
            )
        run_id = new_run_id(started.ToDatetime(dt.UTC))
        location = f"{GC_PREFIX}{run_id}/"
        # Staging first: whatever leaves staging afterwards is in a metarange the job lists later.
        branches = list(self._refs.list_branches(repo))
        staged = self._write(repo, location + "staged.parquet", STAGED_SCHEMA, self._staged_batches(branches), deadline)
        deadline.check(what)
        commits = {commit.id: commit for commit in self._refs.list_commits(repo)}
        heads = {b.name: b.commit_id for b in branches}
        tagged = [t.commit_id for t in self._refs.list_tags(repo)]
        expired = expired_commits(commits, heads, tagged, rules, _seconds(started))
        self._write(repo, location + "commits.parquet", COMMITS_SCHEMA, _commit_batches(commits, expired), deadline)
        lakefs_commits = ""
        if lakefs_formats:
            lakefs_commits = location + COMMITS_CSV
            ordered = (commits[i] for i in sorted(commits))
            write_commits_csv(self._adapter, repo.namespace, lakefs_commits, ordered, expired, deadline, what)
        kept = {c.metarange_id for i, c in commits.items() if i not in expired} | {
            b.compacted_metarange_id for b in branches if b.compacted_metarange_id
        }
        metaranges = sorted(kept | {c.metarange_id for c in commits.values()} - {""})
        # A metarange is expired only if every commit (and compaction) that names it is.
        flags = [m not in kept for m in metaranges]
        batch = pa.record_batch(
            [pa.array(metaranges, pa.string()), pa.array(flags, pa.bool_())], schema=METARANGES_SCHEMA
        )
        self._write(repo, location + "metaranges.parquet", METARANGES_SCHEMA, iter([batch]), deadline)
        return PreparedRun(
            run_id=run_id,
            namespace=repo.namespace,
            location=location,
            commits_location=location + "commits.parquet",
            metaranges_location=location + "metaranges.parquet",
            staged_location=location + "staged.parquet",
            started=started,
            commits=len(commits),
            expired_commits=len(expired),
            staged_entries=staged,
            lakefs_commits_location=lakefs_commits,
        )

    def prepare_uncommitted(self, repo: RepoHandle, deadline: Deadline) -> PreparedUncommitted:
        """Write the uncommitted entries' addresses in lakeFS's format (gc_lakefs.py): staged, and
        compacted but not committed. Needs no GC rules, as lakeFS's does not: without rules its
        client keeps every commit."""
        started = Timestamp()
        started.GetCurrentTime()
        self._lifecycle.check_collectable(repo)
        run_id = new_run_id(started.ToDatetime(dt.UTC))
        location = f"{GC_PREFIX}{run_id}/{UNCOMMITTED_DIR}"
        batches = self._uncommitted_batches(repo, list(self._refs.list_branches(repo)))
        first = next(batches)
        if not first.num_rows:
            return PreparedUncommitted(run_id, repo.namespace, "", 0)
        rows = self._write(
            repo, location + UNCOMMITTED_FILE, UNCOMMITTED_SCHEMA, itertools.chain([first], batches), deadline
        )
        return PreparedUncommitted(run_id, repo.namespace, location, rows)

    def _staged(self, branches: list[pb.Branch]) -> Iterator[tuple[str, bytes, pb.Entry]]:
        """(staging token, key, entry) of every staged write (tombstones left out)."""
        for branch in branches:
            for token in branch_tokens(branch):
                if not token:
                    continue
                for item in self._staging.scan(token):
                    if not item.value.tombstone:
                        yield token, item.key, decode_entry(item.value.data)

    def _staged_batches(self, branches: list[pb.Branch]) -> Iterator[pa.RecordBatch]:
        tokens, keys, addresses = [], [], []
        for token, key, entry in self._staged(branches):
            tokens.append(token)
            keys.append(key)
            addresses.append(entry.physical_address)
            if len(tokens) >= _BATCH_ROWS:
                yield _staged_batch(tokens, keys, addresses)
                tokens, keys, addresses = [], [], []
        yield _staged_batch(tokens, keys, addresses)

    def _compacted_uncommitted(self, repo: RepoHandle, branches: list[pb.Branch]) -> Iterator[pb.Entry]:
        """Entries a branch's compaction holds that its HEAD commit does not: uncommitted writes
        folded out of staging (engine/core/compaction.py), uncommitted all the same."""
        for branch in branches:
            if not branch.compacted_metarange_id:
                continue
            compacted = MetaRangeId(branch.compacted_metarange_id)
            head = self._refs.get_commit(repo, branch.commit_id).metarange_id if branch.commit_id else ""
            if head:
                records: Iterator[Record | None] = (
                    d.right for d in self._committed.diff(repo.namespace, MetaRangeId(head), compacted)
                )
            else:
                records = iter(self._committed.iterate(repo.namespace, compacted))
            for record in records:
                if record is not None:  # None: removed by the compaction, nothing to keep
                    yield decode_entry(record.value)

    def _uncommitted_batches(self, repo: RepoHandle, branches: list[pb.Branch]) -> Iterator[pa.RecordBatch]:
        """lakeFS's uncommitted rows, the first batch holding at least one row unless there are none."""
        addresses: list[str] = []
        created: list[int] = []
        staged = (entry for _, _, entry in self._staged(branches))
        for entry in itertools.chain(staged, self._compacted_uncommitted(repo, branches)):
            relative = namespace_relative(entry.physical_address, repo.namespace)
            if relative is None:
                continue
            addresses.append(relative)
            created.append(entry.last_modified.seconds)
            if len(addresses) >= _BATCH_ROWS:
                yield uncommitted_batch(addresses, created)
                addresses, created = [], []
        yield uncommitted_batch(addresses, created)

    def _write(
        self,
        repo: RepoHandle,
        key: str,
        schema: pa.Schema,
        batches: Iterator[pa.RecordBatch],
        deadline: Deadline,
    ) -> int:
        """Write batches as one Parquet object through a temporary file; return the row count."""
        return write_parquet(
            self._adapter, repo.namespace, key, schema, batches, deadline, f"preparing GC of repository {repo.name!r}"
        )


def write_parquet(
    adapter: BlockAdapter,
    namespace: str,
    key: str,
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
    deadline: Deadline,
    what: str,
) -> int:
    """Write batches as one Parquet object through a temporary file; return the row count."""
    rows = 0
    with tempfile.NamedTemporaryFile(prefix="silt-export-", suffix=".parquet", delete=False) as handle:
        path = handle.name
    try:
        with pq.ParquetWriter(path, schema, compression="snappy") as writer:
            for batch in batches:
                deadline.check(what)
                if batch.num_rows:
                    writer.write_batch(batch)
                    rows += batch.num_rows
        with open(path, "rb") as stream:
            adapter.put(namespace, key, stream, os.path.getsize(path))
    finally:
        os.unlink(path)
    return rows


def _commit_batches(commits: dict[str, pb.Commit], expired: set[str]) -> Iterator[pa.RecordBatch]:
    ids = sorted(commits)
    for start in range(0, len(ids), _BATCH_ROWS):
        chunk = [commits[i] for i in ids[start : start + _BATCH_ROWS]]
        yield pa.record_batch(
            [
                pa.array([c.id for c in chunk], pa.string()),
                pa.array([c.metarange_id for c in chunk], pa.string()),
                pa.array([c.creation_date.seconds for c in chunk], pa.int64()),
                pa.array([c.id in expired for c in chunk], pa.bool_()),
            ],
            schema=COMMITS_SCHEMA,
        )


def _staged_batch(tokens: Sequence[str], keys: list[bytes], addresses: list[str]) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array(tokens, pa.string()), pa.array(keys, pa.binary()), pa.array(addresses, pa.string())],
        schema=STAGED_SCHEMA,
    )
