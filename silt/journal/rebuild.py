"""Rebuild: a repository's metadata, from the journal batches in its storage namespace alone.

Records are replayed in their total order (logical timestamp, writer id, sequence), each
change written back raw: the stored value exactly as the journal holds it (envelope
included), on Cassandra with the record's logical timestamp as write time. The final state
of a key is its last change, so the replay only has to keep each key's changes in order; but
for staged values stamped alike by two writers, the one the store kept by its own rule
(a tombstone over a value, the larger value over the smaller: _wins_tie).

Order across batches: every batch is sorted, so the batches are merged with a heap holding
the next record of each open batch, read a chunk of rows at a time from a spooled copy; a
batch is opened only once every open batch's next record is at or past its first position
(from its footer, read in the first pass). Memory is a chunk per open batch, whatever the
number of records in an hour.

Changes are grouped per partition, up to MAX_APPLY_ROWS rows (a key changed twice in a group
keeps its later change), a group's staged rows written by few ``apply`` calls of at most
REBUILD_WRITE_BYTES each, which is what makes replay fast on SQLite.

Staged values of tokens that no branch names at the journal's end (dropped by a commit, reset or
branch deletion, their values deleted by graveler's cleaner unjournaled) are neither written nor
kept: a first pass over the batches reads the branch changes to find those tokens, and the
replay skips their changes.

Resumable: after each flush the position of the last applied record is checkpointed in the
target KV (``rebuild/<repository>`` in the ``graveler`` partition); a second run skips
every record at or before it. The repository record itself (``repos/<name>``) is held back
and written last, as graveler writes it last on creation: until then the repository does
not exist for graveler, and a run that finds it refuses.
"""

from __future__ import annotations

import base64
import contextlib
import heapq
import itertools
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from google.protobuf.message import DecodeError

from silt.block.adapter import BlockAdapter
from silt.errors import AlreadyExists, InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import (
    REPLAY_ORDER,
    Position,
    ReplayRecord,
    batch_range,
    decode_batch,
    replay_chunks,
    token_facts,
)
from silt.journal.bucket import JournalBucket
from silt.journal.envelope import unwrap
from silt.journal.mac import matches, signer
from silt.journal.record import STAGED_KIND, is_journal_key, key_kind, parse_record_key
from silt.kv.conditional import delete_current, replace
from silt.kv.store import MAX_APPLY_ROWS, SPLIT_WRITE_BYTES, Store, writes_by_weight

GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
CHECKPOINT_PREFIX = b"rebuild/"
# graveler's keys of one repository in its shared partition (engine/core/claims.py,
# lifecycle.py), which silt/ may not import.
CLAIMS = b"ns_claims/"
TO_DELETE = b"to_delete/"
# Records applied between two checkpoints: bounds what a resumed run applies again.
CHECKPOINT_RECORDS = 50_000
SPOOL_BLOCK_BYTES = 1024 * 1024
# Bytes per KV write of staged rows, as silt.kv.store.row_weight counts them (what Cassandra
# counts against batch_size_fail_threshold_in_kb, over-estimated): well under the 50 KiB that
# Cassandra 2.2 to 3.5 refuse in one batch, as graveler's own staging writes are.
REBUILD_WRITE_BYTES = SPLIT_WRITE_BYTES


@dataclass
class RebuildProgress:
    batches_total: int = 0
    batches_read: int = 0
    batches_skipped: int = 0  # already applied by an interrupted run
    records_applied: int = 0
    records_other: int = 0  # of other repositories that used the same namespace
    hour: str = ""
    resumed: bool = False
    deleted: bool = False  # the journal ends with the repository's deletion: nothing exposed
    dropped_tokens: int = 0  # staging tokens no branch names at the journal's end
    dropped_changes: int = 0  # their staged values, not written
    unsigned_batches: int = 0  # accepted without a MAC (accept_unsigned: a one-time migration)
    refused_changes: int = 0  # changes naming what is not the repository's own: none applied
    refused_first: str = ""  # the first of them


class Refused(InvalidArgument):
    """The journal holds a batch rebuild does not trust, or changes outside the repository."""


class Rebuild:
    def __init__(
        self,
        kv: Store,
        adapter: BlockAdapter,
        namespace: str,
        repository: str,
        report: Callable[[RebuildProgress], None] = lambda progress: None,
        checkpoint_records: int = CHECKPOINT_RECORDS,
        *,
        hmac_key: bytes,
        accept_unsigned: bool = False,
    ) -> None:
        if not repository:
            raise InvalidArgument("rebuild needs the repository's name")
        self._kv = kv  # bare: writes go in as they are, not journaled again
        self._bucket = JournalBucket(adapter, namespace)
        self._repository = repository
        self._report = report
        self._hmac_key = hmac_key
        self._accept_unsigned = accept_unsigned
        self._checkpoint_records = checkpoint_records
        self._repo_key = REPOS + repository.encode()
        self._checkpoint_key = CHECKPOINT_PREFIX + repository.encode()
        self.progress = RebuildProgress()
        self._pending: dict[bytes, dict[bytes, tuple[bytes | None, int]]] = {}
        self._since_checkpoint = 0
        self._applied: Position | None = None
        self._held: bytes | None = None  # the repos/<name> value, written last; None: absent
        self._dropped: set[bytes] = set()  # partitions of tokens no branch names at the end
        self._own: set[bytes] = set()  # the partitions the first pass found the repository's own
        self._own_shared: set[bytes] = {self._repo_key}  # its keys in graveler's partition
        self._unsigned: set[str] = set()  # batches accepted without a MAC
        self._firsts: dict[str, Position] = {}  # batch -> its first record's position
        # Per partition, the staged rows its last flushed group wrote at that group's newest
        # stamp: a later change of one of them at the same stamp is a tie, judged as the store
        # judged it (_wins_tie).
        self._flushed_newest: dict[bytes, dict[bytes, tuple[bytes | None, int]]] = {}

    def run(self) -> RebuildProgress:
        self._refuse_existing()
        keys = self._bucket.batches()
        self.progress.batches_total = len(keys)
        # The first pass verifies every batch and what its records change before the first write.
        self._dropped = self._dropped_tokens(keys)
        self._start()
        self.progress.dropped_tokens = len(self._dropped)
        for record in self._merged(keys):
            self._replay(record)
        self._report(self.progress)  # the last hour replayed
        self._flush()
        self._finish()
        self._report(self.progress)
        return self.progress

    # --- start and finish --------------------------------------------------------------------

    def _refuse_existing(self) -> None:
        try:
            self._kv.get(GRAVELER_PARTITION, self._repo_key)
        except NotFound:
            return
        raise AlreadyExists(f"repository {self._repository!r} exists in the target KV; rebuild refuses to overwrite it")

    def _start(self) -> None:
        self._refuse_existing()
        try:
            checkpoint = json.loads(self._kv.get(GRAVELER_PARTITION, self._checkpoint_key).value)
        except NotFound:
            self._save_checkpoint()  # marks the rebuild as started, before anything is written
            return
        except ValueError:
            raise InvalidArgument(f"unreadable rebuild checkpoint {self._checkpoint_key!r}") from None
        if checkpoint.get("namespace") != self._bucket.namespace:
            raise InvalidArgument(
                f"an interrupted rebuild of {self._repository!r} from {checkpoint.get('namespace')!r} is in the "
                "target KV; resume it with that namespace"
            )
        at = checkpoint.get("position")
        self._applied = (int(at[0]), str(at[1]), int(at[2])) if at else None
        held = checkpoint.get("held")
        self._held = base64.b64decode(held) if held is not None else None
        self.progress.resumed = True

    def _finish(self) -> None:
        if self.progress.resumed:
            # The interrupted run may have been one that still wrote them.
            for partition in sorted(self._dropped):
                entries = list(self._kv.scan(partition))
                for start in range(0, len(entries), MAX_APPLY_ROWS):
                    chunk = entries[start : start + MAX_APPLY_ROWS]
                    keys = [entry.key for entry in chunk]
                    # Twice: at the store's own time, and past the logical timestamps rows may
                    # have been written at (which may be ahead of it); the later deletion wins.
                    self._kv.apply(partition, [], keys)
                    newest = max(_stamp_of(entry.key, entry.value) for entry in chunk)
                    self._kv.apply(partition, [], keys, timestamp=newest + 1)
        if self._held is None:
            self.progress.deleted = self._applied is not None
        else:
            replace(self._kv, GRAVELER_PARTITION, self._repo_key, self._held)
        self._kv.delete(GRAVELER_PARTITION, self._checkpoint_key)

    def _save_checkpoint(self) -> None:
        state = {
            "namespace": self._bucket.namespace,
            "position": list(self._applied) if self._applied else None,
            "held": base64.b64encode(self._held).decode() if self._held is not None else None,
        }
        self._kv.set(GRAVELER_PARTITION, self._checkpoint_key, json.dumps(state).encode())

    # --- reading ---------------------------------------------------------------------------

    def _merged(self, keys: list[str]) -> Iterator[ReplayRecord]:
        """Every batch's records in replay order, merged as they are read: each batch is sorted,
        so a heap holds the next record of every open batch, and a batch is opened only once
        every open batch's next record is at or past its first (from its footer, read in the
        first pass). Memory: a decoded chunk and a spooled file per open batch, and the first
        position of every batch; not the records of an hour."""
        waiting = sorted(keys, key=lambda key: (self._firsts[key], key), reverse=True)  # next last
        heap: list[tuple[Position, int, ReplayRecord, Iterator[ReplayRecord]]] = []
        tiebreak = itertools.count()  # two copies of a record shipped twice compare equal
        while waiting or heap:
            if waiting and (not heap or heap[0][0] >= self._firsts[waiting[-1]]):
                key = waiting.pop()
                hour = _hour_of_key(key)
                if hour != self.progress.hour:
                    if self.progress.hour:
                        self._report(self.progress)  # every record before this hour is applied
                    self.progress.hour = hour
                records = self._records(key)
                first = next(records, None)
                if first is not None:
                    heapq.heappush(heap, (_order(first), next(tiebreak), first, records))
                continue
            _, _, record, records = heapq.heappop(heap)
            yield record
            following = next(records, None)
            if following is not None:
                heapq.heappush(heap, (_order(following), next(tiebreak), following, records))

    @contextlib.contextmanager
    def _open(self, key: str) -> Iterator[BinaryIO]:
        """A batch spooled to a temporary file (memory stays bounded whatever its size) once
        its MAC verified on the way: only a shipper holding the services' key wrote it."""
        mac = self._bucket.read_mac(key)
        digest = signer(self._hmac_key, key)
        with tempfile.TemporaryFile() as spool:
            with self._bucket.open(key) as stream:
                while block := stream.read(SPOOL_BLOCK_BYTES):
                    digest.update(block)
                    spool.write(block)
            if mac is None and self._accept_unsigned:
                self._unsigned.add(key)
                self.progress.unsigned_batches = len(self._unsigned)
            elif mac is None or not matches(digest, mac):
                what = "no" if mac is None else "an invalid"
                self.progress.refused_first = f"batch {key}: {what} MAC"
                self._report(self.progress)
                raise Refused(f"journal batch {key} has {what} MAC; rebuild refuses it")
            spool.seek(0)
            yield spool

    def _dropped_tokens(self, keys: list[str]) -> set[bytes]:
        """The partitions holding staged values of tokens no branch names at the journal's end.

        The cleaner deletes a dropped token's staged values unjournaled, so replaying its writes
        would bring back rows that nothing reads and nothing deletes again. Which tokens end up
        dropped is known only from the last change of every branch record, so every batch is
        read once for that before the replay (only the branch changes are decoded)."""
        branches: dict[tuple[bytes, bytes], tuple[Position, bytes | None]] = {}
        staged: set[bytes] = set()
        touched: dict[bytes, tuple[int, int]] = {}  # partition -> (oldest timestamp, changes)
        shared: dict[bytes, tuple[int, int]] = {}  # graveler's partition: key -> (oldest, changes)
        uids: set[str] = set()  # every unique id the repository had in this journal
        offending: list[tuple[int, int, str]] = []  # (timestamp, changes, what)
        for key in keys:
            with self._open(key) as source:
                facts = token_facts(source, self._repository)
                self._firsts[key] = batch_range(source)[0]
            for partition, (at, count) in facts.partitions.items():
                first, total = touched.get(partition, (at, 0))
                touched[partition] = (min(first, at), total + count)
            for change in facts.shared:
                if change.key == self._repo_key and change.value is not None:
                    uids.add(_unique_id(change.value))
                elif not change.key.startswith(REPOS):
                    oldest, count = shared.get(change.key, (change.at[0], 0))
                    shared[change.key] = (min(oldest, change.at[0]), count + 1)
                elif change.key != self._repo_key:
                    offending.append((change.at[0], 1, f"graveler {change.key!r}"))
            for change in facts.branches:
                if change.repository != self._repository:
                    continue
                last = branches.get((change.partition, change.key))
                if last is None or change.at > last[0]:
                    branches[change.partition, change.key] = (change.at, change.value)
            staged |= {partition for repository, partition in facts.staged if repository == self._repository}
        named: set[bytes] = set()
        for _, value in branches.values():
            if value is not None:
                branch = pb.Branch()
                try:
                    branch.ParseFromString(unwrap(value)[1])
                except DecodeError:
                    raise InvalidArgument("a journal batch holds a corrupt branch record") from None
                named |= {token.encode() for token in (branch.staging_token, *branch.sealed_tokens) if token}
        self._check_ownership(uids, touched, shared, offending)
        return staged - named

    def _check_ownership(
        self,
        uids: set[str],
        touched: dict[bytes, tuple[int, int]],
        shared: dict[bytes, tuple[int, int]],
        offending: list[tuple[int, int, str]],
    ) -> None:
        """Refuse the journal if a record of the repository changes anything that is not its
        own: its repository partition ``<name>-<unique id>`` (an id its ``repos/<name>`` record
        held in this journal), that partition's staging tokens ``<partition>_<branch>_<uuid>``,
        and in graveler's shared partition only ``repos/<name>``, its namespace claims and its
        deletion marker. Checked before anything is written: a batch in the namespace that
        names the auth partition or another repository's is refused whole."""
        own = {f"{self._repository}-{uid}".encode() for uid in uids}
        for partition, (at, count) in touched.items():
            if partition in own or any(partition.startswith(mine + b"_") for mine in own):
                self._own.add(partition)
            else:
                offending.append((at, count, f"partition {partition!r}"))
        claims = tuple(b"\x00" + uid.encode() for uid in uids)
        markers = {TO_DELETE + mine for mine in own}
        for key, (at, count) in shared.items():
            if (key.startswith(CLAIMS) and key.endswith(claims)) or key in markers:
                self._own_shared.add(key)
            else:
                offending.append((at, count, f"graveler {key!r}"))
        if not offending:
            return
        offending.sort()
        self.progress.refused_changes = sum(count for _, count, _ in offending)
        at, _, what = offending[0]
        self.progress.refused_first = f"{what} at logical time {at}"
        self._report(self.progress)
        raise Refused(
            f"the journal of {self._repository!r} holds {self.progress.refused_changes} changes outside the "
            f"repository (the first: {self.progress.refused_first}); nothing was applied"
        )

    def _records(self, key: str) -> Iterator[ReplayRecord]:
        with self._open(key) as source:
            self.progress.batches_read += 1
            if self._applied is not None and batch_range(source)[1] <= self._applied:
                self.progress.batches_skipped += 1
                return
            for chunk in replay_chunks(source):
                for record in chunk:
                    if record[3] != self._repository:
                        self.progress.records_other += 1
                    elif self._applied is None or _order(record) > self._applied:
                        yield record

    # --- applying ----------------------------------------------------------------------------

    def _replay(self, record: ReplayRecord) -> None:
        at = _order(record)
        if self._applied is not None and at <= self._applied:
            return  # shipped twice (a shipper crashed between writing a batch and deleting its rows)
        timestamp, changes = record[0], record[4]
        for partition, key, value in changes:
            if partition == GRAVELER_PARTITION and key == self._repo_key:
                self._held = value
                continue
            outside = key not in self._own_shared if partition == GRAVELER_PARTITION else partition not in self._own
            if outside:
                # Changed since the first pass checked it (possible only for an unsigned batch).
                raise Refused(f"journal record at {at} changes {partition!r} {key!r}, outside the repository")
            if partition in self._dropped:
                self.progress.dropped_changes += 1
                continue
            rows = self._pending.get(partition)
            if rows is None:
                rows = self._pending[partition] = {}
            if key_kind(key) == STAGED_KIND:
                previous = rows.get(key) or self._flushed_newest.get(partition, {}).get(key)
                if previous is not None and previous[1] == timestamp and not _wins_tie(value, previous[0]):
                    continue
            rows[key] = (value, timestamp)
            if len(rows) >= MAX_APPLY_ROWS:
                self._flush_partition(partition)
        self._applied = at
        self.progress.records_applied += 1
        self._since_checkpoint += 1
        if self._since_checkpoint >= self._checkpoint_records:
            self._flush()

    def _flush(self) -> None:
        for partition in list(self._pending):
            self._flush_partition(partition)
        self._save_checkpoint()
        self._since_checkpoint = 0

    def _flush_partition(self, partition: bytes) -> None:
        rows = self._pending.pop(partition, {})
        if not rows:
            return
        staged = {key: row for key, row in rows.items() if key_kind(key) == STAGED_KIND}
        for key, (value, _) in rows.items():
            if key in staged:
                continue
            if _compare_and_set(key):
                # Written as graveler writes these keys, by compare-and-set: a later one of
                # graveler's is ordered after it by Paxos. A plain write would carry a write
                # time from the journal's clock, which may be ahead of the coordinators' clocks
                # that stamp graveler's later compare-and-sets: those would report success and
                # stay hidden behind it (docs/design/kv.md, "One key, one kind of write").
                if value is None:
                    delete_current(self._kv, partition, key)
                else:
                    replace(self._kv, partition, key, value)
            elif value is None:
                self._kv.delete(partition, key)  # the store's own write time, as graveler's
            else:
                self._kv.set(partition, key, value)
        if not staged:
            return
        puts = [(key, value) for key, (value, _) in staged.items() if value is not None]
        deletes = [key for key, (value, _) in staged.items() if value is None]
        # Staged values are ordered by their logical timestamps: the group's oldest record
        # stamps it. Every later group of the partition replays later records (oldest at or
        # past this group's newest), so the groups stay in order; and no row's write time
        # exceeds the stamp in its envelope (a deletion's is in the partition's deletion mark,
        # journaled with it), which is what a later blind write reads and stamps itself past.
        # Split by bytes too: the sub-writes share the group's timestamp, so their order among
        # themselves changes nothing (each key is in one of them).
        timestamp = min(stamp for _, stamp in staged.values())
        for some_puts, some_deletes in writes_by_weight(puts, deletes, REBUILD_WRITE_BYTES):
            self._kv.apply(partition, some_puts, some_deletes, timestamp=timestamp or None)
        newest = max(stamp for _, stamp in staged.values())
        self._flushed_newest[partition] = {key: row for key, row in staged.items() if row[1] == newest}


# The keys graveler writes and deletes plainly (docs/design/kv.md, "One key, one kind of write"),
# staged values apart: commits (content-addressed), the deletion marker of a repository, the index
# of history hours and the runs of last-access preparation. Every other key is written by
# compare-and-set, as any key a new feature adds is: a plain write of a key graveler then
# changes by compare-and-set could hide those (a Paxos ballot and a plain write time are not
# ordered on one cell), while a compare-and-set of a plainly written key only costs a round.
_PLAIN_KINDS = frozenset({"commit", "repository_deletion"})
_PLAIN_KEYS = (b"history-hours/", b"last-access-runs/")


def _compare_and_set(key: bytes) -> bool:
    return not (key_kind(key) in _PLAIN_KINDS or key.startswith(_PLAIN_KEYS))


_order: Callable[[ReplayRecord], Position] = REPLAY_ORDER


def _stamp_of(key: bytes, stored: bytes) -> int:
    """The logical timestamp a row was written at: a journal row's is in its key (its value
    has no envelope), every other row's in its envelope."""
    return parse_record_key(key)[0] if is_journal_key(key) else unwrap(stored)[0]


def _wins_tie(value: bytes | None, previous: bytes | None) -> bool:
    """Whether a staged change replaces one at the same logical timestamp as the store did.

    Two gravelers may stamp writes of one key alike (each one past the same value it read);
    the store kept one by its own rule, not by the journal's order (writer id, sequence):
    Cassandra keeps a tombstone over a value and the larger value over the smaller, and every
    driver does the same (docs/design/kv.md, apply). Replay keeps the same one."""
    if value is None:
        return True
    return previous is not None and value > previous


def _unique_id(stored: bytes) -> str:
    record = pb.Repository()
    try:
        record.ParseFromString(unwrap(stored)[1])
    except DecodeError:
        raise InvalidArgument("a journal batch holds a corrupt repository record") from None
    return record.unique_id


def _hour_of_key(key: str) -> str:
    for part in key.split("/"):
        if part.startswith("hour="):
            return part[len("hour=") :]
    raise InvalidArgument(f"journal batch {key!r} is not under an hour= folder")


def repository_of(adapter: BlockAdapter, namespace: str) -> str:
    """The repository whose journal the namespace holds; InvalidArgument if none, or if the
    oldest and newest batches name different ones (a namespace reused after a deletion)."""
    bucket = JournalBucket(adapter, namespace)
    keys = bucket.batches()
    if not keys:
        raise NotFound(f"no journal batches under {namespace}/_silt/journal/v1/")
    names = {record.repository for key in {keys[0], keys[-1]} for record in decode_batch(bucket.read(key))}
    if len(names) != 1:
        raise InvalidArgument(f"{namespace} holds the journals of {sorted(names)}: name one with --repository")
    return names.pop()
