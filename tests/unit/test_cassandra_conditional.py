"""CassandraStore._conditional's handling of an LWT whose outcome a fault left unknown, with the
driver session replaced by scripted answers (the real server's side: tests/integration/kv)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cassandra import Unavailable as DriverUnavailable
from cassandra import WriteTimeout

from silt.config import CassandraConfig
from silt.errors import OutcomeUnknown, PredicateFailed, Unavailable
from silt.kv.cassandra import _LWT_ATTEMPTS, _LWT_MAX_SENDS, CassandraStore, _Change, _Suspects
from silt.kv.lwt_patience import WINDOW, LwtPatience

CHANGE = _Change(b"p", b"k", b"before", b"after")


def scripted(
    sends: list[BaseException | bool | None], serial_reads: list[bytes | None], *, first_answers: bool = True
) -> CassandraStore:
    """A store whose LWT sends raise (an Unavailable caused by the given driver error), apply
    (None) or do not (False) in turn, and whose SERIAL read-backs return the given values in
    turn. Without first_answers, the first send's answer comes only when it is waited for to
    the end: the patience (0.05 s here) runs out first."""
    store = CassandraStore.__new__(CassandraStore)
    store._config = CassandraConfig()
    store._contacts = "127.0.0.1:9042"
    store._fence = None
    store._get_serial = object()
    store._lwt_patience = _patience_of(0.05)
    store._suspects = _Suspects()

    class Row:
        def __init__(self, values: tuple[Any, ...]) -> None:
            self._values = values

        def one(self) -> tuple[Any, ...]:
            return self._values

    def answer(op: str) -> Row:
        outcome = sends.pop(0)
        if outcome is None or outcome is False:
            return Row((outcome is None,))
        assert isinstance(outcome, BaseException)
        raise Unavailable(f"cassandra: {op} failed") from outcome

    def execute(op: str, statement: object, params: object, profile: object = None) -> Row:
        if statement is store._get_serial:
            return Row((serial_reads.pop(0),))
        return answer(op)

    class Future:
        attempted_hosts: list[object] = []

        def add_callbacks(self, callback: Any, errback: Any) -> None:
            if first_answers:
                callback(None)

    store._execute = execute  # type: ignore[method-assign]
    store._send = lambda op, statement, params, profile: Future()  # type: ignore[method-assign]
    store._await = lambda op, future: answer(op)  # type: ignore[method-assign]
    return store


def _patience_of(bound_s: float) -> LwtPatience:
    """A patience whose bound is bound_s, as after many fast sends."""
    patience = LwtPatience(3.0, 3.0, bound_s)
    for _ in range(2 * WINDOW):
        patience.answered(0.001)
    assert patience.bound_s() == bound_s
    return patience


class RecordingPatience(LwtPatience):
    def __init__(self) -> None:
        super().__init__(3.0, 3.0, 0.05)
        for _ in range(2 * WINDOW):
            super().answered(0.001)
        self.answers: list[float] = []
        self.given_up: list[float] = []

    def answered(self, seconds: float) -> None:
        self.answers.append(seconds)

    def gave_up(self, bound_s: float) -> None:
        self.given_up.append(bound_s)


def write_timeout() -> WriteTimeout:
    return WriteTimeout("timeout", consistency=4, required_responses=2, received_responses=1, write_type=5)


def test_an_unknown_lwt_read_back_unapplied_is_sent_again() -> None:
    store = scripted([write_timeout(), None], [b"before"])
    store._conditional("set_if", object(), (), CHANGE, on_values=True)


def test_a_first_send_refused_up_front_is_a_plain_unavailable() -> None:
    store = scripted([DriverUnavailable("not enough replicas")], [])
    with pytest.raises(Unavailable) as err:
        store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert not isinstance(err.value, OutcomeUnknown)


def test_a_resend_refused_up_front_leaves_the_outcome_unknown() -> None:
    """The read-back found the first send not applied, but a proposal of it accepted by replicas
    the read did not ask may still be committed by a later Paxos round; the resend, refused
    before it ran, settled nothing: OutcomeUnknown, never "nothing was written"."""
    store = scripted([write_timeout(), DriverUnavailable("not enough replicas")], [b"before"])
    with pytest.raises(OutcomeUnknown) as err:
        store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert "may still apply" in str(err.value)


def test_a_first_send_past_its_patience_read_back_applied_is_done_without_waiting_for_it() -> None:
    sends: list[BaseException | bool | None] = [None]
    store = scripted(sends, [b"after"], first_answers=False)
    store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert sends == [None], "the first send's own answer was never needed"


def test_a_first_send_past_its_patience_read_back_unapplied_is_sent_again_when_conditioned_on_a_value() -> None:
    # The resend applies; the first send's answer is never waited for.
    sends: list[BaseException | bool | None] = [None, None]
    store = scripted(sends, [b"before"], first_answers=False)
    store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert len(sends) == 1


def test_a_first_send_conditioned_on_absence_is_never_sent_again_while_it_may_still_apply() -> None:
    """A slow coordinator retries its round's condition: a copy of an IF NOT EXISTS sent again
    after a read-back could let the first copy apply after a later delete. So it waits for its
    own answer."""
    created = _Change(b"p", b"k", None, b"after")
    sends: list[BaseException | bool | None] = [None, None]
    store = scripted(sends, [None], first_answers=False)
    store._conditional("set_if", object(), (), created, on_values=False)
    assert len(sends) == 1, "one send only: its own answer"


def test_a_first_send_past_its_patience_with_another_value_current_takes_its_own_answer() -> None:
    """Another writer got in: only the first send's own answer says whether ours came first, so
    it is waited for, and a plain not-applied answer is PredicateFailed, never unknown."""
    store = scripted([False], [b"someone else's"], first_answers=False)
    with pytest.raises(PredicateFailed):
        store._conditional("set_if", object(), (), CHANGE, on_values=True)


def test_a_send_answered_in_time_feeds_the_patience_and_one_past_it_counts_at_the_bound() -> None:
    for first_answers, answers, given_up in ((True, 1, []), (False, 0, [0.05])):
        store = scripted([None], [b"after"], first_answers=first_answers)
        patience = store._lwt_patience = RecordingPatience()
        store._conditional("set_if", object(), (), CHANGE, on_values=True)
        assert (len(patience.answers), patience.given_up) == (answers, given_up)


def test_faults_in_quick_succession_are_sent_past_three_within_the_bound() -> None:
    """A node resuming after a pause cuts rounds short for about a second: three sends found
    not applied within the LWT bound are not a reason to give up, a fourth may apply."""
    sends: list[BaseException | bool | None] = [write_timeout(), write_timeout(), write_timeout(), None]
    store = scripted(sends, [b"before"] * 3)
    store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert sends == []


def test_faults_that_never_stop_end_in_an_unknown_outcome_naming_the_last() -> None:
    sends: list[BaseException | bool | None] = [write_timeout()] * 10
    store = scripted(sends, [b"before"] * 10)
    with pytest.raises(OutcomeUnknown) as err:
        store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert len(sends) == 10 - _LWT_MAX_SENDS, "at most _LWT_MAX_SENDS sends"
    assert f"not applied after {_LWT_MAX_SENDS} sends" in str(err.value)
    assert "(the last: write timed out on the server (CAS, 1 of 2 replicas answered))" in str(err.value)


def test_faults_past_the_bound_stop_after_three_sends() -> None:
    """Sends that each take longer than the LWT bound had their time: three, as before."""
    sends: list[BaseException | bool | None] = [write_timeout()] * 10
    store = scripted(sends, [b"before"] * 10)
    store._config = CassandraConfig(lwt_timeout_s=0.01)
    execute = store._execute

    def slow_execute(op: str, statement: object, params: tuple[Any, ...] | None, profile: object = None) -> Any:
        time.sleep(0.01)
        return execute(op, statement, params, profile)

    store._execute = slow_execute  # type: ignore[method-assign]
    with pytest.raises(OutcomeUnknown) as err:
        store._conditional("set_if", object(), (), CHANGE, on_values=True)
    assert len(sends) == 10 - _LWT_ATTEMPTS
    assert f"not applied after {_LWT_ATTEMPTS} sends" in str(err.value)


def test_a_create_cut_short_in_quick_succession_still_stops_after_three_sends() -> None:
    """A condition on absence repeats: every copy sent could apply after a later one and a
    delete, so only LWTs conditioned on values get the extra sends."""
    created = _Change(b"p", b"k", None, b"after")
    sends: list[BaseException | bool | None] = [write_timeout()] * 10
    store = scripted(sends, [None] * 10)
    with pytest.raises(OutcomeUnknown) as err:
        store._conditional("set_if", object(), (), created, on_values=False)
    assert len(sends) == 10 - _LWT_ATTEMPTS
    assert f"not applied after {_LWT_ATTEMPTS} sends" in str(err.value)
