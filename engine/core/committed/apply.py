"""Applying sorted changes to a base metarange, rewriting only the ranges they touch.

The result must equal ``write_metarange(base ⊕ changes)`` exactly (see chunking.py). The
walk keeps one invariant: a base range is reused by id only when the writer stands at a
range boundary and no change falls inside the range — a fresh chunker over the range's
unchanged records would reproduce it, so there is nothing to read or write. Otherwise the
range is read and its records, merged with the changes, go through the chunker; once the
chunker ends a range exactly where a base range ends, the walk is re-synchronised and
reuses ranges again.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import compress, islice

from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.metarange import MetaRange
from engine.core.committed.model import ApplyResult, Change, ChangeBatch, RangeInfo, Record
from engine.core.committed.ranges import RangeData
from engine.core.committed.store import ObjectStore
from engine.core.committed.writer import BATCH_RECORDS, MetaRangeWriter
from silt.errors import InvalidArgument
from silt.kv.store import chunked


class _Changes:
    """The change stream, taken a batch at a time, with one change of lookahead; rejects
    disorder and duplicates.

    Each batch's order is checked whole when it is taken (a C-level pass), and the changes
    past every base range go to the writer as whole columns (rest): a commit of staged
    entries onto nothing but new keys then makes no object per change here.
    """

    def __init__(self, batches: Iterable[ChangeBatch]) -> None:
        self._source = iter(batches)
        self._last_key: bytes | None = None
        self._batch = ChangeBatch([], [], [], [])
        self._index = 0
        self.head: Change | None = None
        self._next_batch()

    def _next_batch(self) -> None:
        for batch in self._source:
            if batch.keys:
                self._check(batch.keys)
                self._batch, self._index, self.head = batch, 0, batch.change(0)
                return
        self._batch, self._index, self.head = ChangeBatch([], [], [], []), 0, None

    def _check(self, keys: list[bytes]) -> None:
        last = self._last_key
        if (last is not None and keys[0] <= last) or not all(map(operator.lt, keys, islice(keys, 1, None))):
            # The slow search for the culprit only runs on bad input.
            for key in keys:
                if last is not None and key <= last:
                    raise InvalidArgument(f"changes out of order: {key!r} after {last!r}")
                last = key
        self._last_key = keys[-1]

    def pop(self) -> Change | None:
        change = self.head
        if change is not None:
            self._index += 1
            if self._index < len(self._batch.keys):
                self.head = self._batch.change(self._index)
            else:
                self._next_batch()
        return change

    def rest(self) -> Iterator[ChangeBatch]:
        """Every change not popped yet, as batches; the stream is empty afterwards."""
        if self.head is not None:
            batch, start = self._batch, self._index
            if start:
                keys, identities, values, deletes = batch
                batch = ChangeBatch(keys[start:], identities[start:], values[start:], deletes[start:])
            yield batch
            self._next_batch()
        while self.head is not None:
            yield self._batch
            self._next_batch()


@dataclass
class _Counts:
    added: int = 0
    removed: int = 0
    changed: int = 0


def _ends_at_boundary(policy: ChunkingPolicy, info: RangeInfo, is_last: bool) -> bool:
    # Every range but the last ended because the chunker cut there; the last one may just
    # be where the records ran out, and then records appended after it belong to it.
    return not is_last or policy.ends_range(info.count, info.estimated_bytes, info.max_key)


def _merge_range(data: RangeData, max_key: bytes, changes: _Changes, writer: MetaRangeWriter, counts: _Counts) -> None:
    """Feed the writer the range's records merged with every pending change up to ``max_key``."""
    keys, identities, values = data.keys, data.identities, data.values
    if (head := changes.head) is None or head.key > max_key:
        writer.add_run(keys, identities, values)  # only carried along by a pending chunk
        return
    merged_keys: list[bytes] = []
    merged_identities: list[bytes] = []
    merged_values: list[bytes] = []
    position = 0
    while (change := changes.head) is not None and change.key <= max_key:
        changes.pop()
        upto = bisect_left(keys, change.key, position)
        merged_keys.extend(keys[position:upto])
        merged_identities.extend(identities[position:upto])
        merged_values.extend(values[position:upto])
        position = upto
        record = change.record
        if position < len(keys) and keys[position] == change.key:
            if record is None:
                counts.removed += 1
            elif record.identity == identities[position]:
                record = Record(keys[position], identities[position], values[position])
            else:
                counts.changed += 1
            position += 1
        elif record is not None:
            counts.added += 1
        if record is not None:
            merged_keys.append(record.key)
            merged_identities.append(record.identity)
            merged_values.append(record.value)
    merged_keys.extend(keys[position:])
    merged_identities.extend(identities[position:])
    merged_values.extend(values[position:])
    writer.add_run(merged_keys, merged_identities, merged_values)


def _insert(changes: _Changes, writer: MetaRangeWriter, counts: _Counts) -> None:
    """The remaining upserts, past every base range: all inserts; deletes there are no-ops."""
    for batch in changes.rest():
        keys, identities, values, deletes = batch
        if any(deletes):
            kept = [not deleted for deleted in deletes]
            keys, identities, values = (list(compress(column, kept)) for column in (keys, identities, values))
        counts.added += len(keys)
        writer.add_run(keys, identities, values)


def apply_changes(
    store: ObjectStore,
    namespace: str,
    policy: ChunkingPolicy,
    base: MetaRange | None,
    changes: Iterable[Change],
) -> ApplyResult:
    batches = (ChangeBatch.of(chunk) for chunk in chunked(changes, BATCH_RECORDS))
    return apply_change_batches(store, namespace, policy, base, batches)


def apply_change_batches(
    store: ObjectStore,
    namespace: str,
    policy: ChunkingPolicy,
    base: MetaRange | None,
    batches: Iterable[ChangeBatch],
) -> ApplyResult:
    """apply_changes over the changes given as consecutive batches."""
    base_ranges = base.ranges if base is not None else []
    writer = MetaRangeWriter(store, namespace, policy, frozenset(info.id for info in base_ranges))
    pending = _Changes(batches)
    counts = _Counts()
    index = 0
    while index < len(base_ranges):
        info = base_ranges[index]
        is_last = index == len(base_ranges) - 1
        change = pending.head
        if writer.at_boundary:
            if change is None:
                for rest in base_ranges[index:]:
                    writer.add_range(rest)
                break
            if change.record is None and (change.key < info.min_key or (is_last and change.key > info.max_key)):
                pending.pop()  # a delete outside every range: no range holds that key
                continue
            if change.key > info.max_key and _ends_at_boundary(policy, info, is_last):
                writer.add_range(info)
                index += 1
                continue
        _merge_range(store.read_range(namespace, info.id), info.max_key, pending, writer, counts)
        index += 1
    _insert(pending, writer, counts)

    if base is not None and not (counts.added or counts.removed or counts.changed):
        return ApplyResult(base.id, 0, len(base_ranges), 0, 0, 0)
    metarange_id = writer.finish()
    return ApplyResult(
        metarange_id, writer.ranges_written, writer.ranges_reused, counts.added, counts.removed, counts.changed
    )
