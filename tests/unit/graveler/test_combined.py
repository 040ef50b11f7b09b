"""Merging sources newest first: the newest value of each key, in key order."""

from __future__ import annotations

import random

from services.graveler.iterators import combined
from services.graveler.values import KeyValue, Value


def _source(name: str, keys: list[bytes]) -> list[KeyValue]:
    return [KeyValue(k, Value(name.encode(), k)) for k in sorted(set(keys))]


def _expected(sources: list[list[KeyValue]]) -> list[tuple[bytes, bytes]]:
    newest: dict[bytes, bytes] = {}
    for source in reversed(sources):  # older first, so newer ones overwrite
        for kv in source:
            newest[kv.key] = kv.value.identity
    return sorted(newest.items())


def test_newest_source_wins_on_random_sources() -> None:
    rng = random.Random(7)
    for _ in range(200):
        sources = [
            _source(str(rank), [bytes([rng.randrange(40)]) for _ in range(rng.randrange(15))])
            for rank in range(rng.randrange(5))
        ]
        merged = [(kv.key, kv.value.identity) for kv in combined(iter(s) for s in sources)]
        assert merged == _expected(sources)


def test_one_source_passes_through_and_none_is_empty() -> None:
    only = _source("0", [b"a", b"b", b"c"])
    assert list(combined([iter(only)])) == only
    assert list(combined([])) == []
    assert list(combined([iter([]), iter(only), iter([])])) == only
