"""Retention by last access: the export a last-access run reads, and the expiry it asks for
(docs/design/gc.md, "Retention by last access"; the job is jobs/retention).

``LastAccess.prepare`` writes, under ``_silt/retention/<run id>/`` in the storage namespace:

* ``listing.parquet``: every entry of the branch under one of its rules' prefixes, with its
  physical address, size and modification time (microseconds; -1 when the entry has none);
* ``events.parquet``: the path and time of every read and write history event of the branch
  young enough to matter to its longest rule.

``LastAccess.expire`` deletes one batch of what the job found and commits it as the system
user. Each delete is conditional (engine/core/entries.py ``Condition``): the key must
still name the address the job judged and be older than the rule by its modification time,
and a read or write event since the export spares it. A batch's commit covers only its keys
(passed as commit prefixes), not the rest of what users staged on the branch; a user's staged
change to a longer key that starts with an expired one does go into that commit.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.commits import Committer
from engine.core.deadline import Deadline
from engine.core.entries import Condition, Entries
from engine.core.refs import RefManager, RepoHandle
from engine.features.last_access_rules import covering_prefixes, describe, rules_of_branch
from engine.features.lifecycle import RUNS_PREFIX
from engine.features.protection import Protection
from engine.features.retention import Retention, write_parquet
from silt.block.adapter import BlockAdapter
from silt.errors import FailedPrecondition, InvalidArgument, NotFound
from silt.gc_runs import RETENTION_PREFIX, new_run_id, validate_run_id
from silt.graveler.v1 import events_pb2
from silt.graveler.v1 import model_pb2 as pb
from silt.history_events.reader import scan_partition_events
from silt.journal.store import raw_store
from silt.kv import Store

# Commits of expiries are by this user: no real user id can contain ':' (services/auth/keys.py).
SYSTEM_COMMITTER = "silt:system"
MAX_EXPIRE_BATCH = 1000
RUN_METADATA_KEY = "silt.last_access.run"
REQUESTED_BY_METADATA_KEY = "silt.last_access.requested_by"
_BATCH_ROWS = 50_000
_LIST_PAGE = 1000
_ACCESS_EVENTS = (events_pb2.READ, events_pb2.WRITE)
_MICROS_PER_DAY = 86_400 * 1_000_000
# Each prepared run's start, in the repository partition (RUNS_PREFIX): ExpireEntries judges
# by the start graveler recorded, never by a time the caller names.
# Events are stamped when they happen but stored up to a flush, a send timeout and a queue
# drain later: a read just before the run's start may be stored after the export. ExpireEntries
# re-reads history from this long before the start, so such a read still spares its object.
LATE_EVENTS_SLACK_US = 60_000_000

LISTING_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("physical_address", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("last_modified_us", pa.int64(), nullable=False),
    ]
)
EVENTS_SCHEMA = pa.schema(
    [pa.field("key", pa.string(), nullable=False), pa.field("timestamp_us", pa.int64(), nullable=False)]
)


@dataclass(frozen=True)
class PreparedLastAccess:
    run_id: str
    namespace: str
    location: str
    listing_location: str
    events_location: str
    started: Timestamp
    rules: list[pb.LastAccessRule]
    entries: int
    events: int


@dataclass(frozen=True)
class Expiry:
    commit_id: str
    expired: int
    spared: int


class LastAccess:
    def __init__(
        self,
        refs: RefManager,
        kv: Store,
        entries: Entries,
        retention: Retention,
        committer: Committer,
        protection: Protection,
        adapter: BlockAdapter,
    ) -> None:
        self._refs = refs
        self._kv = kv
        self._entries = entries
        self._retention = retention
        self._committer = committer
        self._protection = protection
        self._adapter = adapter

    def _branch_rules(self, repo: RepoHandle, branch: str) -> list[pb.LastAccessRule]:
        self._refs.get_branch(repo, branch)  # NotFound for a branch that does not exist
        rules = rules_of_branch(self._retention.get_rules(repo), branch)
        if not rules:
            raise FailedPrecondition(
                f"branch {branch!r} of repository {repo.name!r} has no last-access rule: "
                f"set one with `silt gc rules set {repo.name} --last-access {branch}=DAYS:PREFIX`"
            )
        return rules

    def prepare(self, repo: RepoHandle, branch: str, deadline: Deadline) -> PreparedLastAccess:
        what = f"preparing last-access expiry of {repo.name!r} branch {branch!r}"
        started = Timestamp()
        started.GetCurrentTime()
        rules = self._branch_rules(repo, branch)
        run_id = new_run_id(started.ToDatetime(dt.UTC))
        location = f"{RETENTION_PREFIX}{run_id}/"
        self._kv.set(repo.partition, _run_key(run_id), str(started.ToMicroseconds()).encode())
        # Events older than the longest rule cannot keep anything alive: skip them.
        since_us = started.ToMicroseconds() - max(r.days for r in rules) * _MICROS_PER_DAY
        events = write_parquet(
            self._adapter,
            repo.namespace,
            location + "events.parquet",
            EVENTS_SCHEMA,
            self._event_batches(repo, branch, since_us, deadline),
            deadline,
            what,
        )
        # The listing after the events: an object written meanwhile has a fresh modification time.
        listed = write_parquet(
            self._adapter,
            repo.namespace,
            location + "listing.parquet",
            LISTING_SCHEMA,
            self._listing_batches(repo, branch, covering_prefixes(rules), deadline),
            deadline,
            what,
        )
        return PreparedLastAccess(
            run_id=run_id,
            namespace=repo.namespace,
            location=location,
            listing_location=location + "listing.parquet",
            events_location=location + "events.parquet",
            started=started,
            rules=rules,
            entries=listed,
            events=events,
        )

    def _event_batches(
        self, repo: RepoHandle, branch: str, since_us: int, deadline: Deadline
    ) -> Iterator[pa.RecordBatch]:
        keys: list[str] = []
        stamps: list[int] = []
        for event in scan_partition_events(raw_store(self._kv), repo.partition, branch, since_us=since_us):
            if event.type not in _ACCESS_EVENTS or not event.path:
                continue
            keys.append(event.path)
            stamps.append(event.timestamp_us)
            if len(keys) >= _BATCH_ROWS:
                deadline.check(f"exporting the history of branch {branch!r}")
                yield pa.record_batch([pa.array(keys, pa.string()), pa.array(stamps, pa.int64())], schema=EVENTS_SCHEMA)
                keys, stamps = [], []
        yield pa.record_batch([pa.array(keys, pa.string()), pa.array(stamps, pa.int64())], schema=EVENTS_SCHEMA)

    def _listing_batches(
        self, repo: RepoHandle, branch: str, prefixes: Sequence[str], deadline: Deadline
    ) -> Iterator[pa.RecordBatch]:
        rows: list[tuple[str, pb.Entry]] = []
        for prefix in prefixes:
            after = ""
            while True:
                page = self._entries.list(repo, branch, prefix, "", after, _LIST_PAGE, deadline)
                for key, entry in page.items:
                    if entry is not None:
                        rows.append((key.decode(), entry))
                if len(rows) >= _BATCH_ROWS:
                    yield _listing_batch(rows)
                    rows = []
                if not page.has_more or not page.items:
                    break
                after = page.items[-1][0].decode()
        yield _listing_batch(rows)

    def expire(
        self,
        repo: RepoHandle,
        branch: str,
        rule: pb.LastAccessRule,
        batch: Sequence[tuple[str, str]],
        run_id: str,
        requested_by: str,
        deadline: Deadline,
    ) -> Expiry:
        """Delete the (key, physical address) pairs still expired by rule; commit them as the
        system user. The run's start is the one PrepareLastAccess recorded for run_id."""
        if not 1 <= len(batch) <= MAX_EXPIRE_BATCH:
            raise InvalidArgument(f"an expiry batch holds 1..{MAX_EXPIRE_BATCH} entries, got {len(batch)}")
        validate_run_id(run_id)
        self._branch_rules(repo, branch)  # refuses a branch without rules
        stored = self._retention.get_rules(repo) or pb.GCRules()
        if rule.branch != branch or rule not in stored.last_access_rules:
            raise FailedPrecondition(f"the last-access rules of branch {branch!r} changed since the run started")
        number = list(stored.last_access_rules).index(rule) + 1  # the rule's place, as `silt gc rules show` lists it
        outside = [key for key, _ in batch if not key.startswith(tuple(rule.prefixes))]
        if outside:
            raise InvalidArgument(f"key {outside[0][:200]!r} is not under the prefixes of rule {number}")
        started_us = self._run_start(repo, run_id)
        self._protection.check_direct_write(repo, branch, "expiring objects")
        touched = self._touched_since(
            repo, branch, {key for key, _ in batch}, started_us - LATE_EVENTS_SLACK_US, deadline
        )
        old_before = started_us - rule.days * _MICROS_PER_DAY
        expired: list[str] = []
        for key, address in batch:
            if key in touched:
                continue
            condition = Condition(if_match_address=address, if_modified_before_us=old_before)
            try:
                self._entries.delete_if(repo, branch, key, condition, deadline)
            except (NotFound, FailedPrecondition):
                continue  # deleted, rewritten or copied over since the export: nothing to expire
            expired.append(key)
        if not expired:
            return Expiry("", 0, len(batch))
        try:
            commit_id = self._commit(repo, branch, rule, number, expired, run_id, requested_by, deadline).id
        except FailedPrecondition:
            # Nothing to commit: every expired object was staged and never committed, so
            # deleting it changed nothing against the head. No empty commit says so.
            commit_id = ""
        return Expiry(commit_id, len(expired), len(batch) - len(expired))

    def _run_start(self, repo: RepoHandle, run_id: str) -> int:
        try:
            return int(self._kv.get(repo.partition, _run_key(run_id)).value)
        except NotFound:
            raise FailedPrecondition(
                f"no last-access run {run_id!r} was prepared in repository {repo.name!r}"
            ) from None

    def _touched_since(
        self, repo: RepoHandle, branch: str, keys: set[str], since_us: int, deadline: Deadline
    ) -> set[str]:
        touched: set[str] = set()
        for seen, event in enumerate(
            scan_partition_events(raw_store(self._kv), repo.partition, branch, since_us=since_us)
        ):
            if seen % 10_000 == 0:
                deadline.check(f"reading the history of branch {branch!r}")
            if event.type in _ACCESS_EVENTS and event.path in keys:
                touched.add(event.path)
        return touched

    def _commit(
        self,
        repo: RepoHandle,
        branch: str,
        rule: pb.LastAccessRule,
        number: int,
        keys: list[str],
        run_id: str,
        requested_by: str,
        deadline: Deadline,
    ) -> pb.Commit:
        message = f"Expire objects {describe(rule)} (last-access rule {number})"
        metadata = {RUN_METADATA_KEY: run_id, REQUESTED_BY_METADATA_KEY: requested_by}
        return self._committer.commit(repo, branch, message, metadata, SYSTEM_COMMITTER, False, keys, deadline)


def _run_key(run_id: str) -> bytes:
    return RUNS_PREFIX + run_id.encode()


def _listing_batch(rows: list[tuple[str, pb.Entry]]) -> pa.RecordBatch:
    return pa.record_batch(
        [
            pa.array([key for key, _ in rows], pa.string()),
            pa.array([entry.physical_address for _, entry in rows], pa.string()),
            pa.array([entry.size for _, entry in rows], pa.int64()),
            pa.array(
                [entry.last_modified.ToMicroseconds() if entry.HasField("last_modified") else -1 for _, entry in rows],
                pa.int64(),
            ),
        ],
        schema=LISTING_SCHEMA,
    )
