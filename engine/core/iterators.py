"""Merging sorted sources of values, newest source first (docs/design/lockfree-staging.md)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator

from engine.core.values import Columns, KeyValue
from silt.kv.store import chunked, flattened


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


def combined_columns(sources: Iterable[Iterator[Columns]]) -> Iterator[Columns]:
    """combined, over sources given as Columns of consecutive values (none empty).

    The Columns of the only source holding values pass through as they are, as they do on a
    branch with nothing committed or nothing staged; several sources are merged key by key.
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
        merged = combined(
            itertools.chain(first.values(), flattened(columns.values() for columns in source))
            for first, source in primed
        )
        for chunk in chunked(merged, max(len(first.keys) for first, _ in primed)):
            yield Columns.of(chunk)


def live_columns(chunks: Iterator[Columns]) -> Iterator[Columns]:
    """Drop tombstones, and the Columns left empty."""
    for columns in chunks:
        kept = columns.live()
        if kept.keys:
            yield kept
