"""Comparing metaranges range by range, opening only the ranges that differ.

Two ranges with the same id hold the same records over the same key span (ids hash the
content, and min/max keys are part of it), so when both sides of the walk stand at the
start of a range with the same id, the range is skipped unread. Otherwise the walk opens
ranges in key order, only when the other side has reached their first key, and compares
records until both sides end a range at the same point: from there on, boundaries being
content-defined, the ranges line up again and equal ids are skipped. The ranges read are
therefore those holding a difference plus, where a change moved boundaries, their
neighbours up to the next shared boundary.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Literal, NamedTuple, cast

from engine.core.committed.metarange import MetaRange
from engine.core.committed.model import Change, RangeInfo, Record
from engine.core.committed.store import ObjectStore
from silt.errors import InvalidArgument

DifferenceKind = Literal["added", "removed", "changed"]
ADDED: DifferenceKind = "added"
REMOVED: DifferenceKind = "removed"
CHANGED: DifferenceKind = "changed"


class Difference(NamedTuple):
    """How ``key`` differs from left to right; ``changed`` means same key, different identity."""

    key: bytes
    kind: DifferenceKind
    left: Record | None
    right: Record | None


class DifferenceRun(NamedTuple):
    """Consecutive differences of one kind with one side each: ``keys[i]`` added (its record
    on the right) or removed (on the left) as ``identities[i]`` and ``values[i]``."""

    kind: DifferenceKind
    keys: list[bytes]
    identities: list[bytes]
    values: list[bytes]


class _Cursor:
    """One side of a walk: at the header of ``ranges[index]`` (unread), or open inside it."""

    __slots__ = (
        "_max_keys",
        "_namespace",
        "_start",
        "_store",
        "identities",
        "index",
        "keys",
        "pos",
        "ranges",
        "values",
    )

    def __init__(self, store: ObjectStore, namespace: str, metarange: MetaRange) -> None:
        self._store = store
        self._namespace = namespace
        self._max_keys = metarange.max_keys
        self._start = b""
        self.ranges: list[RangeInfo] = metarange.ranges
        self.index = 0
        # keys is None while at a header; the three lists are the open range's columns.
        self.keys: list[bytes] | None = None
        self.identities: list[bytes] = []
        self.values: list[bytes] = []
        self.pos = 0

    def settle(self) -> None:
        # A run abandoned at a yield leaves the position just past the yielded record, which
        # may be past the open range's end.
        if self.keys is not None and self.pos >= len(self.keys):
            self.keys = None
            self.index += 1

    def seek(self, key: bytes) -> None:
        """Skip every record below ``key``; forward only, so a walk never reopens a range."""
        self.settle()
        if self.keys is not None:
            if key <= self.keys[-1]:
                self.pos = bisect_left(self.keys, key, self.pos)
                return
            self.keys = None
        self.index = bisect_left(self._max_keys, key, self.index)
        self._start = key

    def open(self) -> None:
        data = self._store.read_range(self._namespace, self.ranges[self.index].id)
        self.keys, self.identities, self.values = data.keys, data.identities, data.values
        self.set_pos(bisect_left(data.keys, self._start) if self._start > self.ranges[self.index].min_key else 0)

    def set_pos(self, pos: int) -> None:
        assert self.keys is not None
        if pos < len(self.keys):
            self.pos = pos
        else:
            self.keys = None  # past the open range's last record: at the next header
            self.index += 1

    def next_key(self) -> tuple[bytes | None, bool]:
        """The key the cursor is at (None: past the last range), and whether it is an unread
        range's header (its first key) rather than a record of the open range."""
        if self.keys is not None:
            return self.keys[self.pos], False
        if self.index < len(self.ranges):
            return self.ranges[self.index].min_key, True
        return None, False

    def record(self, pos: int) -> Record:
        assert self.keys is not None
        return Record(self.keys[pos], self.identities[pos], self.values[pos])


class DiffWalk:
    """A forward-only walk of two metaranges: ``seek`` to a key, then ``run`` to a bound.

    ``run`` is lazy and may be abandoned after any difference; the next ``run`` continues
    after it. A ``seek`` never goes backwards: seeking below the position is a no-op.
    """

    def __init__(self, store: ObjectStore, namespace: str, left: MetaRange, right: MetaRange) -> None:
        self._left = _Cursor(store, namespace, left)
        self._right = _Cursor(store, namespace, right)

    def seek(self, key: bytes) -> None:
        self._left.seek(key)
        self._right.seek(key)

    def run(self, stop: bytes | None = None) -> Iterator[Difference]:
        """Differences in key order below ``stop`` (None: to the end)."""
        # Not grouped: every item is a Difference.
        return cast(Iterator[Difference], self._walk(stop, False))

    def run_grouped(self, stop: bytes | None = None) -> Iterator[Difference | DifferenceRun]:
        """run(), but where one side has records the other lacks, each stretch of them inside
        an open range comes as one DifferenceRun (slices of the range's columns) rather than a
        Difference each: far cheaper for readers that want many differences, not records."""
        return self._walk(stop, True)

    def _walk(self, stop: bytes | None, grouped: bool) -> Iterator[Difference | DifferenceRun]:
        left, right = self._left, self._right
        left.settle()
        right.settle()
        while True:
            left_key, left_header = left.next_key()
            right_key, right_header = right.next_key()

            if left_key is None:
                if right_key is None:
                    return
                lowest = right_key
            elif right_key is None or left_key < right_key:
                lowest = left_key
            else:
                lowest = right_key
            if stop is not None and lowest >= stop:
                return
            if left_header and right_header and left.ranges[left.index].id == right.ranges[right.index].id:
                left.index += 1
                right.index += 1
                continue
            # A range is read only once the other side has nothing left below its first key.
            if left_header and (right_key is None or lowest == left_key):
                left.open()
                continue
            if right_header and (left_key is None or lowest == right_key):
                right.open()
                continue
            if left.keys is not None and right.keys is not None:
                yield from self._compare_open(stop)
            elif left.keys is not None:
                yield from self._one_side(left, REMOVED, right_key, stop, grouped)
            else:
                yield from self._one_side(right, ADDED, left_key, stop, grouped)

    def _compare_open(self, stop: bytes | None) -> Iterator[Difference]:
        """Merge-join the two open ranges until one of them runs out or ``stop`` is reached."""
        left, right = self._left, self._right
        assert left.keys is not None and right.keys is not None
        left_keys, left_ids, right_keys, right_ids = left.keys, left.identities, right.keys, right.identities
        i, j = left.pos, right.pos
        left_end, right_end = len(left_keys), len(right_keys)
        # Positions are written back before every yield: the caller may abandon the run there.
        while i < left_end and j < right_end:
            left_key, right_key = left_keys[i], right_keys[j]
            if left_key == right_key:
                if stop is not None and left_key >= stop:
                    break
                if left_ids[i] != right_ids[j]:
                    left.pos, right.pos = i + 1, j + 1
                    yield Difference(left_key, CHANGED, left.record(i), right.record(j))
                i += 1
                j += 1
            elif left_key < right_key:
                if stop is not None and left_key >= stop:
                    break
                left.pos, right.pos = i + 1, j
                yield Difference(left_key, REMOVED, left.record(i), None)
                i += 1
            else:
                if stop is not None and right_key >= stop:
                    break
                left.pos, right.pos = i, j + 1
                yield Difference(right_key, ADDED, None, right.record(j))
                j += 1
        left.set_pos(i)
        right.set_pos(j)

    @staticmethod
    def _one_side(
        cursor: _Cursor, kind: DifferenceKind, other_key: bytes | None, stop: bytes | None, grouped: bool = False
    ) -> Iterator[Difference | DifferenceRun]:
        """Records of the open side below the other side's next key exist on this side only."""
        assert cursor.keys is not None
        keys = cursor.keys
        bound = other_key if stop is None or (other_key is not None and other_key < stop) else stop
        pos, end = cursor.pos, len(keys)
        if grouped:
            last = end if bound is None else bisect_left(keys, bound, pos, end)
            if last > pos:
                cursor.pos = last
                yield DifferenceRun(kind, keys[pos:last], cursor.identities[pos:last], cursor.values[pos:last])
            cursor.set_pos(last)
            return
        while pos < end and (bound is None or keys[pos] < bound):
            record = cursor.record(pos)
            pos += 1
            cursor.pos = pos
            if kind == REMOVED:
                yield Difference(record.key, REMOVED, record, None)
            else:
                yield Difference(record.key, ADDED, None, record)
        cursor.set_pos(pos)


def diff_metaranges(
    store: ObjectStore, namespace: str, left: MetaRange, right: MetaRange, start: bytes = b""
) -> Iterator[Difference]:
    if left.id == right.id:
        return iter(())
    walk = DiffWalk(store, namespace, left, right)
    walk.seek(start)
    return walk.run()


def diff_metaranges_grouped(
    store: ObjectStore, namespace: str, left: MetaRange, right: MetaRange, start: bytes = b""
) -> Iterator[Difference | DifferenceRun]:
    """diff_metaranges with one-sided stretches as DifferenceRuns (DiffWalk.run_grouped)."""
    if left.id == right.id:
        return iter(())
    walk = DiffWalk(store, namespace, left, right)
    walk.seek(start)
    return walk.run_grouped()


def key_successor(key: bytes) -> bytes:
    """The least key greater than ``key``: an exclusive bound that admits exactly ``key``."""
    return key + b"\x00"


def prefix_end(prefix: bytes) -> bytes | None:
    """The least key greater than every key starting with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _merged_spans(keys: Iterable[bytes], prefixes: Iterable[bytes]) -> list[tuple[bytes, bytes | None]]:
    """The keys and prefixes as disjoint, increasing [start, stop) spans (stop None: unbounded)."""
    spans: list[tuple[bytes, bytes | None]] = [(key, key_successor(key)) for key in keys]
    spans.extend((prefix, prefix_end(prefix)) for prefix in prefixes)
    spans.sort(key=lambda span: span[0])  # by start only: stops may be None
    merged: list[tuple[bytes, bytes | None]] = []
    for start, stop in spans:
        if merged:
            last_start, last_stop = merged[-1]
            if last_stop is None:
                break  # the last span runs to the end of the key space: it covers the rest
            if start <= last_stop:
                merged[-1] = (last_start, None if stop is None else max(stop, last_stop))
                continue
        merged.append((start, stop))
    return merged


def spans_differ(
    store: ObjectStore,
    namespace: str,
    left: MetaRange,
    right: MetaRange,
    keys: Iterable[bytes],
    prefixes: Iterable[bytes],
) -> bool:
    """Whether any of ``keys``, or any key under ``prefixes``, differs between the metaranges."""
    if left.id == right.id:
        return False
    walk = DiffWalk(store, namespace, left, right)
    for start, stop in _merged_spans(keys, prefixes):
        if stop == key_successor(start):
            # One key: its record on each side, without opening whole ranges for it.
            if key_differs(store, namespace, left, right, start):
                return True
            continue
        walk.seek(start)
        for _ in walk.run(stop):
            return True
    return False


def key_differs(store: ObjectStore, namespace: str, left: MetaRange, right: MetaRange, key: bytes) -> bool:
    """Whether key's record differs (by identity, or by being on one side only), as a DiffWalk
    over [key, key_successor(key)) would find, reading from each range only what holds key."""
    left_range, right_range = left.range_for(key), right.range_for(key)
    if left_range is None or right_range is None:
        if left_range is None and right_range is None:
            return False
    elif left_range.id == right_range.id:
        return False  # equal ids: equal records
    left_identity = None if left_range is None else store.identity_in_range(namespace, left_range.id, key)
    right_identity = None if right_range is None else store.identity_in_range(namespace, right_range.id, key)
    return left_identity != right_identity


def _checked(changes: Iterable[Change]) -> Iterator[Change]:
    last_key: bytes | None = None
    for change in changes:
        if last_key is not None and change.key <= last_key:
            raise InvalidArgument(f"changes out of order: {change.key!r} after {last_key!r}")
        if change.record is not None and change.record.key != change.key:
            raise InvalidArgument(f"change for {change.key!r} carries a record for {change.record.key!r}")
        last_key = change.key
        yield change


def diff_changes(
    store: ObjectStore, namespace: str, base: MetaRange, changes: Iterable[Change]
) -> Iterator[Difference]:
    """What applying ``changes`` (strictly increasing keys) to ``base`` would change, lazily.

    Upserts of an identical record and deletes of absent keys yield nothing. Only the
    ranges that changes fall in are read, each once however many changes it holds.
    """
    ranges, max_keys = base.ranges, base.max_keys
    index = 0
    open_index = -1
    open_range = None
    for change in _checked(changes):
        key = change.key
        # Keys increase, so the range that may hold this one is never before the last one.
        index = bisect_left(max_keys, key, index)
        current: Record | None = None
        if index < len(ranges) and ranges[index].min_key <= key:
            if index != open_index:
                open_range = store.read_range(namespace, ranges[index].id)
                open_index = index
            assert open_range is not None
            current = open_range.find(key)
        record = change.record
        if record is None:
            if current is not None:
                yield Difference(key, REMOVED, current, None)
        elif current is None:
            yield Difference(key, ADDED, None, record)
        elif current.identity != record.identity:
            yield Difference(key, CHANGED, current, record)
