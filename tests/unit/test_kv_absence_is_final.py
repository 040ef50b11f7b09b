"""AllOf.absence_is_final: a caller's promise that the keys its conditions require absent never
become absent again once written, which lets the Cassandra driver send a conditional write on
absence again before its first send's answer (silt/kv/cassandra.py, _first_send). Checked here:
the promise reaches the driver through every layer, the driver acts on it and only on it, and
staging keeps it (a reset leaves a fence where a guard was, never an absence)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.model import StagingToken
from engine.core.staging import ADMISSION, GUARD_PREFIX, StagingStore
from engine.core.values import Value
from silt.errors import PredicateFailed
from silt.journal.store import journaled
from silt.kv.cassandra import CassandraStore
from silt.kv.forwarding import ForwardingStore
from silt.kv.mem import MemStore
from silt.kv.store import AllOf, CheckedBatch, Predicate, check_apply

TOKEN = StagingToken("repo-u-main-t1")
KEY = b"k"


class Recording(MemStore):
    """A MemStore that keeps every conditional batch it applies."""

    def __init__(self) -> None:
        super().__init__()
        self.conditional: list[CheckedBatch] = []

    def apply_checked(self, batch: CheckedBatch) -> None:
        if batch.conditions:
            self.conditional.append(batch)
        super().apply_checked(batch)


def test_the_promise_is_kept_by_the_checked_batch_and_given_back_as_arguments() -> None:
    batch = check_apply(b"p", [(b"k", b"v")], (), AllOf([(b"k", None)], absence_is_final=True), None)
    assert batch.conditions.absence_is_final
    again = check_apply(*batch.as_arguments())
    assert again.conditions.absence_is_final and again.conditions == batch.conditions
    plain = check_apply(b"p", [(b"k", b"v")], (), (b"k", None), None)
    assert not plain.conditions.absence_is_final
    assert not check_apply(*plain.as_arguments()).conditions.absence_is_final


def test_an_unconditional_batch_carries_no_promise() -> None:
    batch = check_apply(b"p", [(b"k", b"v")], (), AllOf([], absence_is_final=True), None)
    assert not batch.conditions and not batch.conditions.absence_is_final


@pytest.mark.parametrize("journal", [True, False])
def test_the_promise_reaches_the_driver_through_the_journal_and_a_forwarding_store(journal: bool) -> None:
    driver = Recording()
    store = journaled(ForwardingStore(driver), enabled=journal)
    store.apply(b"p", [(b"k", b"v")], condition=AllOf([(b"k", None)], absence_is_final=True))
    store.apply(b"p", [(b"j", b"v")], condition=AllOf([(b"j", None)]))
    assert [batch.conditions.absence_is_final for batch in driver.conditional] == [True, False]


def cassandra_deciding() -> tuple[CassandraStore, list[bool]]:
    """A CassandraStore whose LWTs only record whether they may be sent again early."""
    store = CassandraStore.__new__(CassandraStore)
    # Unprepared statements: the driver binds their parameters itself, with %s markers.
    for name, cql in {
        "_insert_if_absent": "INSERT INTO kv (partition_key, key, value) VALUES (%s, %s, %s) IF NOT EXISTS",
        "_update_if": "UPDATE kv SET value = %s WHERE partition_key = %s AND key = %s IF value = %s",
        "_delete_if": "DELETE FROM kv WHERE partition_key = %s AND key = %s IF value = %s",
    }.items():
        setattr(store, name, cql)
    decided: list[bool] = []

    def conditional(op: str, statement: Any, params: Any, change: Any, *, on_values: bool) -> None:
        decided.append(on_values)

    store._conditional = conditional  # type: ignore[method-assign]
    return store, decided


@pytest.mark.parametrize(
    ("conditions", "early"),
    [
        (AllOf([(b"k", None), (b"a", Predicate(b"open"))], absence_is_final=True), True),
        (AllOf([(b"k", None), (b"a", Predicate(b"open"))]), False),
        (AllOf([(b"k", Predicate(b"old")), (b"a", Predicate(b"open"))]), True),
    ],
    ids=["absence promised final", "absence", "values"],
)
def test_the_cassandra_driver_sends_again_early_only_on_values_or_a_final_absence(
    conditions: AllOf, early: bool
) -> None:
    store, decided = cassandra_deciding()
    store.apply(b"p", [(b"k", b"new"), (b"a", b"open")], condition=conditions)
    assert decided == [early]


def test_every_conditional_staging_write_promises_its_absences_final() -> None:
    driver = Recording()
    stage = StagingStore(driver)
    stage.set_if(TOKEN, KEY, Value(b"a", b"a"), stage.read_for_write(TOKEN, KEY))
    stage.set_if_many(TOKEN, [(b"x", Value(b"x", b"x"), stage.read_for_write(TOKEN, b"x"))])
    stage.fence(TOKEN, [(b"y", stage.read_for_write(TOKEN, b"y"))])
    guard_writes = [batch for batch in driver.conditional if any(k.startswith(GUARD_PREFIX) for k, _ in batch.puts)]
    assert len(guard_writes) == 3
    assert all(batch.conditions.absence_is_final for batch in guard_writes)


@pytest.mark.parametrize("drop", ["key", "prefix"])
def test_a_reset_leaves_a_fence_so_a_late_copy_of_a_create_can_never_apply(drop: str) -> None:
    driver = MemStore()
    stage = StagingStore(driver)
    read = stage.read_for_write(TOKEN, KEY)
    stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)
    partition = TOKEN.encode()
    if drop == "key":
        stage.drop_key(TOKEN, KEY)
    else:
        stage.drop_under(TOKEN, b"")
    assert stage.get(TOKEN, KEY) is None
    assert driver.get(partition, GUARD_PREFIX + KEY)  # a fence, not an absence
    assert stage.read_for_write(TOKEN, KEY).value is None  # the fence finishes nothing
    # A copy of the create still in flight (conditioned on the guard's absence, as first read)
    # is refused: without the fence it would bring "ours" back after the reset.
    with pytest.raises(PredicateFailed):
        stage.kv.apply(
            partition,
            [(GUARD_PREFIX + KEY, b"late copy"), (ADMISSION, b"1 open")],
            condition=AllOf([(GUARD_PREFIX + KEY, read.guard), (ADMISSION, read.admission)]),
        )
    # A writer after the reset writes over the fence.
    stage.set_if(TOKEN, KEY, Value(b"after", b"after"), stage.read_for_write(TOKEN, KEY))
    found = stage.get(TOKEN, KEY)
    assert found is not None and found.identity == b"after"


def test_fences_left_by_a_reset_are_not_held_changes() -> None:
    stage = StagingStore(MemStore())
    stage.set_if(TOKEN, b"d/a", Value(b"a", b"a"), stage.read_for_write(TOKEN, b"d/a"))
    assert stage.holds(TOKEN, b"d/") and stage.holds(TOKEN, b"d/a", exact=True)
    stage.drop_under(TOKEN, b"d/")
    assert not stage.holds(TOKEN, b"d/")
    assert not stage.holds(TOKEN, b"d/a", exact=True)
    assert not stage.holds(TOKEN, b"")
    # A conditional write under way (its guard written, its value not yet) still counts.
    stage.kv.apply(
        TOKEN.encode(),
        [(GUARD_PREFIX + b"d/b", b"\x00" * 8 + b"\x78\x01")],
        condition=AllOf([(GUARD_PREFIX + b"d/b", None)]),
    )
    assert stage.holds(TOKEN, b"d/") and stage.holds(TOKEN, b"d/b", exact=True)
