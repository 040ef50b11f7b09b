"""Merging sorted sources of values, newest source first (docs/design/lockfree-staging.md)."""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from engine.core.values import Columns, KeyValue


def combined(sources: Iterable[Iterator[KeyValue]]) -> Iterator[KeyValue]:
    """Merge sorted sources; for a key present in several, the earliest source wins.

    Sources are given newest first (staging token, sealed tokens, committed data), so the
    newest value of each key comes out, tombstones included: the caller decides whether a
    tombstone hides the key (reads) or deletes it (commits).
    """
    # A heap of (key, rank, value, source): equal keys pop in rank order, newest first.
    heap: list[tuple[bytes, int, KeyValue, Iterator[KeyValue]]] = []
    for rank, source in enumerate(sources):
        first = next(source, None)
        if first is not None:
            heap.append((first.key, rank, first, source))
    heapq.heapify(heap)
    while len(heap) > 1:
        key, rank, kv, source = heap[0]
        yield kv
        # Advance the winner and every older source holding the same key.
        while heap and heap[0][0] == key:
            _, rank, _, source = heap[0]
            following = next(source, None)
            if following is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (following.key, rank, following, source))
    if heap:
        # One source left (often the only one, as on a branch with nothing committed or
        # nothing staged): its values pass through without a comparison each.
        _, _, kv, source = heap[0]
        yield kv
        yield from source


def live(values: Iterator[KeyValue]) -> Iterator[KeyValue]:
    """Drop tombstones."""
    return (kv for kv in values if not kv.value.tombstone)


def combined_columns(sources: Iterable[Iterator[Columns]], size: int | None = None) -> Iterator[Columns]:
    """combined, over sources given as Columns of consecutive values (none empty), merged into
    Columns of at most size values (default: the longest first Columns of any source).

    The Columns of the only source holding values pass through as they are, as they do on a
    branch with nothing committed or nothing staged; several sources are merged run by run
    (_merged_columns). Give size when a source's first Columns may be short (a committed
    range's tail after a start key): merged Columns as short would cost a Columns per value.
    """
    primed: list[tuple[Columns, Iterator[Columns]]] = []
    for source in sources:
        first = next(source, None)
        if first is not None:
            primed.append((first, source))
    if len(primed) == 1:
        first, source = primed[0]
        yield first
        yield from source
    elif primed:
        # Ranks follow the order of sources given, empty ones left out: newest first still.
        yield from _merged_columns(primed, size or max(len(first.keys) for first, _ in primed))


class _Head:
    """Where a source of Columns stands in a merge: its current Columns and position."""

    __slots__ = ("columns", "position", "rest")

    def __init__(self, columns: Columns, rest: Iterator[Columns]) -> None:
        self.columns, self.position, self.rest = columns, 0, rest

    def key(self) -> bytes:
        return self.columns.keys[self.position]

    def advance(self, to: int) -> bool:
        """Move to position to, to the source's next Columns past the end: False when none is left."""
        self.position = to
        if to < len(self.columns.keys):
            return True
        following = next(self.rest, None)
        if following is None:
            return False
        self.columns, self.position = following, 0
        return True


def _merged_columns(primed: list[tuple[Columns, Iterator[Columns]]], size: int) -> Iterator[Columns]:
    """combined over several sources of Columns, newest first, as Columns of at most size
    until one source is left, whose Columns then pass through.

    Taken a run at a time: the source with the smallest key gives every key it holds before
    the next key of any other source, found by bisection and sliced whole, so a merge of one
    source with a few keys into another with many copies lists rather than making an object
    per value. A key held by several sources is a run of one, from the newest of them.
    """
    heads = [_Head(first, rest) for first, rest in primed]  # newest first
    out = Columns([], [], [], [])
    while len(heads) > 1:
        # The first of equal keys is the newest source's.
        best, bound = heads[0], None
        key = best.key()
        for head in heads[1:]:
            other = head.key()
            if other < key:
                best, key, bound = head, other, key if bound is None or key < bound else bound
            elif bound is None or other < bound:
                bound = other
        assert bound is not None
        columns, start = best.columns, best.position
        if bound == key:
            # Held by several sources: the newest's value, the others' passed over.
            _append(out, columns, start)
            for head in heads[heads.index(best) + 1 :]:
                if head.key() == key and not head.advance(head.position + 1):
                    heads.remove(head)
            end = start + 1
        else:
            end = min(bisect_left(columns.keys, bound, start), start + size - len(out.keys))
            if end == start + 1:
                _append(out, columns, start)
            else:
                _extend(out, columns, start, end)
        if not best.advance(end):
            heads.remove(best)
        if len(out.keys) >= size:
            yield out
            out = Columns([], [], [], [])
    if out.keys:
        yield out
    if heads:
        # One source left: the rest of its Columns, then its following ones as they are.
        last = heads[0]
        yield last.columns.tail(last.position)
        yield from last.rest


def _append(out: Columns, columns: Columns, index: int) -> None:
    out.keys.append(columns.keys[index])
    out.identities.append(columns.identities[index])
    out.data.append(columns.data[index])
    out.tombstones.append(columns.tombstones[index])


def _extend(out: Columns, columns: Columns, start: int, end: int) -> None:
    out.keys.extend(columns.keys[start:end])
    out.identities.extend(columns.identities[start:end])
    out.data.extend(columns.data[start:end])
    out.tombstones.extend(columns.tombstones[start:end])


def live_columns(chunks: Iterator[Columns]) -> Iterator[Columns]:
    """Drop tombstones, and the Columns left empty."""
    for columns in chunks:
        kept = columns.live()
        if kept.keys:
            yield kept
