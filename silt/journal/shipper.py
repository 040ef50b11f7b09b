"""The shipper: moves a repository's journal rows from KV into its storage namespace.

Per repository (docs/design/journal.md, "Shipping"):

1. take the repository's shipping lease (``set_if`` of ``journal_ship/lease`` in the
   repository partition, refused while another shipper's lease is younger than its term):
   one shipper per repository at a time, and a crashed one's lease simply expires;
2. ship ``journal/`` of the ``graveler`` partition (rows of this repository only), then of the
   repository partition, then of every staging-token partition the repository may have rows
   in: the tokens its branch records name now, the tokens named by the branch values in its
   journal rows (a token sealed and dropped between two rounds), and the tokens in the saved
   list (``journal_ship/tokens``) from earlier rounds;
3. to ship rows: write them as a Parquet batch (silt/journal/batch.py), each batch written once;
   then add the tokens their branch values name to the saved list; only then delete the rows,
   raw (deleting is not journaled);
4. save the list again: every token named this round or found holding rows, with the time; a
   token found empty and unnamed stays until a grace period has passed since it was last in
   use (a stale writer may still land a row in a token after a commit dropped it).

Every deletion follows from saved state, so a crash at any point strands nothing: rows are
deleted only once their batch is in the bucket, and a token leaves the saved list only after a
round found it empty, so the next round still finds every token that may hold rows. A crash
after a batch is written and before its rows are deleted ships the same rows again next
time: a batch holding some of the same records, which rebuild applies once (it replays by
position and skips what it applied).
Everything here reads and writes the store raw: journal rows are invisible through graveler's
journaled store, and the shipper's own keys must not be journaled.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.message import DecodeError

from silt.block.adapter import BlockAdapter
from silt.errors import InvalidArgument, NotFound, PredicateFailed, Unavailable
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import ShippedRecord, batch_key, encode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.envelope import unwrap
from silt.journal.mac import sign
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.v1.journal_pb2 import Record
from silt.kv.store import MAX_APPLY_ROWS, Store, scan_prefix

log = logging.getLogger(__name__)
_M = TypeVar("_M", pb.Repository, pb.Branch)

# graveler's key schema (services/graveler/refs/manager.py), which silt/ may not import.
GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
BRANCHES = b"branches/"

LEASE_KEY = b"journal_ship/lease"
TOKENS_KEY = b"journal_ship/tokens"
# Records per Parquet batch: bounds the shipper's memory and a batch's size.
MAX_BATCH_RECORDS = 20_000
# A token no branch names and with no rows left is still scanned this long.
TOKEN_GRACE_SECONDS = 3600.0
# Remembered tokens per repository; beyond it the oldest are forgotten.
MAX_REMEMBERED_TOKENS = 10_000
# Compare-and-set attempts on the token list: only overlapping shippers contend for it.
SAVE_TRIES = 20


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
        return results

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
            saved = self._remembered(partition)
            named = self._ship_partition(bucket, GRAVELER_PARTITION, partition, saved, result, repository)
            named |= self._ship_partition(bucket, partition, partition, saved, result, None)
            now = self._clock()
            named |= self._branch_tokens_now(partition)
            scanned = named | set(saved)
            for token in sorted(scanned):
                named |= self._ship_partition(bucket, token.encode(), partition, saved, result, None)
            # A token found empty and unnamed is forgotten once the grace period since it was
            # last in use has passed (a stale writer's row may still land in it until then).
            self._save_tokens(partition, dict.fromkeys(named, now), forget=scanned - named)
            self._step("tokens saved")
        finally:
            self._release_lease(partition)
        return result

    # --- one partition ---------------------------------------------------------------

    def _ship_partition(
        self,
        bucket: JournalBucket,
        partition: bytes,
        repository_partition: bytes,
        saved: dict[str, float],
        result: ShipResult,
        only: pb.Repository | None,
    ) -> set[str]:
        """Ship the journal rows of partition (in the shared ``graveler`` partition, only those of
        repository ``only``); return the staging tokens named by branch values in them, and a
        staging-token partition that held rows itself (it is in use)."""
        named: set[str] = set()
        pending: list[ShippedRecord] = []
        shipped_any = False
        for entry in scan_prefix(self._kv, partition, JOURNAL_PREFIX):
            record = decode_record(entry.value)
            if only is not None and not _belongs(record, only):
                continue
            named |= _branch_tokens(record)
            pending.append(ShippedRecord(partition, entry.key, record))
            if len(pending) >= self._batch_records:
                self._ship_batch(bucket, pending, repository_partition, saved, result)
                shipped_any = True
                pending = []
        if pending:
            self._ship_batch(bucket, pending, repository_partition, saved, result)
            shipped_any = True
        if shipped_any:
            result.partitions += 1
        self._step("partition shipped")
        if shipped_any and partition not in (GRAVELER_PARTITION, repository_partition):
            named.add(partition.decode())
        return named

    def _ship_batch(
        self,
        bucket: JournalBucket,
        records: list[ShippedRecord],
        repository_partition: bytes,
        saved: dict[str, float],
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
        unsaved = named - set(saved)
        if unsaved:
            now = self._clock()
            saved.update(self._save_tokens(repository_partition, dict.fromkeys(unsaved, now)))
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

    def _branch_tokens_now(self, partition: bytes) -> set[str]:
        tokens: set[str] = set()
        for entry in scan_prefix(self._kv, partition, BRANCHES):
            tokens |= _tokens_of(_decode(pb.Branch(), entry.value))
        return tokens

    def _remembered(self, partition: bytes) -> dict[str, float]:
        """Token -> the time it was last known to be in use (named, or holding rows)."""
        try:
            stored = self._kv.get(partition, TOKENS_KEY).value
        except NotFound:
            return {}
        return _parse_tokens(stored, partition)

    def _save_tokens(
        self, partition: bytes, seen: dict[str, float], forget: AbstractSet[str] = frozenset()
    ) -> dict[str, float]:
        """Merge seen into the saved token list (a token keeps its latest time) and drop the
        tokens of forget that have been unnamed for the grace period; return the list saved.

        A compare-and-set on the stored list, read again on a conflict: two shippers can
        overlap (a lease running out under a slow one), and neither may lose the tokens the
        other saved before deleting the rows that named them."""
        for _ in range(SAVE_TRIES):
            try:
                current = self._kv.get(partition, TOKENS_KEY)
            except NotFound:
                current = None
            tokens = {} if current is None else _parse_tokens(current.value, partition)
            for token, when in seen.items():
                tokens[token] = max(when, tokens.get(token, when))
            now = self._clock()
            for token in forget - set(seen):
                if token in tokens and now - tokens[token] >= TOKEN_GRACE_SECONDS:
                    del tokens[token]
            # The newest first: a token that held rows this round is among them.
            newest = dict(sorted(tokens.items(), key=lambda item: item[1], reverse=True)[:MAX_REMEMBERED_TOKENS])
            try:
                self._kv.set_if(
                    partition,
                    TOKENS_KEY,
                    json.dumps(newest).encode(),
                    None if current is None else current.predicate,
                )
            except PredicateFailed:
                continue
            return newest
        raise Unavailable(f"the shipped-token list of {partition!r} kept changing under {SAVE_TRIES} tries")

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


def _parse_tokens(stored: bytes, partition: bytes) -> dict[str, float]:
    try:
        loaded = json.loads(stored)
        return {str(token): float(seen) for token, seen in loaded.items()}
    except (ValueError, AttributeError, TypeError):
        # Overwritten by the next save; the tokens it held are found again only through branch
        # records and unshipped rows.
        log.warning("unreadable shipped-token list in %r; starting afresh", partition)
        return {}


def _decode(message: _M, stored: bytes) -> _M:
    try:
        message.ParseFromString(unwrap(stored)[1])
    except DecodeError:
        raise InvalidArgument(f"corrupt {type(message).__name__} record in KV") from None
    return message
