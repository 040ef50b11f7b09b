"""The shipper: moves a repository's journal rows from KV into its storage namespace.

Per repository (docs/design/journal.md, "Shipping"):

1. take the repository's shipping lease (``set_if`` of ``journal_ship/lease`` in the
   repository partition, refused while another shipper's lease is younger than its term):
   one shipper per repository at a time, and a crashed one's lease simply expires;
2. scan ``journal/`` of the ``graveler`` partition (rows of this repository only), of the
   repository partition, and of every staging-token partition the repository may have
   rows in: the tokens its branch records name now, the tokens named by the branch values
   in its unshipped journal rows (a token sealed and dropped between two rounds), and the
   tokens remembered from earlier rounds (a stale writer may still land a row in a token
   after a commit dropped it; a token is forgotten a grace period after it was last seen);
3. write the rows as Parquet batches (silt/journal/batch.py), each written once;
4. only then delete the shipped rows, raw (deleting is not journaled).

A crash between 3 and 4 ships the same rows again next time: a new batch holding some of the
same records, which rebuild applies once (it replays by position and skips what it applied).
Everything here reads and writes the store raw: journal rows are invisible through graveler's
journaled store, and the shipper's own keys must not be journaled.
"""

from __future__ import annotations

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
        clock: Callable[[], float] = time.time,
        batch_records: int = MAX_BATCH_RECORDS,
    ) -> None:
        self._kv = kv  # raw: journal rows visible, writes unjournaled
        self._adapter = adapter
        self._lease_seconds = lease_seconds
        self._clock = clock
        self._batch_records = batch_records
        self.owner = uuid.uuid4().hex

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
        try:
            bucket = JournalBucket(self._adapter, repository.storage_namespace)
            self._ship_partition(bucket, GRAVELER_PARTITION, result, repository)
            branch_tokens = self._ship_partition(bucket, partition, result, None)
            tokens = self._tokens(partition, branch_tokens)
            for token in sorted(tokens):
                self._ship_partition(bucket, token.encode(), result, None)
            self._remember(partition, tokens)
        finally:
            self._release_lease(partition)
        return result

    # --- one partition ---------------------------------------------------------------

    def _ship_partition(
        self, bucket: JournalBucket, partition: bytes, result: ShipResult, only: pb.Repository | None
    ) -> set[str]:
        """Ship the journal rows of partition (in the shared ``graveler`` partition, only those of
        repository ``only``); return the staging tokens named by branch values in them."""
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
                self._ship_batch(bucket, pending, result)
                shipped_any = True
                pending = []
        if pending:
            self._ship_batch(bucket, pending, result)
            shipped_any = True
        if shipped_any:
            result.partitions += 1
        return named

    def _ship_batch(self, bucket: JournalBucket, records: list[ShippedRecord], result: ShipResult) -> None:
        key = batch_key(records)
        if bucket.put_once(key, encode_batch(records)):
            result.batches_written += 1
        else:
            result.batches_existing += 1
        result.keys.append(key)
        result.records += len(records)
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

    # --- tokens ----------------------------------------------------------------------

    def _tokens(self, partition: bytes, from_journal: set[str]) -> dict[str, float]:
        """Token -> the time it was last known to be in use (named, or holding rows)."""
        now = self._clock()
        tokens = {token: now for token in from_journal}
        for entry in scan_prefix(self._kv, partition, BRANCHES):
            branch = _decode(pb.Branch(), entry.value)
            for token in (branch.staging_token, *branch.sealed_tokens):
                if token:
                    tokens[token] = now
        for token, seen in self._remembered(partition).items():
            if token not in tokens and now - seen < TOKEN_GRACE_SECONDS:
                tokens[token] = seen
        return tokens

    def _remembered(self, partition: bytes) -> dict[str, float]:
        try:
            stored = self._kv.get(partition, TOKENS_KEY).value
        except NotFound:
            return {}
        try:
            loaded = json.loads(stored)
            return {str(token): float(seen) for token, seen in loaded.items()}
        except (ValueError, AttributeError, TypeError):
            log.warning("unreadable shipped-token list in %r; starting afresh", partition)
            return {}

    def _remember(self, partition: bytes, tokens: dict[str, float]) -> None:
        newest = sorted(tokens.items(), key=lambda item: item[1], reverse=True)[:MAX_REMEMBERED_TOKENS]
        self._kv.set(partition, TOKENS_KEY, json.dumps(dict(newest)).encode())

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
                self._kv.delete(partition, LEASE_KEY)
        except (NotFound, ValueError, AttributeError):
            pass  # gone or unreadable: nothing of ours to release; it expires anyway


def _belongs(record: Record, repository: pb.Repository) -> bool:
    """Whether a row of the shared partition is this repository's: its partition names it, or
    (a record made before the call resolved the repository) its name does."""
    if record.repository_partition:
        return record.repository_partition == f"{repository.name}-{repository.unique_id}"
    return record.repository == repository.name


def _branch_tokens(record: Record) -> set[str]:
    tokens: set[str] = set()
    for change in record.changes:
        if change.kind != "branch" or not change.value:
            continue
        branch = _decode(pb.Branch(), change.value)
        tokens.update(token for token in (branch.staging_token, *branch.sealed_tokens) if token)
    return tokens


def _decode(message: _M, stored: bytes) -> _M:
    try:
        message.ParseFromString(unwrap(stored)[1])
    except DecodeError:
        raise InvalidArgument(f"corrupt {type(message).__name__} record in KV") from None
    return message
