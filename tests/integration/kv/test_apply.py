"""Store.apply (docs/design/kv.md, "apply"), checked identically on every driver."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from silt.errors import InvalidArgument, NotFound, PredicateFailed
from silt.kv import Store
from silt.kv.store import MAX_APPLY_ROWS, AllOf
from tests.integration.kv.racing import race, replicated


def rows(store: Store, partition: bytes) -> dict[bytes, bytes]:
    return {entry.key: entry.value for entry in store.scan(partition)}


def test_apply_writes_and_deletes_together(store: Store, partition: bytes) -> None:
    store.set(partition, b"old", b"x")
    store.apply(partition, [(b"a", b"1"), (b"b", b"2")], [b"old", b"never-existed"])
    assert rows(store, partition) == {b"a": b"1", b"b": b"2"}


def test_apply_on_absent_condition_writes_once(store: Store, partition: bytes) -> None:
    store.apply(partition, [(b"ref", b"v1"), (b"log/1", b"r1")], condition=(b"ref", None))
    with pytest.raises(PredicateFailed):
        store.apply(partition, [(b"ref", b"v2"), (b"log/2", b"r2")], condition=(b"ref", None))
    assert rows(store, partition) == {b"ref": b"v1", b"log/1": b"r1"}


def test_apply_on_predicate_is_a_compare_and_set_of_every_row(store: Store, partition: bytes) -> None:
    store.set(partition, b"ref", b"v1")
    read = store.get(partition, b"ref")
    store.apply(partition, [(b"ref", b"v2"), (b"log/1", b"r1")], condition=(b"ref", read.predicate))
    # The same predicate is stale now: nothing of the second apply may land.
    with pytest.raises(PredicateFailed):
        store.apply(partition, [(b"ref", b"v3"), (b"log/2", b"r2")], [b"log/1"], condition=(b"ref", read.predicate))
    assert rows(store, partition) == {b"ref": b"v2", b"log/1": b"r1"}


def _mutable(data: bytes) -> Any:
    """A bytearray where the interface says bytes: callers may hand one in (a buffer they filled)."""
    return bytearray(data)


def test_apply_on_all_of_several_conditions_writes_only_if_every_one_holds(store: Store, partition: bytes) -> None:
    store.set(partition, b"a", b"1")
    a = store.get(partition, b"a").predicate
    store.set(partition, b"b", b"1")
    b = store.get(partition, b"b").predicate
    # One stale condition (c exists) refuses the whole batch.
    store.set(partition, b"c", b"1")
    with pytest.raises(PredicateFailed):
        store.apply(
            partition, [(b"a", b"2"), (b"b", b"2"), (b"c", b"2")], condition=AllOf([(b"a", a), (b"b", b), (b"c", None)])
        )
    assert rows(store, partition) == {b"a": b"1", b"b": b"1", b"c": b"1"}
    store.apply(
        partition, [(b"a", b"2"), (b"b", b"2"), (b"d", b"2")], condition=AllOf([(b"a", a), (b"b", b), (b"d", None)])
    )
    assert rows(store, partition) == {b"a": b"2", b"b": b"2", b"c": b"1", b"d": b"2"}
    with pytest.raises(PredicateFailed):  # every predicate is stale now
        store.apply(partition, [(b"a", b"3"), (b"b", b"3")], condition=AllOf([(b"a", a), (b"b", b)]))
    assert rows(store, partition)[b"a"] == b"2"


def test_timestamps_per_put_keep_each_rows_latest(store: Store, partition: bytes) -> None:
    store.apply(partition, [(b"x", b"new"), (b"y", b"old")], timestamp=(200, 100))
    store.apply(partition, [(b"x", b"older"), (b"y", b"newer")], timestamp=(150, 150))
    assert rows(store, partition) == {b"x": b"new", b"y": b"newer"}
    with pytest.raises(InvalidArgument):
        store.apply(partition, [(b"x", b"v")], timestamp=(1, 2))
    with pytest.raises(InvalidArgument):
        store.apply(partition, [(b"x", b"v")], [b"y"], timestamp=(1,))


def test_apply_takes_bytearrays_and_stores_bytes(store: Store, partition: bytes) -> None:
    store.set(partition, b"ref", b"v1")
    predicate = _mutable(store.get(partition, b"ref").predicate)
    store.apply(
        _mutable(partition),
        [(_mutable(b"ref"), _mutable(b"v2")), (_mutable(b"log/1"), _mutable(b"r1"))],
        [_mutable(b"gone")],
        condition=(_mutable(b"ref"), predicate),
    )
    stored = store.get(partition, b"ref")
    assert type(stored.value) is bytes and stored.value == b"v2"
    assert rows(store, partition) == {b"ref": b"v2", b"log/1": b"r1"}


def test_apply_conditional_delete(store: Store, partition: bytes) -> None:
    store.set(partition, b"ref", b"v1")
    stale = store.get(partition, b"ref").predicate
    store.set(partition, b"ref", b"v2")
    with pytest.raises(PredicateFailed):
        store.apply(partition, [(b"log/1", b"r1")], [b"ref"], condition=(b"ref", stale))
    assert rows(store, partition) == {b"ref": b"v2"}
    store.apply(partition, [(b"log/1", b"r1")], [b"ref"], condition=(b"ref", store.get(partition, b"ref").predicate))
    assert rows(store, partition) == {b"log/1": b"r1"}


def test_apply_condition_on_a_missing_key_with_a_predicate_fails(store: Store, partition: bytes) -> None:
    store.set(partition, b"ref", b"v1")
    predicate = store.get(partition, b"ref").predicate
    store.delete(partition, b"ref")
    with pytest.raises(PredicateFailed):
        store.apply(partition, [(b"ref", b"v2"), (b"log/1", b"r1")], condition=(b"ref", predicate))
    assert rows(store, partition) == {}


def test_timestamped_writes_keep_the_latest_timestamp_whatever_the_arrival_order(
    store: Store, partition: bytes
) -> None:
    now = time.time_ns() // 1000
    store.apply(partition, [(b"k", b"later")], timestamp=now + 2_000_000)
    store.apply(partition, [(b"k", b"earlier")], timestamp=now + 1_000_000)
    assert store.get(partition, b"k").value == b"later"
    store.apply(partition, [(b"k", b"latest")], timestamp=now + 3_000_000)
    assert store.get(partition, b"k").value == b"latest"
    # A delete stamped before the value it would remove loses, too.
    store.apply(partition, [], [b"k"], timestamp=now + 2_500_000)
    assert store.get(partition, b"k").value == b"latest"
    store.apply(partition, [], [b"k"], timestamp=now + 4_000_000)
    with pytest.raises(NotFound):
        store.get(partition, b"k")


@pytest.mark.parametrize(
    ("puts", "deletes", "condition", "timestamp"),
    [
        ([], [], None, None),
        ([(b"a", b"1"), (b"a", b"2")], [], None, None),
        ([(b"a", b"1")], [b"a"], None, None),
        ([(b"a", b"1")], [], (b"other", None), None),
        ([(b"a", b"1")], [], (b"a", None), 5),
        ([], [b"a"], (b"a", None), None),
        ([(b"", b"1")], [], None, None),
        ([(b"a", b"1")], [], None, 0),
        ([(b"a", b"1")], [], None, 2**63),
    ],
)
def test_apply_rejects_ambiguous_requests_and_writes_nothing(
    store: Store,
    partition: bytes,
    puts: list[tuple[bytes, bytes]],
    deletes: list[bytes],
    condition: tuple[bytes, None] | None,
    timestamp: int | None,
) -> None:
    with pytest.raises(InvalidArgument):
        store.apply(partition, puts, deletes, condition, timestamp)
    assert rows(store, partition) == {}


def test_apply_is_bounded(store: Store, partition: bytes) -> None:
    too_many = [(b"k%05d" % i, b"") for i in range(MAX_APPLY_ROWS + 1)]
    with pytest.raises(InvalidArgument):
        store.apply(partition, too_many)
    assert rows(store, partition) == {}


def test_a_reader_never_sees_half_an_apply(store: Store, partition: bytes) -> None:
    """Writers replace a group of rows in one apply; a concurrent scan sees one generation only."""
    width = 20
    keys = [b"row/%02d" % i for i in range(width)]
    store.apply(partition, [(k, b"0") for k in keys])
    stop = threading.Event()
    torn: list[set[bytes]] = []

    def write() -> None:
        generation = 0
        while not stop.is_set():
            generation += 1
            store.apply(partition, [(k, b"%d" % generation) for k in keys])

    writer = threading.Thread(target=write)
    writer.start()
    try:
        deadline = time.monotonic() + 2.0
        scans = 0
        while time.monotonic() < deadline:
            seen = {e.value for e in store.scan(partition)}
            scans += 1
            if len(seen) != 1:
                torn.append(seen)
    finally:
        stop.set()
        writer.join(timeout=30)
    assert scans > 10
    assert torn == []


def test_concurrent_conditional_applies_one_wins_and_only_its_rows_land(
    store: Store, partition: bytes, request: pytest.FixtureRequest
) -> None:
    store.set(partition, b"ref", b"base")  # no contender writes it
    predicate = store.get(partition, b"ref").predicate

    def apply(i: int) -> None:
        store.apply(partition, [(b"ref", b"v%d" % i), (b"log/%d" % i, b"r")], condition=(b"ref", predicate))

    outcome = race(8, apply)
    landed = rows(store, partition)
    outcome.check(8, landed[b"ref"], lambda i: b"v%d" % i, replicated(request))
    # Only the rows of the one batch whose condition held: a batch is whole or not at all.
    winner = int(landed[b"ref"][1:])
    assert landed == {b"ref": b"v%d" % winner, b"log/%d" % winner: b"r"}


def test_the_largest_apply_lands_whole(store: Store, partition: bytes) -> None:
    store.set(partition, b"gone", b"x")
    puts = [(b"k%05d" % i, b"v%d" % i) for i in range(MAX_APPLY_ROWS - 1)]
    store.apply(partition, puts, [b"gone"])
    assert rows(store, partition) == dict(puts)
