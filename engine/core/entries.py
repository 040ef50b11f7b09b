"""Entries: the writer and reader flows on a branch's staging and committed layers (docs/design/lockfree-staging.md).

* a **writer** writes into the staging token it read, re-reads the branch, and writes again
  if the token changed meanwhile (a commit sealed it); rewriting the same entry is idempotent;
* a **reader** combines staging token, sealed tokens and the compacted or committed metarange (newest
  first, tombstones hiding older values) and reads again if the branch changed while it read.

Both re-checks go through the BranchUpdater, which owns the retry policy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar, cast

from engine.core.closed_staging import ClosedStagingWatch, StagingClosed
from engine.core.committed.model import MetaRangeId
from engine.core.compaction import StagingObserver
from engine.core.deadline import Deadline
from engine.core.iterators import combined, combined_columns, live, live_columns
from engine.core.model import StagingToken
from engine.core.paging import CommonPrefix, delimiter_bytes, first_key, page_amount, page_of_columns, paginate
from engine.core.parts import CoreParts, OnCore
from engine.core.physical_addresses import validate_physical_address
from engine.core.refs import BranchRecord, RepoHandle, Resolved
from engine.core.staging import Staged, new_token
from engine.core.updater import Raced
from engine.core.validation import validate_entry_size, validate_key
from engine.core.values import TOMBSTONE, Columns, KeyValue, Value, decode_entry, entry_value
from silt.errors import Aborted, ConditionFailed, FailedPrecondition, InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.store import chunk_size

_T = TypeVar("_T")

# A sealed token a conditional writer judged a key through, with what it read there.
Fence = tuple[StagingToken, bytes, Staged]

# Keys one delete_entries call takes: S3's DeleteObjects limit.
MAX_DELETE_KEYS = 1000
# Entries one stage_entries call takes: what an edge gathers from its clients' concurrent writes.
MAX_STAGE_ENTRIES = 256
# Keys one stage_if_many call takes: a conditional write of several keys is one KV write that
# cannot be split (a multi-table catalog transaction is a handful).
MAX_CONDITIONAL_ENTRIES = 32
# Bytes of that one write, as _write_weight counts them: under what Cassandra 2.2 to 3.5 refuse
# in one batch (50 KiB), the guards carrying each value and the journal row repeating them.
CONDITIONAL_WRITE_BYTES = 40 * 1024
# Bytes per KV write of a stage_many, as _write_weight counts them (everything Cassandra counts
# against batch_size_fail_threshold_in_kb, over-estimated): well under the 50 KiB that Cassandra
# 2.2 to 3.5 refuse in one batch.
STAGE_WRITE_BYTES = 16 * 1024
# Of one such write besides its entries: the journal row's key and its record's fields.
_WRITE_OVERHEAD_BYTES = 1024


@dataclass(frozen=True)
class DeleteOutcome:
    """What deleting one key of a delete_entries call did."""

    key: str
    result: Literal["deleted", "not_found", "invalid"]
    message: str = ""


@dataclass(frozen=True)
class StageOutcome:
    """What staging one entry of a stage_entries call did."""

    key: str
    result: Literal["staged", "invalid", "expired"]
    message: str = ""


@dataclass
class ListPage:
    items: list[tuple[bytes, pb.Entry | None]] = field(default_factory=list)  # entry None = common prefix
    has_more: bool = False


@dataclass
class StoredListPage:
    """A ListPage with each entry as stored (a serialized pb.Entry): what a caller that only
    passes entries on, such as the gRPC answer, takes without parsing them. Column by column
    (the items' keys, their entries) as the walk gives them, with no pair made per item."""

    keys: list[bytes] = field(default_factory=list)
    data: list[bytes | None] = field(default_factory=list)  # None = common prefix
    has_more: bool = False

    @classmethod
    def of(cls, items: list[tuple[bytes, bytes | None]], has_more: bool) -> StoredListPage:
        return cls([key for key, _ in items], [data for _, data in items], has_more)

    @property
    def items(self) -> list[tuple[bytes, bytes | None]]:
        return list(zip(self.keys, self.data, strict=True))


class Entries(OnCore):
    def __init__(
        self,
        core: CoreParts,
        observer: StagingObserver,
        allowed_import_prefixes: tuple[str, ...] = (),
        *,
        committed_in_memory_only: bool = False,
    ) -> None:
        """committed_in_memory_only: point reads (stat) take committed records from the decoded
        ranges in memory alone and raise NotInMemory for any other (a reader on an event loop)."""
        super().__init__(core)
        self.observer = observer
        self._allowed_import_prefixes = allowed_import_prefixes
        self._closed_staging = ClosedStagingWatch(self._updater)
        self._committed_get = self._committed.get_in_memory if committed_in_memory_only else self._committed.get

    # --- writer flow -------------------------------------------------------------------------

    def stage(
        self,
        repo: RepoHandle,
        branch_name: str,
        key: str,
        entry: pb.Entry,
        deadline: Deadline,
        condition: Condition | None = None,
    ) -> None:
        encoded = validate_key(key)
        validate_entry_size(entry.ByteSize())
        validate_physical_address(entry.physical_address, repo.namespace, self._allowed_import_prefixes)
        if condition is None:
            self._write(repo, branch_name, encoded, entry_value(entry), deadline)
        else:
            self._write_if(repo, branch_name, encoded, entry_value(entry), condition, deadline)

    def stage_many(
        self,
        repo: RepoHandle,
        branch_name: str,
        entries: Sequence[tuple[str, pb.Entry]],
        deadline: Deadline,
        entry_deadlines: Sequence[Deadline] | None = None,
    ) -> list[StageOutcome]:
        """Stage each (key, entry) unconditionally, as stage would, one outcome each in order.

        An invalid key, entry or physical address is that entry's outcome; the valid ones are
        written by one writer flow: into the staging token, in writes of up to STAGE_WRITE_BYTES,
        then one re-read of the branch, all written again if a commit sealed the token
        meanwhile. Each entry may have its own deadline (entry_deadlines, in order; the call's
        otherwise), checked right before each write that carries it: an entry whose deadline
        passed before it was first written is never written ("expired", certainly not staged),
        and one written once is never written again after its deadline (the call then fails
        Aborted at once: it may stand). Anything else fails the call, and then any of them may
        stand, as for a single write whose answer was lost. A key given twice takes its last
        entry, with its deadline: all its outcomes are that entry's (an edge never sends a key
        twice in one call).
        """
        outcomes: list[StageOutcome] = []
        values: dict[bytes, tuple[Value, Deadline]] = {}
        keys: list[bytes | None] = []
        for index, (key, entry) in enumerate(entries):
            try:
                encoded = validate_key(key)
                validate_entry_size(entry.ByteSize())
                validate_physical_address(entry.physical_address, repo.namespace, self._allowed_import_prefixes)
            except InvalidArgument as exc:
                outcomes.append(StageOutcome(key, "invalid", str(exc)))
                keys.append(None)
                continue
            values[encoded] = (entry_value(entry), deadline if entry_deadlines is None else entry_deadlines[index])
            outcomes.append(StageOutcome(key, "staged"))
            keys.append(encoded)
        expired: set[bytes] = set()
        if values:
            expired = self._write_many(repo, branch_name, list(values.items()), deadline)
        return [
            StageOutcome(outcome.key, "expired") if encoded in expired else outcome
            for outcome, encoded in zip(outcomes, keys, strict=True)
        ]

    def stage_if_many(
        self,
        repo: RepoHandle,
        branch_name: str,
        writes: Sequence[tuple[str, pb.Entry, Condition]],
        deadline: Deadline,
    ) -> None:
        """Stage each (key, entry) only if every condition holds for its key's current value,
        all as one compare-and-set: every entry is staged or none is. ConditionFailed names the
        first key (in the order given) whose condition does not hold; InvalidArgument for an
        invalid key or entry, a key given twice, or more than one KV write can take."""
        if not writes:
            raise InvalidArgument("no entries to stage")
        if len(writes) > MAX_CONDITIONAL_ENTRIES:
            raise InvalidArgument(f"at most {MAX_CONDITIONAL_ENTRIES} conditional entries per call, got {len(writes)}")
        token_bytes = len(new_token(repo.partition, branch_name).encode())
        values: list[tuple[bytes, Value, Condition]] = []
        size = _WRITE_OVERHEAD_BYTES
        for key, entry, condition in writes:
            encoded = validate_key(key)
            validate_entry_size(entry.ByteSize())
            validate_physical_address(entry.physical_address, repo.namespace, self._allowed_import_prefixes)
            value = entry_value(entry)
            values.append((encoded, value, condition))
            size += 2 * _write_weight(encoded, value, token_bytes)
        if len({key for key, _, _ in values}) != len(values):
            raise InvalidArgument("a key is given twice")
        # Each key's guard names every other key (admitted_with): the guards' write grows with
        # the square of the keys, and must fit the KV write as the values do.
        all_keys = sum(len(key) for key, _, _ in values)
        size += sum(all_keys - len(key) + 4 * (len(values) - 1) for key, _, _ in values)
        if size > CONDITIONAL_WRITE_BYTES:
            raise InvalidArgument(
                f"the entries are too large for one conditional write ({CONDITIONAL_WRITE_BYTES} bytes)"
            )
        self._write_if_many(repo, branch_name, values, deadline)

    def delete(self, repo: RepoHandle, branch_name: str, key: str, deadline: Deadline) -> None:
        encoded = validate_key(key)
        if self.read(repo, branch_name, lambda resolved: self._get(repo, resolved, encoded), deadline) is None:
            raise NotFound(f"key {key!r} not found on branch {branch_name!r}", what="object")
        self._write(repo, branch_name, encoded, TOMBSTONE, deadline)

    def delete_if(self, repo: RepoHandle, branch_name: str, key: str, condition: Condition, deadline: Deadline) -> None:
        """Stage a delete of key only while condition holds for its current value."""
        self._write_if(repo, branch_name, validate_key(key), TOMBSTONE, condition, deadline)

    def _write(self, repo: RepoHandle, branch_name: str, key: bytes, value: Value, deadline: Deadline) -> None:
        stamp: int | None = None

        def attempt(number: int) -> int:
            nonlocal stamp
            branch = self._refs.branch_for_io(repo, branch_name, use_cache=number == 1)
            # Once the write's timestamp is chosen, right before the write: a caller told
            # DEADLINE_EXCEEDED never has it land later, stamped after its deadline. Written
            # again, at the first attempt's stamp (StagingStore.set).
            stamp = self._staging.set(
                branch.tokens[0],
                key,
                value,
                before_write=lambda: deadline.check(f"write to branch {branch_name!r}"),
                at=stamp,
                past=branch.tokens[1:],
            )
            # Re-read (never from the cache): if a commit sealed the token meanwhile, the
            # write may have missed it; writing again is idempotent.
            fresh = self._refs.fresh_branch(repo, branch_name).branch
            if fresh.staging_token != branch.branch.staging_token:
                raise Raced
            return len(fresh.sealed_tokens)

        sealed = self._updater.retry(attempt, f"write to branch {branch_name!r}", deadline)
        self.observer.staged(repo.name, branch_name, value.tombstone, sealed)

    def _write_many(
        self, repo: RepoHandle, branch_name: str, values: list[tuple[bytes, tuple[Value, Deadline]]], deadline: Deadline
    ) -> set[bytes]:
        """_write for many keys, each within its own deadline: the writer flow once for all of
        them. The keys not written because their deadline passed first."""
        writes: list[list[tuple[bytes, Value, Deadline]]] = [[]]
        token_bytes = len(new_token(repo.partition, branch_name).encode())
        size = _WRITE_OVERHEAD_BYTES
        for key, (value, until) in values:
            weight = _write_weight(key, value, token_bytes)
            if writes[-1] and size + weight > STAGE_WRITE_BYTES:
                writes.append([])
                size = _WRITE_OVERHEAD_BYTES
            writes[-1].append((key, value, until))
            size += weight
        written: set[bytes] = set()
        expired: set[bytes] = set()
        # Each write's stamp, chosen by its first attempt and kept by the next (as _write does).
        stamps: list[int | None] = [None] * len(writes)

        def attempt(number: int) -> int:
            branch = self._refs.branch_for_io(repo, branch_name, use_cache=number == 1)
            for index, write in enumerate(writes):
                live: list[tuple[bytes, Value]] = []
                for key, value, until in write:
                    if key in expired:
                        continue
                    if until.expired():
                        if key in written:
                            # Written before into a token a commit sealed since: it may stand,
                            # and writing it again now could land after its caller gave up. The
                            # call stops here and says so (Aborted: its entries may stand), an
                            # answer the edge tells from its own call running out of time.
                            raise Aborted(
                                f"write to branch {branch_name!r}: an entry's deadline passed while a commit "
                                "made the call write its entries again; they may stand"
                            )
                        expired.add(key)
                        continue
                    live.append((key, value))
                if live:
                    # Checked again once the write's timestamp is chosen (as _write does).
                    check = functools.partial(_check_all, [until for key, _, until in write if key not in expired])
                    stamps[index] = self._staging.set_many(
                        branch.tokens[0], live, before_write=check, at=stamps[index], past=branch.tokens[1:]
                    )
                    written.update(key for key, _ in live)
            fresh = self._refs.fresh_branch(repo, branch_name).branch
            if fresh.staging_token != branch.branch.staging_token:
                raise Raced
            return len(fresh.sealed_tokens)

        sealed = self._updater.retry(attempt, f"write to branch {branch_name!r}", deadline)
        for key, (value, _) in values:
            if key not in expired:
                self.observer.staged(repo.name, branch_name, value.tombstone, sealed)
        return expired

    def _write_if(
        self, repo: RepoHandle, branch_name: str, key: bytes, value: Value, condition: Condition, deadline: Deadline
    ) -> None:
        """Stage value only if condition holds for the key's current value, exactly
        (docs/design/lockfree-staging.md, conditional writer flow).

        The current value comes from a consistent view of the branch (staging token, sealed
        tokens, compacted or committed metarange); the write is a set_if against the key's
        guard as it was read with the staged value (StagingStore.set_if), so a concurrent
        conditional writer in between makes it fail and the condition is checked again against
        what that writer staged. Once a set_if succeeded the write is
        never reported as refused: if a commit sealed the token meanwhile, the value is staged
        again in the new token while it is still the current value; if another writer's value
        is current by then, the order of the two cannot be told and ours may already be in a
        commit, so the outcome is a conflict (Aborted), never a refusal or a second success.
        A condition that fails on the write's own entry (condition.fresh_address, and the current
        entry equal to value but for last_modified: an earlier attempt of this write landed and
        its answer was lost) is a success, not a refusal.
        """
        written = False
        judged: Value | None = None  # the value the condition was checked against

        def current(resolved: Resolved) -> tuple[StagingToken, Value | None, Staged, list[Fence]]:
            if resolved.branch is None:
                raise FailedPrecondition("conditional writes go to branches only")
            token = resolved.branch.tokens[0]
            value_now, staged, fences = self._judge(repo, resolved, key)
            return token, value_now, staged, fences

        def attempt(number: int) -> int | None:
            nonlocal written, judged
            token, value_now, staged, fences = self.read(repo, branch_name, current, deadline)
            if written and value_now != value:
                if value_now != judged:
                    # A commit sealed our token around the write and another value is current
                    # now. Every conditional writer of a newer token fenced ours first (so
                    # judged ours, or made our compare-and-set fail), and a blind writer is
                    # concurrent with ours: that value came after ours, which stood.
                    return None
                # The key shows the very value ours was judged on. Ours is hidden (a blind
                # write of that value, written again into the new token at its first stamp,
                # reads first), or it stood and a later write (a delete, a revert) brought that
                # value back: nothing read here tells which, so the write is undecided.
                raise Aborted(f"conditional write of {key!r} conflicted with a concurrent write; retry")
            if not written:
                try:
                    condition.check(value_now, key)
                except FailedPrecondition:
                    if condition.fresh_address and _same_entry(value_now, value):
                        # The current entry is this very write's (an earlier attempt of it
                        # landed, its answer was lost): it is done, not refused.
                        return None
                    raise
                judged = value_now
            # PredicateFailed (another conditional writer got in since the read) retries the attempt.
            self._fence(fences)
            # The deadline is checked once the write's timestamp is chosen (as _write does).
            self._staging.set_if(
                token,
                key,
                value,
                staged,
                before_write=lambda: deadline.check(f"conditional write to branch {branch_name!r}"),
            )
            written = True
            fresh = self._refs.fresh_branch(repo, branch_name).branch
            if fresh.staging_token != token:
                raise Raced
            return len(fresh.sealed_tokens)

        sealed = self._updater.retry(attempt, f"conditional write to branch {branch_name!r}", deadline)
        if sealed is not None:
            self.observer.staged(repo.name, branch_name, value.tombstone, sealed)

    def _write_if_many(
        self, repo: RepoHandle, branch_name: str, writes: list[tuple[bytes, Value, Condition]], deadline: Deadline
    ) -> None:
        """_write_if for several keys, as one compare-and-set (StagingStore.set_if_many).

        The same flow: every key's current value comes from one consistent view of the branch,
        every condition is checked against it (the first that fails refuses the whole write),
        and the guards of all keys are set in one conditional KV write, so a conditional writer
        of any of the keys in between makes all of them be judged again. Once that write
        succeeded the outcome is never a refusal: if a commit sealed the token meanwhile, the
        values are staged again in the new token while every one of them is still current; if
        another writer's value is current for any of them, Aborted (the write may stand).
        """
        written = False
        judged: list[Value | None] = []  # the values the conditions were checked against

        def current(resolved: Resolved) -> tuple[StagingToken, list[tuple[Value | None, Staged]], list[Fence]]:
            if resolved.branch is None:
                raise FailedPrecondition("conditional writes go to branches only")
            token = resolved.branch.tokens[0]
            found: list[tuple[Value | None, Staged]] = []
            fences: list[Fence] = []
            for key, _, _ in writes:
                value_now, staged, fenced = self._judge(repo, resolved, key)
                found.append((value_now, staged))
                fences += fenced
            return token, found, fences

        def attempt(number: int) -> int | None:
            nonlocal written, judged
            token, found, fences = self.read(repo, branch_name, current, deadline)
            now = [value_now for value_now, _ in found]
            if written and any(value_now != value for value_now, (_, value, _) in zip(now, writes, strict=True)):
                # As for one key (_write_if): a commit sealed our token around the write.
                if all(
                    value_now not in (value, before)
                    for value_now, (_, value, _), before in zip(now, writes, judged, strict=True)
                ):
                    return None  # every key has a value that came after ours
                # Otherwise (a key showing the value ours judged, as for one key, or keys still
                # ours beside keys replaced): undecided.
                raise Aborted("conditional write of several keys conflicted with a concurrent write; retry")
            if not written:
                for (key, _, condition), value_now in zip(writes, now, strict=True):
                    try:
                        condition.check(value_now, key)
                    except (FailedPrecondition, NotFound) as failed:
                        name = key.decode(errors="replace")
                        raise ConditionFailed(f"condition on {name!r} failed: {failed}", key=name) from None
                judged = now
            self._fence(fences)
            self._staging.set_if_many(
                token,
                [(key, value, staged) for (key, value, _), (_, staged) in zip(writes, found, strict=True)],
                before_write=lambda: deadline.check(f"conditional write to branch {branch_name!r}"),
            )
            written = True
            fresh = self._refs.fresh_branch(repo, branch_name).branch
            if fresh.staging_token != token:
                raise Raced
            return len(fresh.sealed_tokens)

        sealed = self._updater.retry(attempt, f"conditional write to branch {branch_name!r}", deadline)
        if sealed is not None:
            for _, value, _ in writes:
                self.observer.staged(repo.name, branch_name, value.tombstone, sealed)

    def _judge(self, repo: RepoHandle, resolved: Resolved, key: bytes) -> tuple[Value | None, Staged, list[Fence]]:
        """key's current value on the branch as a conditional writer judges it (None: absent),
        what it read of the key in the staging token, and the sealed tokens it judged the key
        through, each with what it read there: the conditional writer fences them (_fence)
        before it writes."""
        assert resolved.branch is not None
        tokens = resolved.branch.tokens
        staged = self._staging.read_for_write(tokens[0], key)
        if staged.closed:
            # A commit closed the token after sealing it (this view of the branch is stale), or a
            # move of the head closed it before its set_if: read again. A token closed this way
            # for long is one whose mover died before its set_if (closed_staging.py).
            name = resolved.branch.branch.name
            self._closed_staging.refused(repo, name, tokens[0])
            raise StagingClosed(f"staging token of {name!r} is closed; read again", tokens[0])
        if staged.value is not None:
            return (None if staged.value.tombstone else staged.value), staged, []
        fences: list[Fence] = []
        for sealed in tokens[1:]:
            # Read as a conditional writer of that token would, which finishes a write its
            # guard admitted whose writer has not written it yet.
            held = self._staging.read_for_write(sealed, key)
            fences.append((sealed, key, held))
            if held.value is not None:
                # Judged on a sealed token's value, the write is stamped past it too: a blind
                # write there, written again into the new token at its own stamp (_write),
                # must not come back over this one.
                stamp = -1 if held.judged_at is None else held.judged_at
                return (None if held.value.tombstone else held.value), staged.judging(stamp), fences
        record = self._committed.get(repo.namespace, self._base(repo, resolved), key)
        return (None if record is None else Value(record.identity, record.value)), staged, fences

    def _fence(self, fences: Sequence[Fence]) -> None:
        """Fence the guards of the keys judged through sealed tokens (StagingStore.fence), one
        compare-and-set per token; PredicateFailed (a late writer of one got in) retries."""
        by_token: dict[StagingToken, list[tuple[bytes, Staged]]] = {}
        for token, key, held in fences:
            by_token.setdefault(token, []).append((key, held))
        for token, reads in by_token.items():
            self._staging.fence(token, reads)

    # --- reader flow -------------------------------------------------------------------------

    def read(self, repo: RepoHandle, ref: str, body: Callable[[Resolved], _T], deadline: Deadline) -> _T:
        """Run body on a consistent view of ref: run it again while a branch changes under it."""

        def attempt(number: int) -> _T:
            resolved = self._refs.resolve_cached(repo, ref, use_cache=number == 1)
            result = body(resolved)
            if resolved.branch is None:
                return result  # tags and commits are immutable
            if self._refs.fresh_branch(repo, resolved.branch.branch.name).predicate != resolved.branch.predicate:
                raise Raced
            return result

        return self._updater.retry(attempt, f"read of {ref!r}", deadline)

    def stat(self, repo: RepoHandle, ref: str, key: str, deadline: Deadline) -> pb.Entry:
        encoded = validate_key(key)
        value = self.read(repo, ref, lambda resolved: self._get(repo, resolved, encoded), deadline)
        if value is None:
            raise NotFound(f"key {key!r} not found in {ref!r}", what="object")
        return decode_entry(value.data)

    def _get(self, repo: RepoHandle, resolved: Resolved, key: bytes) -> Value | None:
        if resolved.branch is not None:
            for token in resolved.branch.tokens:
                value = self._staging.get(token, key)
                if value is not None:
                    return None if value.tombstone else value
        record = self._committed_get(repo.namespace, self._base(repo, resolved), key)
        return None if record is None else Value(record.identity, record.value)

    def list(
        self, repo: RepoHandle, ref: str, prefix: str, delimiter: str, after: str, amount: int, deadline: Deadline
    ) -> ListPage:
        stored = self.list_stored(repo, ref, prefix, delimiter, after, amount, deadline)
        items = [(key, None if data is None else decode_entry(data)) for key, data in stored.items]
        return ListPage(items, stored.has_more)

    def list_at(self, repo: RepoHandle, branch: BranchRecord, prefix: str, delimiter: str, amount: int) -> ListPage:
        """A page of the branch as this record of it shows it (its head, its tokens), read
        without looking the branch up: for a caller that holds the record it just wrote."""
        resolved = Resolved("branch", branch.commit_id, branch)
        stored = self._list(repo, resolved, prefix.encode(), delimiter_bytes(delimiter), b"", page_amount(amount))
        return ListPage(
            [(key, None if data is None else decode_entry(data)) for key, data in stored.items], stored.has_more
        )

    def list_stored(
        self, repo: RepoHandle, ref: str, prefix: str, delimiter: str, after: str, amount: int, deadline: Deadline
    ) -> StoredListPage:
        separator, size = delimiter_bytes(delimiter), page_amount(amount)
        return self.read(
            repo,
            ref,
            lambda resolved: self._list(repo, resolved, prefix.encode(), separator, after.encode(), size),
            deadline,
        )

    def _list(
        self, repo: RepoHandle, resolved: Resolved, prefix: bytes, delimiter: bytes, after: bytes, amount: int
    ) -> StoredListPage:
        if not delimiter:
            # Every key is its own item: the walk goes a list of values at a time.
            start = first_key(prefix, delimiter, after)
            chunks = live_columns(self._iterate_columns(repo, resolved, start, amount + 1))
            keys, data, has_more = page_of_columns(((c.keys, c.data) for c in chunks), prefix, amount)
            return StoredListPage(keys, cast(list[bytes | None], data), has_more)
        page = paginate(
            lambda start: self._iterate(repo, resolved, start),
            _key_of,
            prefix,
            delimiter,
            after,
            amount,
            size_of=_size_of,
        )
        items: list[tuple[bytes, bytes | None]] = [
            (item.key, None) if isinstance(item, CommonPrefix) else (item.key, item.value.data) for item in page.items
        ]
        return StoredListPage.of(items, page.has_more)

    def _iterate(self, repo: RepoHandle, resolved: Resolved, start: bytes) -> Iterator[KeyValue]:
        sources: list[Iterator[KeyValue]] = []
        if resolved.branch is not None:
            sources.extend(self._staging.scan(token, start) for token in resolved.branch.tokens)
        sources.append(
            KeyValue(r.key, Value(r.identity, r.value))
            for r in self._committed.iterate(repo.namespace, self._base(repo, resolved), start)
        )
        return live(combined(sources))

    def _iterate_columns(self, repo: RepoHandle, resolved: Resolved, start: bytes, wanted: int) -> Iterator[Columns]:
        """_iterate's values, tombstones included, as Columns of consecutive ones, read in lists
        of `wanted`: as many as the caller may take. The staged values' identities are left
        empty: a listing never reads them."""
        size = chunk_size(wanted)
        sources: list[Iterator[Columns]] = []
        if resolved.branch is not None:
            sources.extend(
                self._staging.scan_columns(token, start, size, identities=False) for token in resolved.branch.tokens
            )
        slices = self._committed.iterate_slices(repo.namespace, self._base(repo, resolved), start, size)
        sources.append(Columns(keys, identities, values, [False] * len(keys)) for keys, identities, values in slices)
        return combined_columns(sources, size)

    def _base(self, repo: RepoHandle, resolved: Resolved) -> MetaRangeId:
        # A branch's combined view ends in its compacted metarange when it has one; a
        # committed ref (branch@, a commit, a tag) always ends in the commit's.
        if resolved.branch is not None:
            return self._state.base_metarange(repo, resolved.branch.branch)
        return MetaRangeId(self._refs.get_commit(repo, resolved.commit_id).metarange_id)


@dataclass(frozen=True)
class Condition:
    """What a conditional write (S3's If-None-Match: * and If-Match) requires of the key's
    current value. A failed one is FailedPrecondition, never PredicateFailed: that one means a
    lost race, which the branch updater retries."""

    if_absent: bool = False
    if_match_etag: str = ""  # the current entry's ETag, quotes optional; "*": any existing entry
    # Expiry by last access (last_access.py): the entry the run judged, and only while it is old.
    if_match_address: str = ""
    if_modified_before_us: int = 0
    # The entry's physical address is this write's own (StageEntryRequest.fresh_address): a
    # current entry equal to it (but for last_modified) is an earlier attempt's, not a refusal.
    fresh_address: bool = False

    def check(self, current: Value | None, key: bytes) -> None:
        name = key.decode(errors="replace")
        if self.if_absent and current is not None:
            raise FailedPrecondition(f"key {name!r} exists")
        if self.if_match_etag or self.if_match_address or self.if_modified_before_us:
            if current is None:
                raise NotFound(f"key {name!r} not found", what="object")
            entry = decode_entry(current.data)
            wanted = self.if_match_etag.strip('"')
            if wanted and wanted != "*" and entry.etag.strip('"') != wanted:
                raise FailedPrecondition(f"key {name!r} has another ETag")
            if self.if_match_address and entry.physical_address != self.if_match_address:
                raise FailedPrecondition(f"key {name!r} names another object")
            # An entry without a modification time has an unknown age: never old enough.
            modified = entry.last_modified.ToMicroseconds() if entry.HasField("last_modified") else None
            if self.if_modified_before_us and (modified is None or modified >= self.if_modified_before_us):
                raise FailedPrecondition(f"key {name!r} was modified too recently")


def _same_entry(current: Value | None, value: Value) -> bool:
    """Whether current is value's entry as an earlier attempt of the same write staged it: the
    same in everything (the physical address, which a write of fresh bytes has to itself, its
    size, ETag, content type and metadata) but last_modified, which each attempt sets anew."""
    if current is None or value.tombstone or current.tombstone:
        return False
    mine, theirs = decode_entry(value.data), decode_entry(current.data)
    if not mine.physical_address:
        return False
    mine.ClearField("last_modified")
    theirs.ClearField("last_modified")
    return mine == theirs


def _check_all(deadlines: list[Deadline]) -> None:
    """DeadlineExceeded if any of deadlines passed (one passing between the filter and the
    write's timestamp: rare, and the write is then not made)."""
    for until in deadlines:
        until.check("write to branch: an entry's deadline")


def _write_weight(key: bytes, value: Value, token_bytes: int) -> int:
    """What staging value under key adds to a KV write, as Cassandra sizes a batch (a row's
    clustering key counted for its row marker and its value cell, 8-byte timestamps and
    component headers on each), over-estimated: the row `key/<key>` with the value in its
    journal envelope, and the journal row's change repeating key, value and the token's name."""
    stored = len(value.data) + len(value.identity) + 32  # envelope, message framing, tombstone flag
    return 3 * (len(key) + 8) + 2 * stored + token_bytes + 64


def _key_of(kv: KeyValue) -> bytes:
    return kv.key


def _size_of(kv: KeyValue) -> int:
    return len(kv.key) + len(kv.value.data)
