"""A conditional staging write whose guard compare-and-set ends in OutcomeUnknown (a Paxos round
cut short, after which another writer changed the guard) is settled from the guard as it is now
(engine/core/staging.py, StagingStore._guard_landed): applied, not applied, or still unknown.
The store is the unit tests' scripted one (test_unknown_outcome.Doubtful): "applied" writes and
then raises OutcomeUnknown, "lost" raises it having written nothing; `between` is another
writer's step run before the raise."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine.core.model import StagingToken
from engine.core.staging import _LINEAGE, GUARD_PREFIX, KEY_PREFIX, StagingStore
from engine.core.values import Value
from silt.errors import OutcomeUnknown, PredicateFailed
from silt.kv.conditional import delete_current
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


def test_a_create_whose_guard_was_dropped_before_another_create_applied() -> None:
    # Ours applied, the key was dropped (a reset of the object), then another writer created it:
    # the reset left a fence over our guard, and theirs was admitted over the fence, so the line
    # names ours. Ours came before the reset, theirs after it: theirs stays.
    store, stage = staging()
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]

    def drop_then_create() -> None:
        stage.drop_key(TOKEN, KEY)
        write(stage, b"theirs")

    store.between = drop_then_create
    stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)  # settled: no error
    assert staged(stage) == b"theirs"


def test_a_create_whose_guard_was_deleted_before_another_create_stays_unknown() -> None:
    # A guard deleted outright (a token from before resets fenced, a deleted repository's purge)
    # leaves "admitted over no guard" as if ours had never landed; the key's deletion mark tells.
    store, stage = staging()
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]

    def delete_then_create() -> None:
        delete_current(store, TOKEN.encode(), GUARD_PREFIX + KEY)
        stage.kv.delete(TOKEN.encode(), KEY_PREFIX + KEY)
        write(stage, b"theirs")

    store.between = delete_then_create
    with pytest.raises(OutcomeUnknown):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)


def writers(stage: StagingStore, count: int) -> Callable[[], None]:
    """count other conditional writers of KEY, one after another."""

    def run() -> None:
        for number in range(count):
            write(stage, b"w%d" % number)

    return run


def settled(script: str, between: Callable[[StagingStore], None] | None = None, old: bool = True) -> str:
    """How our conditional write of KEY ends when the store answers it as script says, with
    between (given the staging store) run before that answer: "applied" (settled, no error),
    "not applied" (PredicateFailed: judged again) or "unknown". old: KEY held a conditional
    writer's value when ours read it (otherwise ours is a create over no guard)."""
    store, stage = staging()
    if old:
        write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = [script]
    if between is not None:
        store.between = lambda: between(stage)
    try:
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)
    except PredicateFailed:
        return "not applied"
    except OutcomeUnknown:
        return "unknown"
    return "applied"


@pytest.mark.parametrize("after", [2, _LINEAGE])
def test_writers_after_ours_show_ours_applied_as_far_as_a_guard_line_reaches(after: int) -> None:
    assert settled("applied", lambda stage: writers(stage, after)()) == "applied"


@pytest.mark.parametrize("after", [2, _LINEAGE - 1])
def test_writers_after_the_one_we_judged_show_ours_did_not_apply(after: int) -> None:
    assert settled("lost", lambda stage: writers(stage, after)()) == "not applied"


def test_a_create_beaten_by_a_create_and_writers_after_it_did_not_apply() -> None:
    assert settled("lost", lambda stage: writers(stage, 4)(), old=False) == "not applied"


@pytest.mark.parametrize("script", ["applied", "lost"])
def test_more_writers_in_between_than_a_guard_line_holds_leave_it_unknown(script: str) -> None:
    assert settled(script, lambda stage: writers(stage, _LINEAGE + 1)()) == "unknown"


def test_a_fence_keeps_the_line_it_replaces() -> None:
    # A fence set over our guard by a writer of a newer token: ours applied.
    def fence(stage: StagingStore) -> None:
        stage.fence(TOKEN, [(KEY, stage.read_for_write(TOKEN, KEY))])

    assert settled("applied", fence) == "applied"


@pytest.mark.parametrize(("script", "applied"), [("applied", True), ("lost", False)])
def test_a_write_of_several_keys_is_settled_by_any_key_whose_line_tells(script: str, applied: bool) -> None:
    store, stage = staging()
    other = b"j"
    write(stage, b"old")
    reads = [(KEY, stage.read_for_write(TOKEN, KEY)), (other, stage.read_for_write(TOKEN, other))]
    store.script = [script]

    # The first key's guard was deleted since (undecidable there); the second key tells.
    def between() -> None:
        stage.drop_key(TOKEN, KEY)
        stage.set_if(TOKEN, other, Value(b"theirs", b"theirs"), stage.read_for_write(TOKEN, other))

    store.between = between
    writes = [(key, Value(b"ours" + key, b"ours"), read) for key, read in reads]
    if applied:
        stage.set_if_many(TOKEN, writes)
        found = stage.get(TOKEN, other)
        assert found is not None and found.identity == b"theirs"
    else:
        with pytest.raises(PredicateFailed):
            stage.set_if_many(TOKEN, writes)


def test_a_guard_dropped_since_shows_ours_applied_before_the_reset() -> None:
    # The reset's fence is over our guard: ours applied, then the reset dropped it, and the
    # value ours writes afterwards is stamped before the reset's deletion, which hides it.
    store, stage = staging()
    write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]
    store.between = lambda: stage.drop_key(TOKEN, KEY)
    stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)  # settled: no error
    assert staged(stage) is None


def test_a_guard_deleted_since_leaves_it_unknown() -> None:
    store, stage = staging()
    write(stage, b"old")
    read = stage.read_for_write(TOKEN, KEY)
    store.script = ["applied"]

    def delete() -> None:
        delete_current(store, TOKEN.encode(), GUARD_PREFIX + KEY)

    store.between = delete
    with pytest.raises(OutcomeUnknown):
        stage.set_if(TOKEN, KEY, Value(b"ours", b"ours"), read)


def test_a_resend_refused_with_the_guard_as_judged_did_not_apply() -> None:
    # The store's resend ran a round of its own and was refused (another condition of the write
    # failed: a commit closed the token), and the guard is still the one ours judged.
    assert settled("refused") == "not applied"


def test_a_plain_outcome_unknown_with_the_guard_as_judged_stays_unknown() -> None:
    # No round ran after ours: a proposal of ours still pending may land later.
    assert settled("lost") == "unknown"


def test_a_create_whose_resend_was_refused_with_no_guard_since_did_not_apply() -> None:
    assert settled("refused", old=False) == "not applied"


def test_a_create_whose_resend_was_refused_after_a_reset_of_the_key_applied() -> None:
    # Ours applied and was dropped since (a reset of the object): the reset's fence names ours.
    assert settled("applied-refused", lambda stage: stage.drop_key(TOKEN, KEY), old=False) == "applied"


def test_a_create_whose_resend_was_refused_after_a_deletion_of_its_guard_stays_unknown() -> None:
    # The guard deleted outright, so the key reads as before (no guard) when the store checks:
    # the deletion mark tells it may have applied.
    def delete(stage: StagingStore) -> None:
        delete_current(stage.kv, TOKEN.encode(), GUARD_PREFIX + KEY)
        stage.kv.delete(TOKEN.encode(), KEY_PREFIX + KEY)

    assert settled("applied-refused", delete, old=False) == "unknown"


@pytest.mark.parametrize(("script", "outcome"), [("applied", "applied"), ("lost", "not applied")])
def test_a_write_whose_token_was_dropped_meanwhile_is_settled_by_the_fences_it_left(script: str, outcome: str) -> None:
    # The commit that sealed the token closed it and dropped it while ours was in flight: the
    # drop leaves each guard a fence over it, whose line still tells.
    def theirs_then_drop(stage: StagingStore) -> None:
        if script == "lost":
            write(stage, b"theirs")
        stage.drop(TOKEN)

    assert settled(script, theirs_then_drop) == outcome


def test_a_dropped_tokens_fences_admit_nothing_and_finish_nothing() -> None:
    _, stage = staging()
    write(stage, b"old")
    stage.drop(TOKEN)
    after = stage.read_for_write(TOKEN, KEY)
    assert after.value is None and after.closed  # nothing brought back into the dropped token
    assert stage.get(TOKEN, KEY) is None
