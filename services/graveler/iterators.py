"""Merging sorted sources of values, newest source first (docs/design/lockfree-staging.md)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from services.graveler.values import KeyValue


def combined(sources: Iterable[Iterator[KeyValue]]) -> Iterator[KeyValue]:
    """Merge sorted sources; for a key present in several, the earliest source wins.

    Sources are given newest first (staging token, sealed tokens, committed data), so the
    newest value of each key comes out, tombstones included: the caller decides whether a
    tombstone hides the key (reads) or deletes it (commits).
    """
    tagged = [_ranked(rank, source) for rank, source in enumerate(sources)]
    last: bytes | None = None
    for (key, _rank), kv in heapq.merge(*tagged, key=lambda item: item[0]):
        if key == last:
            continue
        last = key
        yield kv


def _ranked(rank: int, source: Iterator[KeyValue]) -> Iterator[tuple[tuple[bytes, int], KeyValue]]:
    for kv in source:
        yield (kv.key, rank), kv


def live(values: Iterator[KeyValue]) -> Iterator[KeyValue]:
    """Drop tombstones."""
    return (kv for kv in values if not kv.value.tombstone)
