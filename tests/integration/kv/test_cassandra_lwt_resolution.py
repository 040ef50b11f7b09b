"""How the Cassandra driver settles an LWT whose outcome a fault left unknown (docs/design/kv.md,
"An LWT whose outcome is unknown"), every branch, without a server: the store's one call into
the driver session is replaced by a script of answers. The same code runs against real nodes
in test_cluster_faults.py, where which branch a kill hits is down to timing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from cassandra import OperationTimedOut, WriteTimeout, WriteType
from cassandra import Unavailable as DriverUnavailable
from cassandra.query import SimpleStatement

from silt.config import CassandraConfig
from silt.errors import OutcomeUnknown, PredicateFailed, Unavailable
from silt.kv.cassandra import _LWT_MAX_SENDS, _LWT_PROFILE, _SERIAL_READ_PROFILE, CassandraStore, _Suspects
from silt.kv.lwt_patience import LwtPatience
from silt.kv.store import Predicate


class _Rows:
    def __init__(self, *row: object) -> None:
        self._row = row or None

    def one(self) -> tuple[object, ...] | None:
        return self._row


Step = Callable[[], _Rows]


def applied(flag: bool) -> Step:
    return lambda: _Rows(flag)


def value(current: bytes | None) -> Step:
    return lambda: _Rows(current) if current is not None else _Rows()


def fails(exc: BaseException) -> Step:
    def raise_it() -> _Rows:
        raise exc

    return raise_it


class _Answered:
    """A request the script has answered, as the driver's ResponseFuture shows it."""

    attempted_hosts: list[object] = []

    def __init__(self, step: Step, timeout: float) -> None:
        self._step = step
        self.timeout = timeout

    def add_callbacks(self, callback: Callable[[object], None], errback: Callable[[object], None]) -> None:
        callback(None)

    def result(self) -> _Rows:
        return self._step()


class _ScriptedSession:
    """Answers each request with the next step; records (kind, profile) of every call."""

    def __init__(self, store: CassandraStore, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.calls: list[tuple[str, object]] = []
        self._store = store

    def execute_async(self, statement: Any, params: Any, execution_profile: object) -> _Answered:
        kind = "serial read" if statement is self._store._get_serial else "lwt"
        self.calls.append((kind, execution_profile))
        assert self.steps, f"unexpected {kind}"
        config = self._store._config
        assert execution_profile in (_LWT_PROFILE, _SERIAL_READ_PROFILE), execution_profile
        return _Answered(self.steps.pop(0), config.lwt_bound_s)


def scripted_store(steps: list[Step]) -> tuple[CassandraStore, _ScriptedSession]:
    store = CassandraStore.__new__(CassandraStore)
    store._config = CassandraConfig(serial_consistency="SERIAL", request_timeout_s=3.0)
    store._contacts = "127.0.0.1:9042"
    store._closed = False
    store._close_lock = threading.Lock()
    store._fence = None
    # Stand-ins for the prepared statements, with their numbers of parameters (a batch
    # formats them into its text).
    arity = {"_get_serial": 2, "_insert_if_absent": 3, "_update_if": 4, "_set": 3, "_set_at": 4}
    arity |= {"_delete": 2, "_delete_at": 3, "_delete_if": 3}
    for name, count in arity.items():
        setattr(store, name, SimpleStatement(f"-- {name}" + " %s" * count))
    store._suspects = _Suspects()
    store._lwt_patience = LwtPatience(3.0, 3.0, 0.3)
    session = _ScriptedSession(store, steps)
    store._session = session
    return store, session


TIMEOUT = OperationTimedOut("timed out", None)
CAS_TIMEOUT = WriteTimeout("cas", write_type=WriteType.CAS)


@pytest.mark.parametrize("fault", [TIMEOUT, CAS_TIMEOUT], ids=["client timeout", "CAS write timeout"])
def test_read_back_showing_the_new_value_means_applied(fault: BaseException) -> None:
    store, session = scripted_store([fails(fault), value(b"new")])
    store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    assert [kind for kind, _ in session.calls] == ["lwt", "serial read"]
    assert session.calls[0][1] == _LWT_PROFILE  # bounded by lwt_timeout_s
    assert session.calls[1][1] == _SERIAL_READ_PROFILE  # the read-back may go to another replica early


def test_read_back_showing_the_old_value_sends_it_again() -> None:
    store, session = scripted_store([fails(TIMEOUT), value(b"old"), applied(True)])
    store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    assert [kind for kind, _ in session.calls] == ["lwt", "serial read", "lwt"]


def test_create_if_absent_still_absent_is_sent_again() -> None:
    store, session = scripted_store([fails(TIMEOUT), value(None), applied(True)])
    store.set_if(b"p", b"k", b"new", None)
    assert [kind for kind, _ in session.calls] == ["lwt", "serial read", "lwt"]


def test_a_resend_refused_because_the_first_copy_landed_meanwhile_is_success() -> None:
    # The first copy was held by a frozen coordinator and applied after our read-back.
    store, session = scripted_store([fails(TIMEOUT), value(b"old"), applied(False), value(b"new")])
    store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    assert [kind for kind, _ in session.calls] == ["lwt", "serial read", "lwt", "serial read"]


def test_a_resend_refused_for_another_writer_is_unknown_not_predicate_failed() -> None:
    store, _ = scripted_store([fails(TIMEOUT), value(b"old"), applied(False), value(b"theirs")])
    with pytest.raises(OutcomeUnknown, match="outcome unknown"):
        store.set_if(b"p", b"k", b"new", Predicate(b"old"))


def test_another_writers_value_cannot_be_told_apart_so_the_outcome_stays_unknown() -> None:
    store, _ = scripted_store([fails(TIMEOUT), value(b"theirs")])
    with pytest.raises(OutcomeUnknown, match=r"outcome unknown.*another writer has changed the key"):
        store.set_if(b"p", b"k", b"new", Predicate(b"old"))


def test_a_failed_read_back_keeps_the_outcome_unknown_and_says_why() -> None:
    store, _ = scripted_store([fails(TIMEOUT), fails(TIMEOUT)])
    with pytest.raises(OutcomeUnknown) as err:
        store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    message = str(err.value)
    assert "outcome unknown" in message and "reading it back at SERIAL failed too" in message
    assert "\n" not in message


def test_faults_on_every_send_end_unknown_after_a_bounded_number_of_sends() -> None:
    # Faults in quick succession: sent again past three while the LWT bound has not run out,
    # up to _LWT_MAX_SENDS in all (faults spread over the bound stop at _LWT_ATTEMPTS:
    # tests/unit/test_cassandra_conditional.py).
    steps: list[Step] = []
    for _ in range(_LWT_MAX_SENDS):
        steps += [fails(TIMEOUT), value(b"old")]
    store, session = scripted_store(steps)
    with pytest.raises(OutcomeUnknown, match=f"outcome unknown.*not applied after {_LWT_MAX_SENDS} sends"):
        store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    assert [kind for kind, _ in session.calls].count("lwt") == _LWT_MAX_SENDS


def test_refused_up_front_is_not_attempted_and_not_read_back() -> None:
    store, session = scripted_store(
        [fails(DriverUnavailable("no", consistency=8, required_replicas=2, alive_replicas=1))]
    )
    with pytest.raises(Unavailable, match="not enough replicas alive for SERIAL") as err:
        store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    assert not isinstance(err.value, OutcomeUnknown)  # certainly not applied: not in doubt
    assert [kind for kind, _ in session.calls] == ["lwt"]


def test_not_applied_without_a_fault_is_predicate_failed() -> None:
    store, session = scripted_store([applied(False)])
    with pytest.raises(PredicateFailed):
        store.set_if(b"p", b"k", b"new", Predicate(b"old"))
    assert [kind for kind, _ in session.calls] == ["lwt"]


def test_a_conditional_delete_in_doubt_is_applied_when_the_key_is_gone() -> None:
    store, session = scripted_store([fails(CAS_TIMEOUT), value(None)])
    store.apply(b"p", [(b"journal", b"row")], [b"k"], condition=(b"k", Predicate(b"old")))
    assert [kind for kind, _ in session.calls] == ["lwt", "serial read"]


def test_a_conditional_apply_overtaken_by_another_writer_is_outcome_unknown() -> None:
    # The type that graveler resolves for branch records (engine/core/updater.py); still
    # an Unavailable for every other caller.
    store, _ = scripted_store([fails(CAS_TIMEOUT), value(b"theirs")])
    with pytest.raises(OutcomeUnknown, match=r"apply .*outcome unknown.*another writer has changed the key") as err:
        store.apply(b"p", [(b"k", b"new"), (b"journal", b"row")], condition=(b"k", Predicate(b"old")))
    assert isinstance(err.value, Unavailable)
