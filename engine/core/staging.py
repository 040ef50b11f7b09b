"""Staged writes: one KV partition per staging token (docs/design/kv.md).

Keys ``key/<object key>`` hold the staged values, written and deleted only by plain writes
stamped with the journal's logical clock (unconditional and conditional writes alike), each
stamped after what it replaces or deletes and after the partition's deletion mark
``deleted-at`` (silt/journal/store.py, observe_staged); each deletion also stamps the key's own
mark ``deleted-at/key/<object key>``, against which a guard's write is judged. Keys ``guard/<object key>`` are the
conditional writers' guards, written only by compare-and-set: on Cassandra a key written both
ways is unsafe (a plain write and a Paxos ballot are not ordered on one cell), so conditional
writers exclude each other on the guard and then write the value plainly
(docs/design/lockfree-staging.md, conditional writer flow). A guard, once written, is never
deleted while the token is in use: whoever drops its key replaces it with a fence, a guard that
admits nothing. So a key's guard is absent only before its first conditional write, and a copy
of that write conditioned on the absence, still in flight after a later copy applied, can never
apply after a reset (AllOf.absence_is_final: the store may send it again early). Every scan of staged values reads
the ``key/`` prefix only, so guards never show in listings or commits. The guard of the empty
key, ``guard/``, is the token's own: whether it still admits conditional writes (ADMISSION,
closed by whoever builds from the sealed token); a guard in a sealed token may be a fence, set
by a conditional writer of a newer token that judged the key through it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import takewhile
from operator import itemgetter

from engine.core.model import StagingToken
from engine.core.values import Columns, KeyValue, Value
from silt.errors import Aborted, NotFound, OutcomeUnknown, PredicateFailed, ResendRefused
from silt.graveler.v1 import model_pb2 as pb
from silt.journal import envelope
from silt.journal.record import (
    STAGED_ADMISSION,
    is_journal_key,
    parse_record_key,
    staged_key_deleted_at,
)
from silt.journal.store import JournaledStore, journaled, raw_store
from silt.kv import Store
from silt.kv.conditional import delete_current
from silt.kv.store import SCAN_CHUNK, AllOf, Predicate, scan_prefix

KEY_PREFIX = b"key/"
GUARD_PREFIX = b"guard/"
# The guard of the empty object key (no object key is empty): whether the token admits
# conditional writes. Every conditional writer's compare-and-set writes it OPEN, on condition
# that it is as the writer read it (absent or OPEN; concurrent writers of other keys write the
# same value and so never fail each other). Whoever builds from a sealed token or drops it
# sets it CLOSED first (StagingStore.close), so no conditional write is admitted into the token
# afterwards, and finishes the ones admitted before. Written by compare-and-set, as guards are,
# and skipped wherever guards are read as writes; a dropped token keeps it CLOSED until the
# journal shipper forgets the token, after a grace no writer's deadline outlasts.
# CLOSED sorts after OPEN: on a Cassandra whose compare-and-sets of one millisecond carry one
# write time (before 2.2), the larger value is kept, and a close must win over the open it
# was ordered after.
ADMISSION = STAGED_ADMISSION
OPEN = b"1 open"
CLOSED = b"2 closed"
# A guard's value: the logical timestamp of the write it admitted, then the staged value, whose
# admitted_over names the guard it replaced: _guard_id of that guard's value, or _NO_GUARD.
_GUARD_TIMESTAMP = struct.Struct(">Q")
_NO_GUARD = b"\x00"
# Guards a guard names of its line (StagedValue.admitted_over and lineage): how many writers of
# one key may go after a writer whose compare-and-set outcome was lost before it can no longer
# tell whether its own applied. 16 bytes each.
_LINEAGE = 16
# Random bytes in every guard (StagedValue.nonce): two guards are never equal.
_NONCE_BYTES = 8
log = logging.getLogger(__name__)
# A staged value's first bytes as stored: its precedence field (StagedValue.precedence, tag 15
# varint), written before every other field. Two writes of a key at one stamp are a blind write
# that never saw the value a conditional write judged (its writer's clock behind that value's
# stamp) and the conditional write stamped one past it: the blind one landed after the
# judgement and must win. Every store keeps the larger value at equal stamps (Cassandra's rule),
# and the larger is the blind write's. Protobuf reads fields in any order: no slicing.
_CONDITIONAL = b"\x78\x01"
_BLIND = b"\x78\x02"
# Compare-and-sets a close makes before it gives up (each lost only to a conditional writer
# that got in just before: at most the writers then in flight).
_CLOSE_ATTEMPTS = 20
# Staged keys deleted by one KV write when many go.
_DELETE_CHUNK = 100
# Bytes of keys one journaled deletion of staged keys carries, each key counted four times (its
# delete, its own deletion mark, and both again in the journal row): long object keys make
# fewer per write, under Cassandra's batch size limit.
_DELETE_KEY_BYTES = 4 * 1024


@dataclass(frozen=True)
class Staged:
    """What a conditional writer read of one key in one token: the staged value (None: nothing
    staged; a tombstone is a value), the predicate of the key's guard (None: no guard), and the
    newest stamp the judgement rests on (the value's or the partition's deletion mark's; -1:
    neither; None: a value written before stamps, whose write time no stamp orders), and the
    guard's value as read (None: no guard)."""

    value: Value | None
    guard: Predicate | None
    judged_at: int | None = -1
    guard_value: bytes | None = None
    # The token's ADMISSION row as read (None: absent), and whether it was CLOSED.
    admission: Predicate | None = None
    closed: bool = False

    def judging(self, stamp: int) -> Staged:
        """This read, its judgement also resting on a value stamped stamp (found in a sealed
        token: the conditional write must be stamped past it too)."""
        if self.judged_at is None or stamp <= self.judged_at:
            return self
        return replace(self, judged_at=stamp)


def new_token(repo_partition: bytes, branch: str) -> StagingToken:
    # Names the repository and branch so an operator can tell whose partition it is.
    return StagingToken(f"{repo_partition.decode()}_{branch}_{uuid.uuid4().hex}")


class StagingStore:
    def __init__(self, kv: Store) -> None:
        # Journaled (graveler's store is already): staged values carry their logical timestamp.
        self.kv: JournaledStore = journaled(kv)

    def set(
        self,
        token: StagingToken,
        key: bytes,
        value: Value,
        before_write: Callable[[], None] | None = None,
        *,
        at: int | None = None,
        past: Sequence[StagingToken] = (),
    ) -> int:
        """Stage value blindly; the write's stamp. before_write is called once the stamp is
        chosen, right before the write (JournaledStore.apply): a deadline checked there never
        lets a write land stamped after the check.

        The stamp passes every stamp of key found in token and in past (the branch's sealed
        tokens, which a conditional writer judges when token has nothing for the key, stamping
        itself one past what it found there: a blind write it did not see must still win).
        at: the stamp an earlier attempt of this very write chose (written again into the
        branch's new token after a commit or compaction sealed the one it went to): the same
        write at the same time, never a later one, which would hide what writers ordered after
        the first attempt wrote meanwhile."""
        return self._write_blind(token, [(key, value)], before_write, at, past)

    def set_many(
        self,
        token: StagingToken,
        values: Sequence[tuple[bytes, Value]],
        before_write: Callable[[], None] | None = None,
        *,
        at: int | None = None,
        past: Sequence[StagingToken] = (),
    ) -> int:
        """set for each (key, value), in one atomic write at one stamp: every value is staged or none."""
        return self._write_blind(token, values, before_write, at, past)

    def _write_blind(
        self,
        token: StagingToken,
        values: Sequence[tuple[bytes, Value]],
        before_write: Callable[[], None] | None,
        at: int | None,
        past: Sequence[StagingToken],
    ) -> int:
        partition = token.encode()
        rows = [(KEY_PREFIX + key, _encode(value, _BLIND)) for key, value in values]
        if at is None:
            keys = [key for key, _ in rows]
            for sealed in past:
                self.kv.observe_staged(sealed.encode(), keys)
            self.kv.observe_staged(partition, keys)
            at = self.kv.clock.now()
        self.kv.apply(partition, rows, timestamp=at, before_write=before_write)
        return at

    def read_for_write(self, token: StagingToken, key: bytes) -> Staged:
        """The staged value of key in token as a conditional write must judge it, and its guard.

        A guard admitting a write newer than the staged value means its writer has not written
        yet, or died before it could: the write is finished here, with the writer's value at
        the writer's logical timestamp, so it lands exactly as the writer's own would (same
        bytes, same write time; a later write of the key still wins) and is the value judged.
        """
        partition = token.encode()
        # The value before the guard: deleters of staged keys fence the guard first (drop_key,
        # drop_under, drop), so a value found deleted is never brought back from a guard read
        # before the deletion.
        # With the partition's deletion mark, so that this write's timestamp passes a deletion.
        # With the key's own deletion mark: the guard may have outlived a deletion of the key
        # (deleted first, then this guard's writer admitted on it), the writer's value stamped
        # before the deletion and so hidden by it; such a write is older than what the key holds
        # (nothing) and is not finished again.
        found = self.kv.observe_staged(partition, [KEY_PREFIX + key, staged_key_deleted_at(KEY_PREFIX + key)])
        stored = found.get(KEY_PREFIX + key)
        value: Value | None = None
        written_at = -1
        legacy = False
        if stored is not None:
            written_at, data = envelope.unwrap(stored)
            legacy = data is stored
            value = _decode(data)
        deleted = found.get(staged_key_deleted_at(KEY_PREFIX + key))
        if deleted is not None:
            written_at = max(written_at, envelope.unwrap(deleted)[0])
        # The judgement rests on the value or the key's deletion, whichever is newer (not on the
        # partition's mark, which other keys' deletions move: a blind write of this key that
        # the condition never saw must still be stamped past this write).
        judged_at = written_at
        admission, closed = self._admission(partition)
        try:
            guard = self.kv.get(partition, GUARD_PREFIX + key)
        except NotFound:
            return Staged(value, None, None if legacy else judged_at, admission=admission, closed=closed)
        admitted_at, admitted, admitted_with, fence = _decode_guard(guard.value)
        self.kv.clock.observe(admitted_at)
        if admitted_at > judged_at and not fence:
            # The keys admitted with this one are finished in the same write, so that a reader
            # sees the writer's keys all staged or none of them.
            rows = [(KEY_PREFIX + key, _encode(admitted, _CONDITIONAL), admitted_at)]
            rows += [row for other in admitted_with if (row := self._unfinished(partition, other)) is not None]
            self.kv.apply(partition, [(k, v) for k, v, _ in rows], timestamp=tuple(at for _, _, at in rows))
            value, judged_at, legacy = admitted, admitted_at, False
        return Staged(value, guard.predicate, None if legacy else judged_at, guard.value, admission, closed)

    def _admission(self, partition: bytes) -> tuple[Predicate | None, bool]:
        """The token's ADMISSION row's predicate (None: absent) and whether it is CLOSED."""
        try:
            found = self.kv.get(partition, ADMISSION)
        except NotFound:
            return None, False
        return found.predicate, found.value == CLOSED

    def _unfinished(self, partition: bytes, key: bytes) -> tuple[bytes, bytes, int] | None:
        """The staged row that key's guard admitted and its writer has not written yet (with its
        stamp), or None: what read_for_write finishes, for a key admitted with another."""
        found = self.kv.observe_staged(partition, [KEY_PREFIX + key, staged_key_deleted_at(KEY_PREFIX + key)])
        judged_at = -1
        for stored in (found.get(KEY_PREFIX + key), found.get(staged_key_deleted_at(KEY_PREFIX + key))):
            if stored is not None:
                judged_at = max(judged_at, envelope.unwrap(stored)[0])
        try:
            guard = self.kv.get(partition, GUARD_PREFIX + key)
        except NotFound:
            return None
        admitted_at, admitted, _, fence = _decode_guard(guard.value)
        self.kv.clock.observe(admitted_at)
        if admitted_at <= judged_at or fence:
            return None
        return KEY_PREFIX + key, _encode(admitted, _CONDITIONAL), admitted_at

    def set_if(
        self,
        token: StagingToken,
        key: bytes,
        value: Value,
        read: Staged,
        before_write: Callable[[], None] | None = None,
    ) -> None:
        """Stage value only if no conditional writer of key in token got in since read
        (PredicateFailed otherwise): a compare-and-set of the key's guard, admitting this write
        at a logical timestamp just past what was judged, then the value written plainly at
        that timestamp.

        Just past, not now: the write supersedes the value judged, and nothing else. A blind
        write of the key stamps itself at least two past every stamp it read (observe_staged),
        so one that landed after this judgement, which the condition never saw, is stamped past
        this write whatever the clocks and wins over it: the conditional write is then ordered
        before it, as its judgement was. One that landed before the judgement was judged. A
        writer that dies between the two steps leaves its write to the next conditional writer
        of the key (read_for_write). before_write is called once the timestamp is chosen, before
        the guard is written (as for set).

        A compare-and-set of the guard whose outcome the store could not tell (OutcomeUnknown:
        a Paxos round cut short, after which another writer changed the guard) is settled from
        the guard as it is now (_guard_landed): landed, the write goes on; certainly not,
        PredicateFailed, and the caller judges its condition again on what the other writer
        staged; undecidable, the OutcomeUnknown is passed on."""
        partition = token.encode()
        # A value from before stamps was written at the coordinator's time, which no logical
        # stamp orders: a write over it takes the clock's time, as every write did then.
        at = self.kv.clock.now() if read.judged_at is None else max(read.judged_at + 1, 1)
        if before_write is not None:
            before_write()
        guard = _encode_guard(at, value, read.guard_value)
        try:
            self.kv.apply(
                partition,
                [(GUARD_PREFIX + key, guard), (ADMISSION, OPEN)],
                condition=AllOf([(GUARD_PREFIX + key, read.guard), (ADMISSION, read.admission)], absence_is_final=True),
            )
        except OutcomeUnknown as unknown:
            if not self._guard_landed(partition, key, guard, read, unknown):
                log.warning("conditional staging write of %r: %s; the guard shows it did not apply", key, unknown)
                raise PredicateFailed(f"conditional staging write of {key!r}: another writer got in first") from None
            log.warning("conditional staging write of %r: %s; the guard shows it applied", key, unknown)
            if self._admission(partition)[1]:
                return  # closed since: its closer finishes (or finished) what the token admitted
        self.kv.apply(partition, [(KEY_PREFIX + key, _encode(value, _CONDITIONAL))], timestamp=at)

    def set_if_many(
        self,
        token: StagingToken,
        writes: Sequence[tuple[bytes, Value, Staged]],
        before_write: Callable[[], None] | None = None,
    ) -> None:
        """set_if for several keys of token as one compare-and-set: each (key, value, read) is
        staged only if no conditional writer of any of the keys got in since its read, and
        either all are or none is (PredicateFailed).

        The guards of every key are written in one conditional KV write (one partition, the
        token's: one Paxos round on Cassandra, one transaction on SQLite), each admitting its
        own write at its own stamp, just past what was judged for that key, and naming the
        other keys. Then the values are written in one plain KV write, each at its own stamp,
        so that a reader sees all of them or none. A writer that dies between the two leaves
        them to the next conditional writer of any of the keys, who writes all of them
        (read_for_write)."""
        partition = token.encode()
        stamps = [
            self.kv.clock.now() if read.judged_at is None else max(read.judged_at + 1, 1) for _, _, read in writes
        ]
        keys = [key for key, _, _ in writes]
        guards = [
            (GUARD_PREFIX + key, _encode_guard(at, value, read.guard_value, [other for other in keys if other != key]))
            for (key, value, read), at in zip(writes, stamps, strict=True)
        ]
        if before_write is not None:
            before_write()
        conditions = [(GUARD_PREFIX + key, read.guard) for key, _, read in writes]
        # The keys were read one after another: the last read of the admission row is the newest.
        admission = writes[-1][2].admission
        try:
            self.kv.apply(
                partition,
                [*guards, (ADMISSION, OPEN)],
                condition=AllOf([*conditions, (ADMISSION, admission)], absence_is_final=True),
            )
        except OutcomeUnknown as unknown:
            # One compare-and-set wrote every guard or none: any key whose line tells, tells.
            if not self._guards_landed(
                partition,
                [(key, guard, read) for (key, _, read), (_, guard) in zip(writes, guards, strict=True)],
                unknown,
            ):
                log.warning(
                    "conditional staging write of %d keys: %s; the guards show it did not apply", len(writes), unknown
                )
                raise PredicateFailed(
                    "conditional staging write of several keys: another writer got in first"
                ) from None
            log.warning("conditional staging write of %d keys: %s; the guards show it applied", len(writes), unknown)
            if self._admission(partition)[1]:
                return  # closed since: its closer finishes (or finished) what the token admitted
        values = [(KEY_PREFIX + key, _encode(value, _CONDITIONAL)) for key, value, _ in writes]
        self.kv.apply(partition, values, timestamp=tuple(stamps))

    def close(self, token: StagingToken) -> None:
        """Admit no more conditional writes into token (CLOSED), then finish every write one
        admitted whose writer has not written it yet: what a commit or compaction does before
        it reads a sealed token, so that it reads every conditional write admitted into the
        token, and a conditional writer whose compare-and-set succeeded knows its write is in
        whatever was built from the token (or still in the token)."""
        partition = token.encode()
        self._close_admission(token)
        for guard in list(scan_prefix(self.kv, partition, GUARD_PREFIX)):
            if guard.key == ADMISSION:
                continue
            key = guard.key[len(GUARD_PREFIX) :]
            rows = [row for row in [self._unfinished(partition, key)] if row is not None]
            if rows:
                admitted_with = _decode_guard(guard.value)[2]
                rows += [row for other in admitted_with if (row := self._unfinished(partition, other)) is not None]
                self.kv.apply(partition, [(k, v) for k, v, _ in rows], timestamp=tuple(at for _, _, at in rows))

    def _close_admission(self, token: StagingToken) -> None:
        """Set token's ADMISSION row CLOSED (it stays so: nothing writes it afterwards)."""
        partition = token.encode()
        for _ in range(_CLOSE_ATTEMPTS):
            admission, closed = self._admission(partition)
            if closed:
                return
            try:
                self.kv.set_if(partition, ADMISSION, CLOSED, admission)
                return
            except (PredicateFailed, OutcomeUnknown):
                continue  # a writer got in (or the outcome is unknown): read and close again
        raise Aborted(f"closing staging token {token!r} raced with conditional writers {_CLOSE_ATTEMPTS} times")

    def fence(self, token: StagingToken, reads: Sequence[tuple[bytes, Staged]]) -> None:
        """Set the guard of each (key, read) in token, a sealed token its writer judged the key
        through, to a fence: a guard that admits no write (PredicateFailed if any guard changed
        since its read, and nothing set).

        A late conditional writer of token (one that read it while it was the staging token)
        compares its guard against what it read before; a fence set since makes it fail and
        judge again on the branch as it is, where this writer's value is. One that got in before
        the fence makes the fence fail: its write is then finished and judged (read_for_write)
        when this writer reads again. So a conditional writer of a newer token never judges a
        key without a write admitted in a sealed token, and a late writer whose token a commit
        sealed knows that a value current after its own was judged on its own.

        An outcome the store could not tell is a PredicateFailed: the caller reads and fences
        again, which is as good whether or not this one landed."""
        guards = [(GUARD_PREFIX + key, _encode_fence(read.guard_value)) for key, read in reads]
        try:
            self.kv.apply(
                token.encode(),
                guards,
                condition=AllOf(((GUARD_PREFIX + key, read.guard) for key, read in reads), absence_is_final=True),
            )
        except OutcomeUnknown as unknown:
            raise PredicateFailed(f"fencing a sealed token's guards: {unknown}") from None

    def _guard_landed(self, partition: bytes, key: bytes, guard: bytes, read: Staged, unknown: OutcomeUnknown) -> bool:
        """Whether the guard compare-and-set that ended in unknown applied, from the key's guard
        as it is now; unknown raised again when that cannot be told.

        The store's read-back at SERIAL has finished any Paxos round in flight and found another
        writer's guard, so ours either applied before that writer's or never will. Every guard
        names the line of guards it was admitted over (admitted_over and lineage, newest first,
        _LINEAGE of them), each admitted over the one before by a compare-and-set, and guards
        never repeat (each holds its write's stamp and a value at a fresh physical address): ours
        in the current guard's line proves ours applied; the guard we judged in it without ours
        proves ours did not (the guard after it compared against it and won). A reset since
        replaced the guard with a fence over it (drop_key), so the fence's line tells too. When
        we judged no guard, a line reaching a guard admitted over none could also follow a
        deletion of our guard (tokens of before fences, a deleted repository's purge); a deleter
        marks the key's deletion stamped past every guard it read, so a mark no newer than our
        judgement rules that out.

        A resend refused with the guard still as ours read it did not apply either
        (ResendRefused: the committed change that failed its condition, such as a close of the
        token, either outranks an earlier send's ballot or was seen by that send's own read):
        the guard ours judged is current, or, when ours judged none, there is still none and no
        deletion since. Anything else (more writers in between than a line
        holds, a guard deleted, guards from before lines) is undecidable."""
        unchanged = isinstance(unknown, ResendRefused)
        try:
            current = self.kv.get(partition, GUARD_PREFIX + key).value
        except NotFound:
            if unchanged and read.guard_value is None and self._not_deleted_since(partition, key, read.judged_at):
                return False
            log.warning("conditional staging write of %r: %s; the guard is gone, which cannot tell", key, unknown)
            raise unknown from None
        if current == guard:
            return True
        if unchanged and current == read.guard_value:
            return False
        line = _lineage(current)
        if _guard_id(guard) in line:
            return True
        if read.guard_value is not None:
            if _guard_id(read.guard_value) in line:
                return False
        elif _NO_GUARD in line and self._not_deleted_since(partition, key, read.judged_at):
            return False
        log.warning(
            "conditional staging write of %r: %s; the guard cannot tell (a line of %d, ours judged %s)",
            key,
            unknown,
            len(line),
            "a guard" if read.guard_value is not None else "none",
        )
        raise unknown

    def _guards_landed(
        self, partition: bytes, guards: Sequence[tuple[bytes, bytes, Staged]], unknown: OutcomeUnknown
    ) -> bool:
        """_guard_landed for guards written by one compare-and-set: the first key whose guard
        line tells whether it applied answers for all; unknown when none does."""
        for key, guard, read in guards:
            try:
                return self._guard_landed(partition, key, guard, read, unknown)
            except OutcomeUnknown:
                continue
        raise unknown

    def _not_deleted_since(self, partition: bytes, key: bytes, judged_at: int | None) -> bool:
        """Whether key's deletion mark is no newer than judged_at (the stamp a read judged)."""
        if judged_at is None:
            return False
        mark = staged_key_deleted_at(KEY_PREFIX + key)
        stored = self.kv.observe_staged(partition, [mark]).get(mark)
        return stored is None or envelope.unwrap(stored)[0] <= judged_at

    def get(self, token: StagingToken, key: bytes) -> Value | None:
        try:
            data = self.kv.get(token.encode(), KEY_PREFIX + key).value
        except NotFound:
            return None
        return _decode(data)

    def scan(self, token: StagingToken, start: bytes = b"") -> Iterator[KeyValue]:
        """Staged values of token from key start on, in key order (tombstones included)."""
        # One message parsed into again and again, no calls: commits and compactions walk
        # every staged value through this loop.
        record = pb.StagedValue()
        skip = len(KEY_PREFIX)
        for entry in self.kv.scan(token.encode(), KEY_PREFIX + start):
            key = entry.key
            if not key.startswith(KEY_PREFIX):
                return
            record.ParseFromString(entry.value)
            yield KeyValue(key[skip:], Value(record.identity, record.data, record.tombstone))

    def scan_columns(
        self, token: StagingToken, start: bytes = b"", size: int = SCAN_CHUNK, identities: bool = True
    ) -> Iterator[Columns]:
        """scan's values as Columns of consecutive ones, none empty, of at most size.
        identities: False for a walk that never reads them (a listing), whose identities column
        is then all empty."""
        # The hot loop of every listing and commit: one pass per value parses it into one
        # message used again and again, each field appended to its column (no object per
        # value). The store underneath is scanned directly: staged keys sort after every
        # journal row.
        record = pb.StagedValue()
        parse = record.ParseFromString
        skip = len(KEY_PREFIX)
        header = envelope.HEADER_SIZE
        observe = self.kv.clock.observe
        for chunk in raw_store(self.kv).scan_chunks(token.encode(), KEY_PREFIX + start, size):
            # Keys come sorted from KEY_PREFIX on: they all start with it when the last does.
            last = chunk[-1][0].startswith(KEY_PREFIX)
            if not last:
                chunk = list(takewhile(lambda pair: pair[0].startswith(KEY_PREFIX), chunk))
                if not chunk:
                    return
            # As the journaled store's reads do, the clock observes the newest timestamp before
            # any value is handed out.
            newest = _newest_enveloped(chunk)
            data: list[bytes] = []
            tombstones: list[bool] = []
            add_data, add_tombstone = data.append, tombstones.append
            if newest is None:  # some value written before journaling: each one looked at
                newest = 0
                identity_column: list[bytes] = []
                add_identity = identity_column.append
                for _, stored in chunk:
                    timestamp, value = envelope.unwrap(stored)
                    newest = max(newest, timestamp)
                    parse(value)
                    add_identity(record.identity)
                    add_data(record.data)
                    add_tombstone(record.tombstone)
            elif identities:
                identity_column = []
                add_identity = identity_column.append
                for _, stored in chunk:
                    parse(stored[header:])
                    add_identity(record.identity)
                    add_data(record.data)
                    add_tombstone(record.tombstone)
            else:
                for _, stored in chunk:
                    parse(stored[header:])
                    add_data(record.data)
                    add_tombstone(record.tombstone)
                identity_column = [b""] * len(chunk)
            observe(newest)
            yield Columns([pair[0][skip:] for pair in chunk], identity_column, data, tombstones)
            if not last:
                return

    def drop_key(self, token: StagingToken, key: bytes) -> None:
        """Delete key's staged value from token, its guard made a fence. The guard goes first,
        by compare-and-set as it is written: a conditional writer reads the value before the
        guard, so it never finishes, from a guard read before the fence, a write deleted since.
        A fence, not a deletion: the guard's absence never comes back (see the module's
        docstring), and a writer whose compare-and-set outcome was lost finds its guard in the
        fence's line (_guard_landed)."""
        self._fence_guard(token.encode(), GUARD_PREFIX + key)
        self.kv.delete(token.encode(), KEY_PREFIX + key)

    def drop_under(self, token: StagingToken, prefix: bytes) -> None:
        """drop_key of every staged key of token under prefix (all guards first)."""
        partition = token.encode()
        for guard in list(scan_prefix(self.kv, partition, GUARD_PREFIX + prefix)):
            # ADMISSION is the token's, not a key's: it stays closed. A fence is fenced already.
            if guard.key != ADMISSION and not _decode_guard(guard.value)[3]:
                self._fence_guard(partition, guard.key)
        chunk: list[bytes] = []
        size = 0
        for key in self.keys_under(token, prefix):
            staged = KEY_PREFIX + key
            if chunk and (len(chunk) >= _DELETE_CHUNK or size + len(staged) > _DELETE_KEY_BYTES):
                self.kv.apply(partition, [], chunk)
                chunk, size = [], 0
            chunk.append(staged)
            size += len(staged)
        if chunk:
            self.kv.apply(partition, [], chunk)

    def drop(self, token: StagingToken, pace: float = 0.0) -> None:
        """Delete the staged values and guards of an unreachable token, unjournaled (the KV interface has
        no drop-partition), and leave its journal rows to the shipper.

        Only called once the branch update that made the token unreachable (commit, reset,
        branch deletion) is itself journaled, so replaying that update makes the deletions
        irrelevant; the token's journal rows still record every acknowledged write, and the
        shipper (which finds dropped tokens through the branch records it ships) moves them
        to the bucket and then deletes them, emptying the partition (docs/design/journal.md).
        pace > 0 rests as long as each burst of deletes took, a burst lasting about pace
        seconds: on the embedded driver every delete takes the database's write lock, and a
        tight loop of them makes staging writes queue behind it for tens of milliseconds.
        """
        raw = raw_store(self.kv)
        partition = token.encode()
        # Closed, never deleted: a late conditional writer that read the token while it still
        # admitted writes (ADMISSION absent or OPEN) must find its compare-and-set refused, not
        # land in a token nothing reads and be taken for a write that stood.
        self._close_admission(token)
        # Guards before values, as drop_key, by compare-and-set, as they are written; each becomes
        # a fence (admitting nothing, so no read finishes a write into the dropped token) kept
        # with the closed admission row until the shipper forgets the token: a conditional
        # writer whose compare-and-set outcome was lost while the token went still reads its
        # key's line there (_guard_landed).
        for guard in list(scan_prefix(self.kv, partition, GUARD_PREFIX)):
            if guard.key != ADMISSION and not _decode_guard(guard.value)[3]:
                self._fence_dropped(partition, guard.key)
        # Values are written at their logical timestamps, which may be ahead of any clock here or
        # on Cassandra's coordinator: each list of them is deleted at a write time past all of
        # their stamps, or the deletes would be no-ops. The deletion marks stay with the fences
        # (a writer that judged no guard tells from its key's mark whether a reset removed its
        # guard, _not_deleted_since), and go with them when the shipper forgets the token.
        burst_started = time.perf_counter()
        prefix = KEY_PREFIX
        for chunk in raw.scan_chunks(partition, prefix, _DELETE_CHUNK):
            ours = next((i for i, (key, _) in enumerate(chunk) if not key.startswith(prefix)), len(chunk))
            rows = chunk[:ours]
            if pace <= 0:
                if rows:
                    self._delete_past(raw, partition, [key for key, _ in rows], [stored for _, stored in rows])
            else:
                # One key a write, so that no write holds the embedded driver's lock for long.
                for key, stored in rows:
                    self._delete_past(raw, partition, [key], [stored])
                    spent = time.perf_counter() - burst_started
                    if spent >= pace:
                        time.sleep(spent)
                        burst_started = time.perf_counter()
            if len(rows) < len(chunk):
                break

    def _fence_dropped(self, partition: bytes, key: bytes) -> None:
        """Replace a dropped token's guard at key with a fence over it (nothing if it is one)."""
        if not self._fenced(partition, key):
            log.warning("dropping staging token %r: guard %r kept changing; left as it is", partition, key)

    def _fence_guard(self, partition: bytes, key: bytes) -> None:
        """Replace the guard at key with a fence over it (nothing if there is none or it is one);
        Aborted if conditional writers kept changing it."""
        if not self._fenced(partition, key):
            raise Aborted(
                f"staging guard {key[:64]!r} kept changing under {_CLOSE_ATTEMPTS} tries to fence it; try again"
            )

    def _fenced(self, partition: bytes, key: bytes) -> bool:
        """Whether the guard at key is (now) a fence or absent: set by compare-and-set over the
        guard read, read and set again while other writers get in (False after _CLOSE_ATTEMPTS)."""
        for _ in range(_CLOSE_ATTEMPTS):
            try:
                guard = self.kv.get(partition, key)
            except NotFound:
                return True
            if _decode_guard(guard.value)[3]:
                return True
            try:
                fence = _encode_fence(guard.value)
                self.kv.apply(partition, [(key, fence)], condition=AllOf([(key, guard.predicate)]))
                return True
            except (PredicateFailed, OutcomeUnknown):
                continue  # a writer got in, or the outcome is unknown: read and go again
        return False

    def _delete_past(self, raw: Store, partition: bytes, keys: list[bytes], stored: list[bytes]) -> None:
        """Delete keys, unjournaled, at a write time after every stamp in stored (their values)."""
        observe = self.kv.clock.observe
        for value in stored:
            observe(envelope.unwrap(value)[0])
        raw.apply(partition, [], keys, timestamp=self.kv.clock.now())

    def keys_under(self, token: StagingToken, prefix: bytes) -> Iterator[bytes]:
        """Staged keys of token under prefix (tombstones included), in key order."""
        for kv in self.scan(token, prefix):
            if not kv.key.startswith(prefix):
                return
            yield kv.key

    def holds(self, token: StagingToken, prefix: bytes, exact: bool = False) -> bool:
        """Whether token has a staged value or a guard that is not a fence (a conditional write
        under way) at key prefix (exact) or under it."""
        partition = token.encode()

        def matches(key: bytes, kind: bytes) -> bool:
            return key == kind + prefix if exact else key.startswith(kind + prefix)

        found = next(iter(self.kv.scan(partition, KEY_PREFIX + prefix)), None)
        if found is not None and matches(found.key, KEY_PREFIX):
            return True
        # A key's guards only, never the token's ADMISSION row; fences are what resets left.
        start = ADMISSION + b"\x00" if GUARD_PREFIX + prefix == ADMISSION else GUARD_PREFIX + prefix
        for guard in self.kv.scan(partition, start):
            if not matches(guard.key, GUARD_PREFIX):
                return False
            if not _decode_guard(guard.value)[3]:
                return True
        return False

    def is_empty(self, token: StagingToken) -> bool:
        return next(iter(self.kv.scan(token.encode(), KEY_PREFIX)), None) is None


def purge(kv: Store, partition: bytes) -> None:
    """Delete every row left in the partition of a token nothing reaches any more (a deleted
    repository's), unjournaled: guards by compare-and-set, as they are written; every other row
    at a write time past its stamp (its envelope's, or a journal row's from its key), since a
    row written at a logical timestamp ahead of this clock would survive a delete stamped by it."""
    raw, clock = raw_store(kv), journaled(kv).clock
    keys: list[bytes] = []
    for key, stored in [(entry.key, entry.value) for entry in raw.scan(partition)]:
        if key.startswith(GUARD_PREFIX):
            delete_current(raw, partition, key)
            continue
        clock.observe(parse_record_key(key)[0] if is_journal_key(key) else envelope.unwrap(stored)[0])
        keys.append(key)
    for start in range(0, len(keys), _DELETE_CHUNK):
        raw.apply(partition, [], keys[start : start + _DELETE_CHUNK], timestamp=clock.now())


def _encode(value: Value, precedence: bytes) -> bytes:
    record = pb.StagedValue(identity=value.identity, data=value.data, tombstone=value.tombstone)
    return precedence + record.SerializeToString()


def _decode(data: bytes) -> Value:
    record = pb.StagedValue()
    record.ParseFromString(data)
    return Value(record.identity, record.data, record.tombstone)


def _encode_guard(at: int, value: Value, replaced: bytes | None, admitted_with: Sequence[bytes] = ()) -> bytes:
    """A guard admitting value at stamp at, over the guard whose value is replaced (None: none),
    naming the other keys admitted by the same compare-and-set (admitted_with)."""
    record = pb.StagedValue(
        identity=value.identity,
        data=value.data,
        tombstone=value.tombstone,
        admitted_with=admitted_with,
        nonce=os.urandom(_NONCE_BYTES),
    )
    _link(record, replaced)
    return _GUARD_TIMESTAMP.pack(at) + _CONDITIONAL + record.SerializeToString()


def _link(record: pb.StagedValue, replaced: bytes | None) -> None:
    """Name in record the guard it replaces (None: none) and that guard's own line, cut to
    _LINEAGE guards: a writer whose compare-and-set outcome was lost reads it (_guard_landed)."""
    if replaced is None:
        record.admitted_over = _NO_GUARD
        return
    record.admitted_over = _guard_id(replaced)
    before = _lineage(replaced)
    record.lineage.extend(before[: _LINEAGE - 1])


def _lineage(guard: bytes) -> list[bytes]:
    """The guards guard was admitted over, newest first, as far as it names them (ending with
    _NO_GUARD when that reaches a guard admitted over none); empty for a guard from before."""
    record = pb.StagedValue()
    record.ParseFromString(guard[_GUARD_TIMESTAMP.size :])
    if not record.admitted_over:
        return []
    if record.admitted_over == _NO_GUARD:
        return [_NO_GUARD]
    return [record.admitted_over, *record.lineage]


def _encode_fence(replaced: bytes | None) -> bytes:
    """A guard that admits no write (StagedValue.fence), over the guard whose value is replaced.
    Its identity is new, so that no two guards are ever equal (_guard_landed relies on it).

    Stamped one past the guard it replaces, so that it also sorts after it: on a Cassandra
    whose compare-and-sets of one millisecond carry one write time (before 2.2), the larger
    value is kept, and a fence that lost to the guard it was ordered after would let that
    guard's late writer in again."""
    record = pb.StagedValue(identity=uuid.uuid4().bytes, fence=True)
    _link(record, replaced)
    at = 1 if replaced is None else _GUARD_TIMESTAMP.unpack_from(replaced)[0] + 1
    return _GUARD_TIMESTAMP.pack(at) + _CONDITIONAL + record.SerializeToString()


def _guard_id(guard: bytes) -> bytes:
    return hashlib.sha256(guard).digest()[:16]


def _decode_guard(data: bytes) -> tuple[int, Value, list[bytes], bool]:
    """A guard's stamp, the value it admitted, the keys admitted with it, and whether it is a
    fence (admitting nothing)."""
    record = pb.StagedValue()
    record.ParseFromString(data[_GUARD_TIMESTAMP.size :])
    value = Value(record.identity, record.data, record.tombstone)
    return _GUARD_TIMESTAMP.unpack_from(data)[0], value, list(record.admitted_with), record.fence


def _newest_enveloped(chunk: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The newest timestamp of chunk's stored values when every one of them is in its journal
    envelope, None when any is not.

    Found without a look at each value in Python: the values between the smallest and the
    largest all start with the magic when those two do, and the envelope's timestamp follows
    it big-endian, so the largest bytes hold the newest. (A value without the envelope is a
    protobuf message, whose first byte is never the magic's zero.)
    """
    values = list(map(itemgetter(1), chunk))
    top = max(values)
    if not (top.startswith(envelope.MAGIC) and min(values).startswith(envelope.MAGIC)):
        return None
    if min(map(len, values)) < envelope.HEADER_SIZE:
        return None
    return int(envelope.TIMESTAMP.unpack_from(top, len(envelope.MAGIC))[0])
