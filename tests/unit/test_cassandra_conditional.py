"""CassandraStore._conditional's handling of an LWT whose outcome a fault left unknown, with the
driver session replaced by scripted answers (the real server's side: tests/integration/kv)."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import OperationTimedOut, WriteTimeout
from cassandra import Unavailable as DriverUnavailable

from silt.config import CassandraConfig
from silt.errors import OutcomeUnknown, Unavailable
from silt.kv.cassandra import CassandraStore, _Change
from silt.kv.lwt_patience import LwtPatience

CHANGE = _Change(b"p", b"k", b"before", b"after")


def scripted(
    sends: list[BaseException | None], serial_reads: list[bytes], waits: list[float | None] | None = None
) -> CassandraStore:
    """A store whose LWT sends raise (an Unavailable caused by the given driver error) or apply
    (None) in turn, and whose SERIAL read-backs return the given values in turn; each send's
    bound (None: the profile's whole timeout) is appended to waits."""
    store = CassandraStore.__new__(CassandraStore)
    store._config = CassandraConfig()
    store._lwt_patience = LwtPatience(3.0, 3.0, 0.3)
    store._contacts = "127.0.0.1:9042"
    store._fence = None
    store._get_serial = object()

    class Row:
        def __init__(self, values: tuple[Any, ...]) -> None:
            self._values = values

        def one(self) -> tuple[Any, ...]:
            return self._values

    def execute(
        op: str, statement: object, params: object, profile: object = None, timeout_s: float | None = None
    ) -> Row:
        if statement is store._get_serial:
            return Row((serial_reads.pop(0),))
        if waits is not None:
            waits.append(timeout_s)
        error = sends.pop(0)
        if error is None:
            return Row((True,))
        raise Unavailable(f"cassandra: {op} failed") from error

    store._execute = execute  # type: ignore[method-assign]
    return store


def write_timeout() -> WriteTimeout:
    return WriteTimeout("timeout", consistency=4, required_responses=2, received_responses=1, write_type=5)


def test_an_unknown_lwt_read_back_unapplied_is_sent_again() -> None:
    store = scripted([write_timeout(), None], [b"before"])
    store._conditional("set_if", object(), (), CHANGE)


def test_a_first_send_refused_up_front_is_a_plain_unavailable() -> None:
    store = scripted([DriverUnavailable("not enough replicas")], [])
    with pytest.raises(Unavailable) as err:
        store._conditional("set_if", object(), (), CHANGE)
    assert not isinstance(err.value, OutcomeUnknown)


def test_a_resend_refused_up_front_leaves_the_outcome_unknown() -> None:
    """The read-back found the first send not applied, but a proposal of it accepted by replicas
    the read did not ask may still be committed by a later Paxos round; the resend, refused
    before it ran, settled nothing: OutcomeUnknown, never "nothing was written"."""
    store = scripted([write_timeout(), DriverUnavailable("not enough replicas")], [b"before"])
    with pytest.raises(OutcomeUnknown) as err:
        store._conditional("set_if", object(), (), CHANGE)
    assert "may still apply" in str(err.value)


def test_only_the_first_send_is_bounded_by_the_patience_and_a_send_given_up_counts_as_slow() -> None:
    """A frozen coordinator's round is given up after the patience's bound and read back; the
    resend waits the whole timeout, so a busy cluster's slow rounds are not given up twice, and
    the send given up enters the patience's samples at its bound."""
    waits: list[float | None] = []
    store = scripted([OperationTimedOut("no answer"), None], [b"before"], waits)
    given_up: list[float] = []
    store._lwt_patience.gave_up = given_up.append  # type: ignore[method-assign]
    store._conditional("set_if", object(), (), CHANGE)
    assert waits == [3.0, None]
    assert given_up == [3.0]


def test_a_first_send_timed_out_and_found_applied_is_done() -> None:
    store = scripted([OperationTimedOut("no answer")], [b"after"])
    store._conditional("set_if", object(), (), CHANGE)
