"""The order of acknowledged staged writes does not depend on the gravelers' clocks.

Two graveler processes, one clock 5 s ahead and one 5 s behind, write and delete one staged key
through the staging store graveler uses, one after the other, each acknowledged before the next
is sent: whichever came last is what a read finds, on every KV driver."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from engine.core.model import StagingToken
from engine.core.staging import StagingStore, purge
from engine.core.values import Value
from silt.journal.clock import CLOCK_OFFSET_ENV, HybridLogicalClock, wall_micros
from silt.journal.context import journal_context
from silt.journal.record import STAGED_ADMISSION, STAGED_DELETED_AT, staged_key_deleted_at
from silt.journal.store import JournaledStore
from silt.kv import Store

FIVE_SECONDS_US = 5_000_000
REPO = Path(__file__).resolve().parents[3]


def skewed(store: Store, offset_us: int) -> StagingStore:
    """Graveler's staging store in a process whose clock is offset_us off."""
    return StagingStore(JournaledStore(store, HybridLogicalClock(lambda: wall_micros() + offset_us)))


def value(text: str) -> Value:
    return Value(text.encode(), text.encode(), False)


@pytest.fixture
def token() -> StagingToken:
    return StagingToken(f"repo-1_main_{uuid.uuid4().hex}")


@pytest.fixture(params=["ahead-first", "behind-first"])
def replicas(store: Store, request: pytest.FixtureRequest) -> tuple[StagingStore, StagingStore]:
    """(the replica serving the first write, the one serving the next): clocks 10 s apart."""
    ahead, behind = skewed(store, +FIVE_SECONDS_US), skewed(store, -FIVE_SECONDS_US)
    return (ahead, behind) if request.param == "ahead-first" else (behind, ahead)


def test_a_later_acknowledged_write_is_the_value_read(
    replicas: tuple[StagingStore, StagingStore], token: StagingToken
) -> None:
    first, second = replicas
    first.set(token, b"k", value("first"))
    second.set(token, b"k", value("second"))
    assert first.get(token, b"k") == value("second")
    first.set(token, b"k", value("third"))
    assert second.get(token, b"k") == value("third")


def test_a_later_acknowledged_batch_is_the_value_read(
    replicas: tuple[StagingStore, StagingStore], token: StagingToken
) -> None:
    first, second = replicas
    first.set_many(token, [(b"a", value("a1")), (b"b", value("b1"))])
    second.set_many(token, [(b"b", value("b2")), (b"c", value("c2"))])
    assert [(kv.key, kv.value) for kv in first.scan(token)] == [
        (b"a", value("a1")),
        (b"b", value("b2")),
        (b"c", value("c2")),
    ]


def test_a_reset_after_a_write_deletes_it(replicas: tuple[StagingStore, StagingStore], token: StagingToken) -> None:
    first, second = replicas
    first.set(token, b"k", value("staged"))
    second.drop_key(token, b"k")
    assert first.get(token, b"k") is None
    first.set(token, b"p/1", value("staged"))
    second.drop_under(token, b"p/")
    assert first.get(token, b"p/1") is None


def test_a_write_after_a_reset_is_the_value_read(
    replicas: tuple[StagingStore, StagingStore], token: StagingToken
) -> None:
    first, second = replicas
    second.set(token, b"k", value("old"))
    first.drop_key(token, b"k")
    second.set(token, b"k", value("new"))
    assert first.get(token, b"k") == value("new")
    # A conditional writer too reads past the deletion before it stamps its write.
    first.drop_key(token, b"k")
    second.set_if(token, b"k", value("conditional"), second.read_for_write(token, b"k"))
    assert first.get(token, b"k") == value("conditional")


def test_a_conditional_write_hidden_by_a_concurrent_reset_is_judged_absent(store: Store, token: StagingToken) -> None:
    """A conditional writer on a clock behind reads the key; a reset of the key on a clock ahead
    completes; the writer's guard and value land at its own, earlier stamp, so the reset (later
    in the store's order) hides the value. Every later read, conditional writers' included,
    must then agree that the key holds nothing: a guard admitting a write older than the key's
    deletion is not a write still to finish."""
    slow, fast = skewed(store, -FIVE_SECONDS_US), skewed(store, +FIVE_SECONDS_US)
    read = slow.read_for_write(token, b"k")
    fast.drop_key(token, b"k")
    slow.set_if(token, b"k", value("conditional"), read)
    shown = slow.get(token, b"k")
    judged = fast.read_for_write(token, b"k")
    assert judged.value == shown
    assert fast.get(token, b"k") == shown
    # The next conditional writer, having judged the key, stages past both.
    fast.set_if(token, b"k", value("next"), judged)
    assert slow.get(token, b"k") == value("next")


def test_dropping_a_token_deletes_values_stamped_ahead_of_the_dropping_clock(store: Store, token: StagingToken) -> None:
    ahead, behind = skewed(store, +FIVE_SECONDS_US), skewed(store, -FIVE_SECONDS_US)
    ahead.set(token, b"k", value("ahead"))
    ahead.drop_key(token, b"reset")  # leaves the partition's deletion mark and the key's own
    behind.drop(token)
    assert behind.is_empty(token)
    assert behind.get(token, b"k") is None
    # Only the token's deletion marks and admission row stay, closed (the shipper deletes them after
    # the token's grace): a conditional writer whose outcome was lost judges by its key's mark.
    left = [entry.key for entry in store.scan(token.encode()) if not entry.key.startswith(b"journal/")]
    assert left == [STAGED_DELETED_AT, staged_key_deleted_at(b"key/reset"), STAGED_ADMISSION]


def test_the_clock_offset_comes_from_the_environment() -> None:
    code = "from silt.journal.clock import wall_micros; import time; print(wall_micros() - time.time_ns() // 1000)"
    for offset, expected in (("5", 5_000_000), ("-2.5", -2_500_000), ("", 0)):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONPATH": str(REPO), CLOCK_OFFSET_ENV: offset},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        assert abs(int(out) - expected) < 1_000_000


def test_purging_a_deleted_repositorys_token_deletes_rows_stamped_ahead(store: Store, token: StagingToken) -> None:
    """What the drop leaves of a deleted repository's token (journal rows, a late value) goes
    too, though written at logical timestamps ahead of the purging graveler's clock."""
    ahead, behind = skewed(store, +FIVE_SECONDS_US), skewed(store, -FIVE_SECONDS_US)
    with journal_context("object_write", "alice", "repo"):
        ahead.set(token, b"k", value("ahead"))
        ahead.drop_key(token, b"gone")
    assert list(store.scan(token.encode()))
    purge(behind.kv, token.encode())
    assert list(store.scan(token.encode())) == []


@pytest.mark.parametrize("conditional_clock", ["ahead", "behind"])
def test_a_blind_write_landing_after_a_conditional_writes_judgement_wins_over_it(
    store: Store, token: StagingToken, conditional_clock: str
) -> None:
    """A conditional write judged the key, then a blind write landed (acknowledged) before the
    conditional write's value did: the condition never saw the blind write, so the only order
    of the two that explains a successful condition puts the conditional write first, and the
    blind write's value is the one read, whichever graveler's clock is ahead."""
    ahead, behind = skewed(store, +FIVE_SECONDS_US), skewed(store, -FIVE_SECONDS_US)
    conditional, blind = (ahead, behind) if conditional_clock == "ahead" else (behind, ahead)
    blind.set(token, b"k", value("before"))
    judged = conditional.read_for_write(token, b"k")
    assert judged.value == value("before")
    blind.set(token, b"k", value("blind"))
    conditional.set_if(token, b"k", value("conditional"), judged)
    assert blind.get(token, b"k") == value("blind")
    assert conditional.read_for_write(token, b"k").value == value("blind")


def test_a_conditional_write_judged_after_a_blind_write_wins_over_it(store: Store, token: StagingToken) -> None:
    """The other order: the blind write landed before the judgement, so the conditional write
    was judged on it and is the later of the two, even from a clock 10 s behind."""
    ahead, behind = skewed(store, +FIVE_SECONDS_US), skewed(store, -FIVE_SECONDS_US)
    ahead.set(token, b"k", value("blind"))
    judged = behind.read_for_write(token, b"k")
    assert judged.value == value("blind")
    behind.set_if(token, b"k", value("conditional"), judged)
    assert ahead.get(token, b"k") == value("conditional")


def test_a_conditional_write_judged_before_a_reset_stays_deleted(store: Store, token: StagingToken) -> None:
    """A conditional write judged the key, then the key was reset on a graveler whose clock is
    ahead (acknowledged), then the conditional write went through: it was judged before the
    reset, so the reset is the later of the two and the key stays deleted, for reads and for the
    next conditional writer alike (which must not finish the admitted write over the reset)."""
    ahead, behind = skewed(store, +FIVE_SECONDS_US), skewed(store, -FIVE_SECONDS_US)
    behind.set(token, b"k", value("before"))
    judged = behind.read_for_write(token, b"k")
    ahead.drop_key(token, b"k")
    behind.set_if(token, b"k", value("conditional"), judged)
    assert ahead.get(token, b"k") is None
    assert behind.read_for_write(token, b"k").value is None
    assert ahead.get(token, b"k") is None


def test_a_blind_write_stamped_as_a_conditional_write_it_followed_wins(store: Store, token: StagingToken) -> None:
    """A conditional writer judges a value stamped a and stamps its write a + 1. A blind write
    that lands after that judgement, from a writer whose clock ran behind and which never saw
    the value (it read the key before the value landed), may be stamped a + 1 too: the two tie,
    and the blind write, the later of the two, must be what the key holds."""
    judge, late = skewed(store, 0), skewed(store, -FIVE_SECONDS_US)
    judged_value = judge.set(token, b"k", value("judged"))
    read = judge.read_for_write(token, b"k")
    assert read.judged_at == judged_value
    # The late writer's stamp: one past the newest stamp it read, which was older than a.
    late.set(token, b"k", value("blind"), at=judged_value + 1)
    # Named to sort after the blind write's bytes: without precedence the larger value won.
    judge.set_if(token, b"k", value("zz-conditional"), read)
    assert judge.get(token, b"k") == value("blind")
    assert late.read_for_write(token, b"k").value == value("blind")
