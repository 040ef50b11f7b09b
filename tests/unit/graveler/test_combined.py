"""Merging sources newest first: the newest value of each key, in key order."""

from __future__ import annotations

import random

from engine.core.iterators import combined, combined_columns, live_columns
from engine.core.values import Columns, KeyValue, Value


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


def _chunks(values: list[KeyValue], size: int) -> list[Columns]:
    return [Columns.of(values[i : i + size]) for i in range(0, len(values), size)]


def test_merging_columns_of_values_gives_what_merging_values_gives() -> None:
    rng = random.Random(11)
    tomb = Value(b"", b"", True)
    for _ in range(300):
        sources = [
            _source(str(rank), [bytes([rng.randrange(40)]) for _ in range(rng.randrange(15))])
            for rank in range(rng.randrange(5))
        ]
        # Some tombstones too: they pass through, newest first as any value.
        sources = [[KeyValue(kv.key, tomb) if rng.random() < 0.2 else kv for kv in s] for s in sources]
        size = rng.randint(1, 6)
        chunks = list(combined_columns(iter(_chunks(s, size)) for s in sources))
        assert all(chunk.keys for chunk in chunks), "no Columns is empty"
        assert all(len(chunk.keys) <= size for chunk in chunks)
        merged = [kv for chunk in chunks for kv in chunk.values()]
        assert merged == list(combined(iter(s) for s in sources))


def test_merging_runs_of_columns_gives_what_merging_values_gives() -> None:
    """Sources of many keys with a few of another's between them: whole runs are taken."""
    rng = random.Random(13)
    tomb = Value(b"", b"", True)
    for _ in range(100):
        dense = _source("dense", [b"%05d" % i for i in range(rng.randrange(1, 400))])
        sparse = [
            _source(str(rank), [b"%05d" % rng.randrange(500) for _ in range(rng.randrange(8))]) for rank in range(2)
        ]
        sparse = [[KeyValue(kv.key, tomb) if rng.random() < 0.3 else kv for kv in s] for s in sparse]
        sources = [*sparse, dense] if rng.random() < 0.5 else [sparse[0], dense, sparse[1]]
        size = rng.choice([1, 7, 64, 1000])
        chunks = list(combined_columns(iter(_chunks(s, size)) for s in sources))
        assert all(chunk.keys and len(chunk.keys) <= size for chunk in chunks)
        assert [kv for chunk in chunks for kv in chunk.values()] == list(combined(iter(s) for s in sources))


def test_the_only_source_with_values_passes_its_columns_through() -> None:
    only = _chunks(_source("0", [b"a", b"b", b"c"]), 2)
    passed = list(combined_columns([iter([]), iter(only), iter([])]))
    assert passed == only and passed[0] is only[0]


def test_live_columns_drop_tombstones_and_columns_left_empty() -> None:
    tomb = Value(b"", b"", True)
    chunks = [
        Columns.of([KeyValue(b"a", tomb)]),
        Columns.of([KeyValue(b"b", Value(b"i", b"d")), KeyValue(b"c", tomb)]),
    ]
    assert [c.values() for c in live_columns(iter(chunks))] == [[KeyValue(b"b", Value(b"i", b"d"))]]


def test_columns_are_the_values_they_were_made_of() -> None:
    values = [KeyValue(b"a", Value(b"i", b"d")), KeyValue(b"b", Value(b"", b"", True))]
    assert Columns.of(values).values() == values
    assert Columns.of(values).select([False, True]).values() == values[1:]
    assert Columns.of(values).head(1).values() == values[:1]


def test_merged_columns_take_the_size_asked_for_when_a_first_columns_is_short() -> None:
    """A committed range's tail after a listing's start key can be one value: merged Columns
    sized by it would be one value each."""

    def columns(keys: list[bytes]) -> Columns:
        return Columns(keys, [b""] * len(keys), [b"d"] * len(keys), [False] * len(keys))

    committed = [columns([b"a00000"])] + [columns([b"b%05d" % (i * 1000 + j) for j in range(1000)]) for i in range(3)]
    merged = list(combined_columns([iter([columns([b"z"])]), iter(committed)], 1000))
    assert [key for c in merged for key in c.keys] == [key for c in committed for key in c.keys] + [b"z"]
    assert len(merged) <= 5
