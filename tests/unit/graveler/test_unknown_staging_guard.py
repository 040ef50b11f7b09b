"""A conditional staging write whose guard compare-and-set ends in OutcomeUnknown (a Paxos round
cut short, after which another writer changed the guard) is settled from the guard as it is now
(engine/core/staging.py, StagingStore._guard_landed): applied, not applied, or still unknown.
The store is the unit tests' scripted one (test_unknown_outcome.Doubtful): "applied" writes and
then raises OutcomeUnknown, "lost" raises it having written nothing; `between` is another
writer's step run before the raise."""

from __future__ import annotations

import pytest

from engine.core.model import StagingToken
from engine.core.staging import StagingStore
from engine.core.values import Value
from silt.errors import OutcomeUnknown, PredicateFailed
from tests.unit.graveler.test_unknown_outcome import Doubtful

TOKEN = StagingToken("repo-u-main-t1")
KEY = b"k"


def staging() -> tuple[Doubtful, StagingStore]:
    store = Doubtful()
    return store, StagingStore(store)


def write(staging: StagingStore, value: bytes) -> None:
    """Another conditional writer of KEY, judging the key as it is now."""
    staging.set_if(TOKEN, KEY, Value(value, value), staging.read_for_write(TOKEN, KEY))


def staged(staging: StagingStore) -> bytes | None:
    value = staging.get(TOKEN, KEY)
    return None if value is None else value.identity


def test_a_later_guard_admitted_over_ours_means_ours_applied() -> None:
    store, stage = staging()
    write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]
    store.between = lambda: write(stage, b"theirs")  # judges ours: admitted over it
    stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)  # settled: no error
    assert staged(stage) == b"theirs"  # ours first, theirs over it: the later write stays


def test_a_guard_admitted_over_the_one_we_judged_means_ours_did_not_apply() -> None:
    store, stage = staging()
    write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["lost"]
    store.between = lambda: write(stage, b"theirs")  # judges "old", as ours did, and wins
    with pytest.raises(PredicateFailed):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)
    assert staged(stage) == b"theirs"


def test_a_create_beaten_by_another_create_did_not_apply() -> None:
    store, stage = staging()
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["lost"]
    store.between = lambda: write(stage, b"theirs")
    with pytest.raises(PredicateFailed):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)


def test_a_create_whose_guard_was_dropped_before_another_create_stays_unknown() -> None:
    # Ours applied, the key was dropped (a reset of the object), then another writer created it:
    # "admitted over no guard" as if ours had never landed; the key's deletion mark tells.
    store, stage = staging()
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]

    def drop_then_create() -> None:
        stage.drop_key(TOKEN, KEY)
        write(stage, b"theirs")

    store.between = drop_then_create
    with pytest.raises(OutcomeUnknown):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)


def test_a_third_writer_in_between_leaves_it_unknown() -> None:
    store, stage = staging()
    write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["lost"]

    def two_writers() -> None:
        write(stage, b"theirs")
        write(stage, b"third")

    store.between = two_writers
    with pytest.raises(OutcomeUnknown):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)


def test_a_guard_deleted_since_leaves_it_unknown() -> None:
    store, stage = staging()
    write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]
    store.between = lambda: stage.drop_key(TOKEN, KEY)
    with pytest.raises(OutcomeUnknown):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)
