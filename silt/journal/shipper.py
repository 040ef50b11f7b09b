"""The shipper: moves a repository's journal rows from KV into its storage namespace.

Per repository (docs/design/journal.md, "Shipping"):

1. take the repository's shipping lease (``set_if`` of ``journal_ship/lease`` in the
   repository partition, refused while another shipper's lease is younger than its term):
   one shipper per repository at a time, and a crashed one's lease simply expires;
2. ship ``journal/`` of the ``graveler`` partition (rows of this repository only), then of the
   repository partition; save the tokens the branch records name now in the saved token list
   (silt/journal/ship_tokens.py: one key per token, in a partition of the shipper's own); then
   ship every staging-token partition in the saved list, paging through it;
3. to ship rows: write them as a Parquet batch (silt/journal/batch.py), each batch written once;
   then save the tokens their branch values name in the list; only then delete the rows, raw
   (deleting is not journaled);
4. a token whose partition held rows is saved again with the time; one found empty is
   forgotten once a grace period has passed since it was last in use (a stale writer may still
   land a row in a token after a commit dropped it).

Every deletion follows from saved state, so a crash at any point strands nothing: rows are
deleted only once their batch is in the bucket, and a token leaves the saved list only after a
round found it empty, so the next round still finds every token that may hold rows. A crash
after a batch is written and before its rows are deleted ships the same rows again next
time: a batch holding some of the same records, which rebuild applies once (it replays by
position and skips what it applied). The list has no length limit and is never read whole.

After the live repositories, a round of every repository drops the journal rows of deleted
ones (silt/journal/ship_deleted.py): they are never shipped, and would otherwise be read
again by every round.
Everything here reads and writes the store raw: journal rows are invisible through graveler's
journaled store, and the shipper's own keys must not be journaled.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.message import DecodeError

from silt.block.adapter import BlockAdapter
from silt.errors import InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import ShippedRecord, batch_key, encode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.envelope import unwrap
from silt.journal.mac import sign
from silt.journal.record import JOURNAL_PREFIX, STAGED_ADMISSION, STAGED_DELETED_AT, decode_record
from silt.journal.ship_deleted import DeletedRepositories, Swept, drop_saved_tokens
from silt.journal.ship_tokens import TOKEN_GRACE_SECONDS, ShippedTokens
from silt.journal.v1.journal_pb2 import Record
from silt.kv.conditional import delete_current
from silt.kv.store import MAX_APPLY_ROWS, Store, scan_prefix

log = logging.getLogger(__name__)
_M = TypeVar("_M", pb.Repository, pb.Branch)

# graveler's key schema (engine/core/refs/manager.py), which silt/ may not import.
GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
BRANCHES = b"branches/"

LEASE_KEY = b"journal_ship/lease"
# Records per Parquet batch: bounds the shipper's memory and a batch's size.
MAX_BATCH_RECORDS = 20_000
__all__ = ["TOKEN_GRACE_SECONDS", "ShipResult", "Shipper"]


@dataclass
class ShipResult:
    repository: str
    records: int = 0
    batches_written: int = 0
    batches_existing: int = 0
    partitions: int = 0
    skipped: str = ""  # why nothing was shipped (another shipper holds the lease)
    keys: list[str] = field(default_factory=list)


class Shipper:
    def __init__(
        self,
        kv: Store,
        adapter: BlockAdapter,
        lease_seconds: float = 300.0,
        *,
        hmac_key: bytes,
        clock: Callable[[], float] = time.time,
        batch_records: int = MAX_BATCH_RECORDS,
        step: Callable[[str], None] = lambda name: None,
    ) -> None:
        self._kv = kv  # raw: journal rows visible, writes unjournaled
        self._adapter = adapter
        self._hmac_key = hmac_key
        self._lease_seconds = lease_seconds
        self._clock = clock
        self._batch_records = batch_records
        self.owner = uuid.uuid4().hex
        self._step = step
        self.swept = Swept()  # what the last ship_all dropped of deleted repositories

    def repositories(self) -> Iterator[pb.Repository]:
        for entry in scan_prefix(self._kv, GRAVELER_PARTITION, REPOS):
            yield _decode(pb.Repository(), entry.value)

    def ship_all(self) -> list[ShipResult]:
        results = []
        for record in self.repositories():
            try:
                results.append(self.ship_repository(record))
            except Exception:
                # One repository's trouble (its bucket unreachable) must not stop the others.
                log.warning("shipping the journal of %s failed", record.name, exc_info=True)
        try:
            self.swept = self.sweep_deleted()
        except Exception:
            log.warning("dropping the journal rows of deleted repositories failed", exc_info=True)
        return results

    def sweep_deleted(self) -> Swept:
        """Drop the journal rows deleted repositories left (silt/journal/ship_deleted.py)."""
        return DeletedRepositories(self._kv, self._clock).sweep()

    def ship(self, repository: str) -> ShipResult:
        try:
            stored = self._kv.get(GRAVELER_PARTITION, REPOS + repository.encode()).value
        except NotFound:
            raise NotFound(f"repository {repository!r} not found") from None
        return self.ship_repository(_decode(pb.Repository(), stored))

    def ship_repository(self, repository: pb.Repository) -> ShipResult:
        result = ShipResult(repository.name)
        partition = f"{repository.name}-{repository.unique_id}".encode()
        if not self._take_lease(partition):
            result.skipped = "another shipper holds the lease"
            return result
        self._step("lease taken")
        try:
            bucket = JournalBucket(self._adapter, repository.storage_namespace)
            tokens = ShippedTokens(self._kv, partition)
            tokens.adopt_legacy_list()
            self._ship_partition(bucket, GRAVELER_PARTITION, tokens, result, repository)
            self._ship_partition(bucket, partition, tokens, result, None)
            now = self._clock()
            for token in self._branch_tokens_now(partition):
                tokens.save(token, now)
            # Page by page: tokens saved meanwhile (named by rows shipped here) are scanned now
            # if they sort after the cursor, by the next round otherwise.
            for saved in tokens.entries():
                if self._ship_partition(bucket, saved.partition, tokens, result, None):
                    tokens.save(saved.token, self._clock())
                else:
                    # Empty: forgotten once the grace period since it was last in use has
                    # passed (a stale writer's row may still land in it until then).
                    # Its deletion marks, guards (fences by now) and closed admission row go then
                    # too: no stale conditional writer can reach the token any more, nor wait on
                    # an outcome they tell, and nothing else is left in it.
                    tokens.forget_if_unused(
                        saved.token,
                        self._clock(),
                        before_forget=functools.partial(_forget_guards, self._kv, saved.partition),
                    )
            self._step("tokens saved")
        finally:
            # Also after a round that failed part-way: its saves so far may outlive the repository.
            try:
                self._drop_tokens_if_deleted(repository, partition)
            finally:
                self._release_lease(partition)
        return result

    # --- one partition ---------------------------------------------------------------

    def _ship_partition(
        self,
        bucket: JournalBucket,
        partition: bytes,
        tokens: ShippedTokens,
        result: ShipResult,
        only: pb.Repository | None,
    ) -> bool:
        """Ship the journal rows of partition (in the shared ``graveler`` partition, only those of
        repository ``only``); whether it held any."""
        pending: list[ShippedRecord] = []
        shipped_any = False
        for entry in scan_prefix(self._kv, partition, JOURNAL_PREFIX):
            record = decode_record(entry.value)
            if only is not None and not _belongs(record, only):
                continue
            pending.append(ShippedRecord(partition, entry.key, record))
            if len(pending) >= self._batch_records:
                self._ship_batch(bucket, pending, tokens, result)
                shipped_any = True
                pending = []
        if pending:
            self._ship_batch(bucket, pending, tokens, result)
            shipped_any = True
        if shipped_any:
            result.partitions += 1
        self._step("partition shipped")
        return shipped_any

    def _ship_batch(
        self,
        bucket: JournalBucket,
        records: list[ShippedRecord],
        tokens: ShippedTokens,
        result: ShipResult,
    ) -> None:
        key = batch_key(records)
        data = encode_batch(records)
        if bucket.put_once(key, data, sign(self._hmac_key, key, data)):
            result.batches_written += 1
        else:
            result.batches_existing += 1
        self._step("batch written")
        result.keys.append(key)
        result.records += len(records)
        # A branch value in these rows may be the last trace of a token that was sealed and
        # dropped since the last round, its journal rows still waiting: once the rows are gone,
        # only the saved token list leads the next round there, so it is saved first.
        named = set().union(*(_branch_tokens(item.record) for item in records))
        if named:
            now = self._clock()
            for token in sorted(named):
                tokens.save(token, now)
            self._step("batch tokens saved")
        # Only now, with the batch durable in the bucket, do the rows leave KV.
        partition = records[0].source_partition
        keys = [item.row_key for item in records]
        # A journal row carries its record's logical timestamp as its write time when it came
        # with a blind staged write (Cassandra: USING TIMESTAMP), and that clock may run ahead
        # of the one this delete would otherwise take: a delete stamped earlier than the row
        # is ignored. Row keys are never written twice, so a delete stamped after every row
        # of the batch is always safe.
        after_rows = max(item.record.logical_timestamp for item in records) + 1
        delete_time = max(time.time_ns() // 1000, after_rows)
        for start in range(0, len(keys), MAX_APPLY_ROWS):
            self._kv.apply(partition, [], keys[start : start + MAX_APPLY_ROWS], timestamp=delete_time)
            self._step("rows deleted")

    # --- tokens ----------------------------------------------------------------------

    def _drop_tokens_if_deleted(self, repository: pb.Repository, partition: bytes) -> None:
        """Drop the saved token list this round wrote to if the repository was deleted while it
        ran. Read after the round's last save: if the record is still there, its deletion comes
        later and the deletion's clean-up, which drops the list, finds every save; if it is
        gone, that clean-up may already have dropped the list, and the saves after it would
        stay for good (no round ships the repository again; the sweep may find none of its
        shared rows, this round having shipped them)."""
        try:
            current = _decode(pb.Repository(), self._kv.get(GRAVELER_PARTITION, REPOS + repository.name.encode()).value)
        except NotFound:
            current = None
        if current is None or current.unique_id != repository.unique_id:
            dropped = drop_saved_tokens(self._kv, partition)
            log.info(
                "repository %s was deleted while shipping: dropped its saved tokens (%d rows)", repository.name, dropped
            )

    def _branch_tokens_now(self, partition: bytes) -> Iterator[str]:
        for entry in scan_prefix(self._kv, partition, BRANCHES):
            yield from sorted(_tokens_of(_decode(pb.Branch(), entry.value)))

    # --- the lease ----------------------------------------------------------------------

    def _take_lease(self, partition: bytes) -> bool:
        now = self._clock()
        lease = json.dumps({"owner": self.owner, "until": now + self._lease_seconds}).encode()
        try:
            current = self._kv.get(partition, LEASE_KEY)
        except NotFound:
            current = None
        if current is not None:
            try:
                held = json.loads(current.value)
                if held.get("owner") != self.owner and float(held.get("until", 0)) > now:
                    return False
            except (ValueError, AttributeError, TypeError):
                pass  # unreadable: treated as expired
        try:
            self._kv.set_if(partition, LEASE_KEY, lease, None if current is None else current.predicate)
        except PredicateFailed:
            return False  # another shipper took it between our read and our write
        return True

    def _release_lease(self, partition: bytes) -> None:
        try:
            current = self._kv.get(partition, LEASE_KEY)
            if json.loads(current.value).get("owner") == self.owner:
                # Conditional on the lease read: another shipper that took it over since (ours
                # ran out) keeps its own.
                self._kv.apply(partition, [], [LEASE_KEY], condition=(LEASE_KEY, current.predicate))
        except (NotFound, ValueError, AttributeError, PredicateFailed):
            pass  # gone, unreadable or no longer ours: nothing to release; it expires anyway


def _belongs(record: Record, repository: pb.Repository) -> bool:
    """Whether a row of the shared partition is this repository's: its partition names it, or
    (a record made before the call resolved the repository) its name does."""
    if record.repository_partition:
        return record.repository_partition == f"{repository.name}-{repository.unique_id}"
    return record.repository == repository.name


def _branch_tokens(record: Record) -> set[str]:
    tokens: set[str] = set()
    for change in record.changes:
        if change.kind == "branch" and change.value:
            tokens |= _tokens_of(_decode(pb.Branch(), change.value))
    return tokens


def _tokens_of(branch: pb.Branch) -> set[str]:
    return {token for token in (branch.staging_token, *branch.sealed_tokens) if token}


def _decode(message: _M, stored: bytes) -> _M:
    try:
        message.ParseFromString(unwrap(stored)[1])
    except DecodeError:
        raise InvalidArgument(f"corrupt {type(message).__name__} record in KV") from None
    return message


def _forget_guards(kv: Store, partition: bytes) -> None:
    """Delete what a dropped token keeps until now (engine/core/staging.py, drop): its deletion
    marks, its guards (fences by now), and its admission row last."""
    for entry in list(scan_prefix(kv, partition, STAGED_DELETED_AT)):
        # Written at their logical stamps, which may be ahead of any clock: deleted past them.
        kv.apply(partition, [], [entry.key], timestamp=unwrap(entry.value)[0] + 1)
    for entry in list(scan_prefix(kv, partition, STAGED_ADMISSION)):
        if entry.key != STAGED_ADMISSION:
            delete_current(kv, partition, entry.key)
    delete_current(kv, partition, STAGED_ADMISSION)
