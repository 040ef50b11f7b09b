"""Journal rows of deleted repositories: found in the shared ``graveler`` partition and dropped.

A repository's deletion removes its partitions whole, journal rows included (graveler's
``Lifecycle._clean_deleted``): the journaled deletion of its record makes them moot
(docs/design/journal.md). Two kinds of its rows live elsewhere and would otherwise stay in KV
for good, never shipped (the shipper ships live repositories only) and, for the first kind,
read again by every round of every other repository:

* its rows in the shared ``graveler`` partition: its creation, metadata changes, the deletion
  itself;
* the rows of staging tokens it dropped before it was deleted, which only the shipper's saved
  token list still leads to (silt/journal/ship_tokens.py; that list is not in the repository
  partition, so it outlives it).

A repository partition P named by rows of the shared partition is **gone** when, read after
those rows, no repository record (``repos/``), namespace claim (``ns_claims/``) or pending
deletion (``to_delete/``) carries P's unique id. Why that is final: a creation writes its claim
before anything else that names P, and keeps it as long as the repository lives; a claim goes
only when the creation failed (it never writes the record afterwards) or after the record was
deleted, and a deletion writes ``to_delete/P`` before it deletes the record and removes it
only once the partitions are clean. So nothing of P is live, in progress or still being
cleaned. Rows that name a repository only by name (records made before the call resolved it)
are judged the same way by name.

That argument needs each read to see every write acknowledged before it, and more: a write
still being committed while the reads run may be seen by the row scan and missed by the scan of
the live state (on Cassandra the two are separate quorum reads of different key ranges, and a
creation's compare-and-set, its claim and its journal row in one batch, may reach one replica
before the others). So P is judged only once the newest row of the shared partition naming it
is older than SAFETY_SECONDS (its logical timestamp, the journal's clock, against the
shipper's; the two are assumed to agree within far less than that): a write of P that the row
scan saw is then long finished and visible to every quorum read, the live state's included,
while a write still in flight is recent and keeps P for a later round. The Store has no
SERIAL scan to close the window instead; the rows of a deleted repository merely wait longer
in KV, never shipped and harmless.

For a gone P: the rows of every token in its saved list are deleted, then the list's keys,
then P's rows of the shared partition, last: a crash anywhere leaves those rows, and the next
round finds P again and finishes. The deletion's own clean-up drops the saved list first
(drop_saved_tokens, from engine/features/lifecycle.py), so a repository whose shared rows a
shipper racing its deletion shipped (and which no round finds again here) leaves nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from silt.graveler.v1 import model_pb2 as pb
from silt.journal.envelope import unwrap
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.ship_tokens import TOKEN_GRACE_SECONDS, ShippedTokens
from silt.kv.store import MAX_APPLY_ROWS, Store, scan_prefix

log = logging.getLogger(__name__)

# graveler's key schema (services/graveler: refs/manager.py, claims.py, lifecycle.py), which
# silt/ may not import.
GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
CLAIMS = b"ns_claims/"
TO_DELETE = b"to_delete/"

# A partition is judged gone only once the newest shared row naming it is this old: far beyond
# any request's deadline and any write's commit, and the same grace a dropped token is kept
# scanned (silt/journal/ship_tokens.py).
SAFETY_SECONDS = TOKEN_GRACE_SECONDS

# Picks the journal rows to delete, by their stored value.
_Chooser = Callable[[bytes], bool]


@dataclass
class Swept:
    partitions: list[str] = field(default_factory=list)  # repository partitions found gone
    rows: int = 0  # journal rows deleted, shared partition and tokens'


@dataclass
class _Live:
    partitions: set[str] = field(default_factory=set)
    unique_ids: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    names_complete: bool = True  # False: a record without a readable name was found


def _unique_id_of(partition: str) -> str:
    # "<name>-<unique id>": names may hold "-", unique ids (uuid hex) do not.
    return partition.rsplit("-", 1)[-1]


def _repository(stored: bytes) -> pb.Repository | None:
    record = pb.Repository()
    try:
        record.ParseFromString(unwrap(stored)[1])
    except DecodeError:
        return None
    return record


class DeletedRepositories:
    def __init__(
        self, kv: Store, clock: Callable[[], float] = time.time, safety_seconds: float = SAFETY_SECONDS
    ) -> None:
        self._kv = kv  # raw: journal rows visible, deletes unjournaled
        self._clock = clock
        self._safety_seconds = safety_seconds

    def sweep(self) -> Swept:
        swept = Swept()
        partitions, names = self._named_in_rows()
        if not partitions and not names:
            return swept
        live = self._live()  # read after the rows: see the module's docstring
        gone = {p for p in partitions if p not in live.partitions and _unique_id_of(p) not in live.unique_ids}
        gone_names = {n for n in names if n not in live.names} if live.names_complete else set()
        for partition in sorted(gone):
            swept.rows += drop_saved_tokens(self._kv, partition.encode())
        if gone or gone_names:
            swept.rows += self._drop_shared_rows(gone, gone_names)
        swept.partitions = sorted(gone)
        if swept.rows:
            log.info("dropped %d journal rows of deleted repositories %s", swept.rows, ", ".join(swept.partitions))
        return swept

    def _named_in_rows(self) -> tuple[set[str], set[str]]:
        """The partitions (and names) the shared rows name whose newest row is old enough to judge."""
        newest_of_partition: dict[str, int] = {}
        newest_of_name: dict[str, int] = {}
        for entry in scan_prefix(self._kv, GRAVELER_PARTITION, JOURNAL_PREFIX):
            record = decode_record(entry.value)
            if record.repository_partition:
                newest = newest_of_partition
                named = record.repository_partition
            elif record.repository:
                newest, named = newest_of_name, record.repository
            else:
                continue
            newest[named] = max(newest.get(named, 0), record.logical_timestamp)
        settled = int((self._clock() - self._safety_seconds) * 1_000_000)
        return (
            {p for p, ts in newest_of_partition.items() if ts < settled},
            {n for n, ts in newest_of_name.items() if ts < settled},
        )

    def _live(self) -> _Live:
        live = _Live()
        # Records, then claims, then pending deletions: the order a repository leaves them in
        # reversed, so one leaving while this reads is still seen in one of them.
        for family in (REPOS, CLAIMS, TO_DELETE):
            for entry in scan_prefix(self._kv, GRAVELER_PARTITION, family):
                record = _repository(entry.value)
                if family == CLAIMS:
                    # The key ends with the claimant's unique id, whatever its value holds.
                    live.unique_ids.add(entry.key.rsplit(b"\x00", 1)[-1].decode("utf-8", "replace"))
                elif family == TO_DELETE:
                    live.partitions.add(entry.key[len(TO_DELETE) :].decode("utf-8", "replace"))
                if record is None or not record.name:
                    live.names_complete = False
                    continue
                live.names.add(record.name)
                live.partitions.add(f"{record.name}-{record.unique_id}")
                if record.unique_id:
                    live.unique_ids.add(record.unique_id)
        return live

    def _drop_shared_rows(self, partitions: set[str], names: set[str]) -> int:
        def gone(value: bytes) -> bool:
            record = decode_record(value)
            if record.repository_partition:
                return record.repository_partition in partitions
            return bool(record.repository) and record.repository in names

        return _delete_rows(self._kv, GRAVELER_PARTITION, gone)


def drop_saved_tokens(kv: Store, repository_partition: bytes) -> int:
    """Delete the journal rows of every token in the saved list of a deleted repository (its
    partition `repository_partition`), each token's key after its rows; how many rows. kv is
    the raw store. Only for a repository whose record is gone: its tokens are not shipped."""
    tokens = ShippedTokens(kv, repository_partition)
    dropped = 0
    # Page by page, deleting behind the scan's cursor: the list is never read whole.
    for saved in tokens.entries():
        dropped += _delete_rows(kv, saved.partition, lambda _: True)
        tokens.forget(saved.token)
    return dropped


def _delete_rows(kv: Store, partition: bytes, chosen: _Chooser) -> int:
    """Delete the journal rows of partition that chosen picks, a chunk at a time; how many."""
    deleted = 0
    for keys, newest in _chunks(kv, partition, chosen):
        # After every row's own write time, as the shipper deletes (shipper.py).
        delete_time = max(time.time_ns() // 1000, newest + 1)
        kv.apply(partition, [], keys, timestamp=delete_time)
        deleted += len(keys)
    return deleted


def _chunks(kv: Store, partition: bytes, chosen: _Chooser) -> Iterator[tuple[list[bytes], int]]:
    keys: list[bytes] = []
    newest = 0
    for entry in scan_prefix(kv, partition, JOURNAL_PREFIX):
        if not chosen(entry.value):
            continue
        keys.append(entry.key)
        newest = max(newest, decode_record(entry.value).logical_timestamp)
        if len(keys) == MAX_APPLY_ROWS:
            yield keys, newest
            keys, newest = [], 0
    if keys:
        yield keys, newest
