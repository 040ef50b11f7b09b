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

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from services.graveler.committed.chunking import ChunkingPolicy
from services.graveler.committed.metarange import MetaRange
from services.graveler.committed.model import ApplyResult, Change, RangeInfo, Record
from services.graveler.committed.ranges import RangeData
from services.graveler.committed.store import ObjectStore
from services.graveler.committed.writer import MetaRangeWriter
from silt.errors import InvalidArgument


class _Changes:
    """The change stream with one change of lookahead; rejects disorder and duplicates."""

    def __init__(self, changes: Iterable[Change]) -> None:
        self._source = iter(changes)
        self._last_key: bytes | None = None
        self.head: Change | None = None
        self._advance()

    def _advance(self) -> None:
        change = next(self._source, None)
        if change is not None:
            if self._last_key is not None and change.key <= self._last_key:
                raise InvalidArgument(f"changes out of order: {change.key!r} after {self._last_key!r}")
            if change.record is not None and change.record.key != change.key:
                raise InvalidArgument(f"change for {change.key!r} carries a record for {change.record.key!r}")
            self._last_key = change.key
        self.head = change

    def pop(self) -> Change | None:
        change = self.head
        self._advance()
        return change


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


def _inserts(changes: _Changes, counts: _Counts) -> Iterator[Record]:
    """The remaining upserts, past every base range: all inserts; deletes there are no-ops."""
    while (change := changes.pop()) is not None:
        if change.record is not None:
            counts.added += 1
            yield change.record


def apply_changes(
    store: ObjectStore,
    namespace: str,
    policy: ChunkingPolicy,
    base: MetaRange | None,
    changes: Iterable[Change],
) -> ApplyResult:
    base_ranges = base.ranges if base is not None else []
    writer = MetaRangeWriter(store, namespace, policy, frozenset(info.id for info in base_ranges))
    pending = _Changes(changes)
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
    writer.add_records(_inserts(pending, counts))

    if base is not None and not (counts.added or counts.removed or counts.changed):
        return ApplyResult(base.id, 0, len(base_ranges), 0, 0, 0)
    metarange_id = writer.finish()
    return ApplyResult(
        metarange_id, writer.ranges_written, writer.ranges_reused, counts.added, counts.removed, counts.changed
    )
