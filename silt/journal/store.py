"""JournaledStore: the one choke point through which graveler's KV mutations are journaled.

Every write made inside a JournalContext (silt.journal.context) becomes one atomic
``Store.apply`` in its partition: the mutation itself plus a journal row recording it
(silt.journal.record), so the row exists exactly when the mutation happened. Every value is
stored in an envelope carrying the logical timestamp of its write (silt.journal.envelope):
reads unwrap it and feed it to the hybrid logical clock, so a compare-and-set is stamped
after the value it replaces; blind writes of staged values first read the stamps of the keys
they write and of the partition's deletion mark (observe_staged), then hand their timestamp to
the driver as the write time, so the value a driver keeps is the one the journal orders last,
and a write acknowledged before another was sent is never shadowed by it, whatever the
writers' clocks. Scans hide journal rows.

``raw`` is the store underneath: stored bytes as they are, writes not journaled. It is for
the cleaner dropping unreachable staging tokens, the shipper deleting shipped rows and
rebuild writing stored values back (docs/design/journal.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from silt.errors import InvalidArgument
from silt.journal import envelope
from silt.journal.clock import HybridLogicalClock, process_clock
from silt.journal.context import JournalContext, current_context
from silt.journal.record import (
    AFTER_JOURNAL,
    JOURNAL_PREFIX,
    STAGED_DELETED_AT,
    STAGED_KIND,
    encode_record,
    is_journal_key,
    key_kind,
    record_key,
    staged_key_deleted_at,
)
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv.store import (
    SCAN_CHUNK,
    AllOf,
    CheckedBatch,
    Condition,
    Entry,
    Pair,
    Predicate,
    Store,
    Timestamp,
    ValueWithPredicate,
    check_apply,
)
from silt.telemetry.stores import open_observed_store

if TYPE_CHECKING:
    from silt.config import Config


class JournaledStore(Store):
    def __init__(self, inner: Store, clock: HybridLogicalClock | None = None, enabled: bool = True) -> None:
        self._inner = inner
        self.clock = clock or process_clock()
        self.enabled = enabled

    @property
    def raw(self) -> Store:
        """The store underneath: no envelopes removed, journal rows visible, nothing journaled."""
        return self._inner

    # --- reads ---------------------------------------------------------------------------

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        return self.get_stamped(partition, key)[0]

    def get_stamped(self, partition: bytes, key: bytes) -> tuple[ValueWithPredicate, int]:
        """get, and the logical timestamp of the value's write (0 for a value written before
        journaling)."""
        found = self._inner.get(partition, key)
        timestamp, value = envelope.unwrap(found.value)
        self.clock.observe(timestamp)
        # The predicate stays the stored bytes: a later set_if compares what is stored.
        return ValueWithPredicate(value, found.predicate), timestamp

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        # Entry by entry over the driver's scan, at its own page size (scan_prefix stops at the
        # end of its prefix): scan_chunks is for callers that know how many entries they want.
        observe, magic, header, timestamp_of = (
            self.clock.observe,
            envelope.MAGIC,
            envelope.HEADER_SIZE,
            envelope.TIMESTAMP,
        )
        for key, stored in self._inner.scan(partition, start):
            if key.startswith(JOURNAL_PREFIX):
                # Jump over the journal rows rather than read them: a partition may hold many
                # unshipped ones, and a prefix scan ending near them would page through all.
                yield from self.scan(partition, AFTER_JOURNAL)  # no journal key sorts after it
                return
            if stored.startswith(magic) and len(stored) >= header:
                observe(timestamp_of.unpack_from(stored, len(magic))[0])  # before the value is handed out
                yield Entry(key, stored[header:])
            else:
                yield Entry(key, stored)  # written before journaling: timestamp 0

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        for chunk in self._inner.scan_chunks(partition, start, size):
            # The journal rows are the keys from JOURNAL_PREFIX up to AFTER_JOURNAL.
            if chunk[-1][0] >= JOURNAL_PREFIX and chunk[0][0] < AFTER_JOURNAL:
                first = next((i for i, (key, _) in enumerate(chunk) if JOURNAL_PREFIX <= key < AFTER_JOURNAL), None)
                if first is not None:
                    if first:
                        yield self._unwrapped(chunk[:first])
                    # Jump over the journal rows rather than read them: a partition may hold many
                    # unshipped ones, and a prefix scan ending near them would page through all.
                    for rest in self._inner.scan_chunks(partition, AFTER_JOURNAL, size):
                        yield self._unwrapped(rest)
                    return
            yield self._unwrapped(chunk)

    def _unwrapped(self, chunk: Sequence[Pair]) -> list[Pair]:
        """The entries' values out of their envelopes, the clock past every one's timestamp.

        What envelope.unwrap does, in line: every listing runs through this loop once per key.
        """
        magic, header, timestamp_of = envelope.MAGIC, envelope.HEADER_SIZE, envelope.TIMESTAMP
        newest = 0
        values: list[Pair] = []
        for pair in chunk:
            key, stored = pair
            if stored.startswith(magic) and len(stored) >= header:
                timestamp = timestamp_of.unpack_from(stored, len(magic))[0]
                if timestamp > newest:
                    newest = timestamp
                values.append((key, stored[header:]))
            else:
                values.append(pair)  # written before journaling: timestamp 0
        self.clock.observe(newest)  # before any of them is handed out, as get() does
        return values

    # --- writes --------------------------------------------------------------------------

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        if not self.enabled and key_kind(key) != STAGED_KIND:
            self._inner.set(partition, key, value)
            return
        self.apply(partition, [(key, value)])

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        if not self.enabled:
            self._inner.set_if(partition, key, value, predicate)
            return
        self.apply(partition, [(key, value)], condition=(key, predicate))

    def delete(self, partition: bytes, key: bytes) -> None:
        if not self.enabled and key_kind(key) != STAGED_KIND:
            self._inner.delete(partition, key)
            return
        self.apply(partition, [], [key])

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
        *,
        before_write: Callable[[], None] | None = None,
        unjournaled: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        """Apply puts and deletes (values unwrapped) with their journal row.

        unjournaled: rows written in the same batch as they are, without an envelope and
        outside the journal row (the cleaner's drop records, written with the branch update
        that makes the tokens unreachable: engine/core/drop_records.py).

        before_write, if given, is called once the write's timestamp is chosen and right before
        the write: a check that raises there (a caller's deadline) writes nothing, and a write
        that passes it carries a stamp from before the check, never a fresher one (a process
        paused between a check and its stamp would otherwise write later than it checked).

        The logical timestamp is this store's to choose, with one exception: a blind write of
        staged values may be given the logical timestamp another writer chose for it (a
        conditional staging write finished on its owner's behalf, engine/core/staging.py),
        so that it lands exactly as the owner's own write would; several such writes finished at
        once (a conditional write of several keys) give each put its own (a tuple). Anything
        else with a timestamp is InvalidArgument."""
        check_apply(partition, [*puts, *unjournaled], deletes, condition, timestamp)
        keys = [*(k for k, _ in puts), *deletes]
        for key, _ in unjournaled:
            if is_journal_key(key):
                raise InvalidArgument("KV keys under journal/ are the journal's own")
        for key in keys:
            if is_journal_key(key):
                raise InvalidArgument("KV keys under journal/ are the journal's own")
        # Staged values are written blindly by many writers, so only the write time can make the
        # value kept the one the journal orders last. Every other key changes by compare-and-set,
        # ordered by what the writer read; a plain write or delete of such a key (deleting a
        # branch) must sort after the last compare-and-set, whose write time on Cassandra is its
        # Paxos ballot from the coordinator's clock, so it takes the coordinator's clock too.
        blind_staged = not condition and all(key_kind(key) == STAGED_KIND for key in keys)
        if timestamp is not None and not blind_staged:
            raise InvalidArgument("JournaledStore.apply: the logical clock chooses the write timestamp")
        if unjournaled and blind_staged:
            raise InvalidArgument("JournaledStore.apply: unjournaled rows go with a compare-and-set or plain write")
        if not self.enabled and not blind_staged:
            if before_write is not None:
                before_write()
            self._inner.apply(partition, [*puts, *unjournaled], deletes, condition)
            return
        # Even unjournaled, staged values keep their envelope and write time: conditional staging
        # writes compare the timestamps of what they read (StagingStore.read_for_write).
        stamps: tuple[int, ...] | None = None
        if timestamp is None:
            if blind_staged:
                # A blind write reads the stamps it could shadow first (see observe_staged).
                self.observe_staged(partition, keys)
            logical = self.clock.now()
        elif isinstance(timestamp, tuple):
            # Each put at its own stamp; the journal row at the newest of them.
            stamps = timestamp
            logical = max(stamps)
            self.clock.observe(logical)
        else:
            self.clock.observe(timestamp)
            logical = timestamp
        stored = [
            (bytes(key), envelope.wrap(logical if stamps is None else stamps[i], bytes(value)))
            for i, (key, value) in enumerate(puts)
        ]
        if deletes and blind_staged:
            # A deletion leaves nothing to read: its time stays in the partition's mark and in
            # each deleted key's own (what a conditional writer's guard is judged against).
            mark = envelope.wrap(logical, b"")
            stored.append((STAGED_DELETED_AT, mark))
            marked = [bytes(key) for key in deletes if not key.startswith(STAGED_DELETED_AT)]
            stored += [(staged_key_deleted_at(key), mark) for key in marked]
        rows = list(stored)
        context = current_context() if self.enabled else None
        if context is not None:
            record = self._record(context, logical, partition, stored, deletes)
            rows.append((record_key(logical, self.clock.writer_id, record.sequence), encode_record(record)))
        rows += unjournaled
        if before_write is not None:
            before_write()
        written_at: Timestamp | None = logical if blind_staged else None
        if stamps is not None:
            written_at = stamps + (logical,) * (len(rows) - len(stamps))
        self._inner.apply(partition, rows, deletes, condition, written_at)

    def apply_checked(self, batch: CheckedBatch) -> None:
        # Through apply: its own checks (journal keys, timestamps) and the journal row.
        self.apply(*batch.as_arguments())

    def observe_staged(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """Read keys' stored values and the partition's deletion mark in one request, and make
        the clock pass every stamp found; the stored values of those that exist.

        What makes the order of acknowledged staged writes independent of clocks: a write or a
        deletion acknowledged before this read started is seen by it (a quorum read on
        Cassandra, the one database on SQLite), a deletion through the mark written with it,
        so the timestamp chosen after it is greater, and last-write-wins keeps the later one
        whatever the writers' clocks (docs/design/journal.md, "Order of staged writes")."""
        found = self._inner.get_many(partition, [*keys, STAGED_DELETED_AT])
        magic, header, timestamp_of = envelope.MAGIC, envelope.HEADER_SIZE, envelope.TIMESTAMP
        newest = 0
        for stored in found.values():
            if stored.startswith(magic) and len(stored) >= header:
                newest = max(newest, timestamp_of.unpack_from(stored, len(magic))[0])
        # Two past, not one: a conditional write stamps itself one past what it judged
        # (engine/core/staging.py, set_if), and a write it did not see must win over it.
        self.clock.observe(newest + 1 if newest else 0)
        return found

    def _record(
        self,
        context: JournalContext,
        logical: int,
        partition: bytes,
        stored: list[tuple[bytes, bytes]],
        deletes: Sequence[bytes],
    ) -> Record:
        changes = [
            Change(partition=partition, key=key, op=Change.PUT, value=value, kind=key_kind(key))
            for key, value in stored
        ]
        changes += [Change(partition=partition, key=key, op=Change.DELETE, kind=key_kind(key)) for key in deletes]
        return Record(
            logical_timestamp=logical,
            writer_id=self.clock.writer_id,
            sequence=self.clock.next_sequence(),
            client_id=context.client_id,
            repository=context.repository,
            repository_partition=context.repository_partition,
            event_type=context.event_type,
            changes=changes,
        )

    def close(self) -> None:
        self._inner.close()


def raw_store(store: Store) -> Store:
    """The unjournaled store under store (store itself when it is not journaled)."""
    return store.raw if isinstance(store, JournaledStore) else store


def journaled(store: Store, enabled: bool = True) -> JournaledStore:
    """store journaled with this process's clock (store itself if it is journaled already)."""
    return store if isinstance(store, JournaledStore) else JournaledStore(store, enabled=enabled)


def open_graveler_store(config: Config) -> JournaledStore:
    """Graveler's KV as every process reading or writing graveler keys must open it: values
    unwrapped, mutations journaled unless graveler.journal.enabled is false."""
    return JournaledStore(open_observed_store(config.database), enabled=config.graveler.journal.enabled)
