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

For a gone P: the rows of every token in its saved list are deleted, then the list's keys,
then P's rows of the shared partition, last: a crash anywhere leaves those rows, and the next
round finds P again and finishes.
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
from silt.journal.ship_tokens import ShippedTokens
from silt.kv.store import MAX_APPLY_ROWS, Store, scan_prefix

log = logging.getLogger(__name__)

# graveler's key schema (services/graveler: refs/manager.py, claims.py, lifecycle.py), which
# silt/ may not import.
GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
CLAIMS = b"ns_claims/"
TO_DELETE = b"to_delete/"

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
    def __init__(self, kv: Store) -> None:
        self._kv = kv  # raw: journal rows visible, deletes unjournaled

    def sweep(self) -> Swept:
        swept = Swept()
        partitions, names = self._named_in_rows()
        if not partitions and not names:
            return swept
        live = self._live()  # read after the rows: see the module's docstring
        gone = {p for p in partitions if p not in live.partitions and _unique_id_of(p) not in live.unique_ids}
        gone_names = {n for n in names if n not in live.names} if live.names_complete else set()
        for partition in sorted(gone):
            swept.rows += self._drop_tokens(partition.encode())
        if gone or gone_names:
            swept.rows += self._drop_shared_rows(gone, gone_names)
        swept.partitions = sorted(gone)
        if swept.rows:
            log.info("dropped %d journal rows of deleted repositories %s", swept.rows, ", ".join(swept.partitions))
        return swept

    def _named_in_rows(self) -> tuple[set[str], set[str]]:
        partitions: set[str] = set()
        names: set[str] = set()
        for entry in scan_prefix(self._kv, GRAVELER_PARTITION, JOURNAL_PREFIX):
            record = decode_record(entry.value)
            if record.repository_partition:
                partitions.add(record.repository_partition)
            elif record.repository:
                names.add(record.repository)
        return partitions, names

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

    def _drop_tokens(self, partition: bytes) -> int:
        tokens = ShippedTokens(self._kv, partition)
        dropped = 0
        for saved in list(tokens.entries()):
            dropped += self._delete_rows(saved.partition, lambda _: True)
            tokens.forget(saved.token)
        return dropped

    def _drop_shared_rows(self, partitions: set[str], names: set[str]) -> int:
        def gone(value: bytes) -> bool:
            record = decode_record(value)
            if record.repository_partition:
                return record.repository_partition in partitions
            return bool(record.repository) and record.repository in names

        return self._delete_rows(GRAVELER_PARTITION, gone)

    def _delete_rows(self, partition: bytes, chosen: _Chooser) -> int:
        """Delete the journal rows of partition that chosen picks, a chunk at a time; how many."""
        deleted = 0
        for keys, newest in _chunks(self._kv, partition, chosen):
            # After every row's own write time, as the shipper deletes (shipper.py).
            delete_time = max(time.time_ns() // 1000, newest + 1)
            self._kv.apply(partition, [], keys, timestamp=delete_time)
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
