"""Silt's read profile driven through the driver's own ResponseFuture, over a scripted session.

What is checked is how the driver's request object, Silt's retry policy and its query plan work
together when every coordinator holding a copy of a read answers a server ReadTimeout (a
Cassandra 2.1 repair read waiting on a replica that died): the read must be sent again, not
ended by the second or third timeout while a retry may be about to answer. Timers are fired by
the test, so nothing here depends on time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from cassandra import ReadTimeout
from cassandra.cluster import ResponseFuture
from cassandra.protocol import RESULT_KIND_ROWS, ReadTimeoutErrorMessage, ResultMessage

from silt.config import CassandraConfig
from silt.kv.cassandra import _READ_PROFILE, _Suspects, execution_profiles


class _Timer:
    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Timers:
    """The driver's timer factory: timers are kept, and fired by the test."""

    def __init__(self) -> None:
        self.made: list[_Timer] = []

    def create_timer(self, delay: float, fn: Callable[[], None]) -> _Timer:
        timer = _Timer(fn)
        self.made.append(timer)
        return timer

    def fire_next_speculation(self, future: ResponseFuture) -> None:
        timer = next(t for t in self.made if not t.cancelled and t.fn == future._on_speculative_execute)
        self.made.remove(timer)
        timer.fn()


class _Connection:
    def __init__(self) -> None:
        self.pending: dict[int, Callable[[Any], None]] = {}
        self._ids = itertools.count(1)

    def send_msg(self, message: Any, request_id: int, cb: Callable[[Any], None], **_: Any) -> int:
        self.pending[request_id] = cb
        return 1

    def answer_oldest(self, response: Any) -> None:
        cb = self.pending.pop(min(self.pending))
        cb(response)


class _Pool:
    is_shutdown = False

    def __init__(self) -> None:
        self.connection = _Connection()

    def borrow_connection(self, timeout: float) -> tuple[_Connection, int]:
        return self.connection, next(self.connection._ids)

    def return_connection(self, connection: _Connection, stream_was_orphaned: bool = False) -> None:
        pass


class _Host:
    def __init__(self, name: str) -> None:
        self.endpoint = name

    def __repr__(self) -> str:
        return self.endpoint


class _Session:
    keyspace = None

    def __init__(self, live: list[_Host]) -> None:
        self._pools = {host: _Pool() for host in live}  # a host marked down has no pool
        self.cluster = type("Cluster", (), {"connection_class": _Timers()})()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)


class _Replicas:
    """The token-aware child plan: the partition's replicas in ring order."""

    def __init__(self, hosts: list[_Host]) -> None:
        self.hosts = hosts

    def make_query_plan(self, working_keyspace: str | None = None, query: Any = None) -> list[_Host]:
        return list(self.hosts)


class _Message:
    consistency_level = 4
    paging_state = None


class _Read:
    is_idempotent = True
    keyspace = None


def _server_read_timeout() -> ReadTimeoutErrorMessage:
    # What a 2.1 coordinator answers when its repair read waited for every replica it contacted.
    info = {"consistency": 4, "required_responses": 3, "received_responses": 2, "data_retrieved": True}
    return ReadTimeoutErrorMessage(code=0x1200, message="Operation timed out", info=info)


def _rows() -> ResultMessage:
    message = ResultMessage(kind=RESULT_KIND_ROWS)
    message.paging_state = None
    message.column_names = ["value"]
    message.column_types = []
    message.parsed_rows = [(b"v",)]
    return message


def _read(replicas: list[_Host], live: list[_Host], config: CassandraConfig) -> tuple[ResponseFuture, _Session]:
    session = _Session(live)
    profile = execution_profiles(config, _Suspects())[_READ_PROFILE]
    plan = profile.load_balancing_policy
    plan._child_policy = _Replicas(replicas)
    future = ResponseFuture(
        session,
        _Message(),
        _Read(),
        profile.request_timeout,
        retry_policy=profile.retry_policy,
        row_factory=lambda names, rows: rows,
        load_balancer=plan,
        speculative_execution_plan=profile.speculative_execution_policy.new_plan(None, None),
    )
    future.send_request()
    timers: _Timers = session.cluster.connection_class
    for _ in range(config.speculative_executions):
        timers.fire_next_speculation(future)
    return future, session


@pytest.mark.parametrize("dead_marked_down", [True, False], ids=["driver saw the kill", "driver not yet told"])
def test_a_read_every_copy_of_which_the_server_timed_out_is_sent_again_and_answered(dead_marked_down: bool) -> None:
    a, b, c = _Host("a"), _Host("b"), _Host("c")
    live = [a, b] if dead_marked_down else [a, b, c]
    future, session = _read([c, a, b], live, CassandraConfig())
    copies = list(future.attempted_hosts)
    assert len(copies) == 3  # the first send and two speculative copies
    for host in copies:  # the server answers ReadTimeout to each, about 5 s after it was sent
        session._pools[host].connection.answer_oldest(_server_read_timeout())
        assert not future._event.is_set(), f"ended by the timeout from {host}: {future._final_exception!r}"
    retried = future.attempted_hosts[len(copies) :]
    assert len(retried) == 3 and all(host in live for host in retried)
    # A coordinator that by then reads around the dead node answers the last retry.
    session._pools[retried[-1]].connection.answer_oldest(_rows())
    assert list(future.result()) == [(b"v",)]


def test_a_read_whose_retries_all_time_out_too_ends_with_the_servers_timeout() -> None:
    a, b = _Host("a"), _Host("b")
    future, session = _read([a, b], [a, b], CassandraConfig(retries=1, speculative_executions=1))
    for _ in range(1 + 1 + 1 + 1):  # the first send, one copy, then a retry for each (budget 2)
        pending = [h for h in (a, b) if session._pools[h].connection.pending]
        session._pools[pending[0]].connection.answer_oldest(_server_read_timeout())
    with pytest.raises(ReadTimeout):
        future.result()


class _Page:
    def __init__(self, rows: list[tuple[bytes, bytes]], paging_state: bytes | None) -> None:
        self.current_rows = rows
        self.paging_state = paging_state


class _PageFuture:
    attempted_hosts: list[object] = []
    timeout = 7.0

    def __init__(self, page: _Page) -> None:
        self._page = page

    def result(self) -> _Page:
        return self._page


_SCAN_ALL, _SCAN_FROM = object(), object()


class _PagingSession:
    """A partition of keys a to e read in pages of two. Its paging state is what a speculative
    copy answering late may leave on the request: wrong, here on purpose (None on a full page)."""

    def __init__(self) -> None:
        self.rows = [(k, k.upper()) for k in (b"a", b"b", b"c", b"d", b"e")]
        self.requests: list[tuple[object, bytes | None]] = []
        self.pages: list[list[tuple[bytes, bytes]]] = []

    def execute_async(self, statement: Any, params: Any, execution_profile: object) -> _PageFuture:
        start = params[1] if statement is _SCAN_FROM else None
        self.requests.append((execution_profile, start))
        rows = [row for row in self.rows if start is None or row[0] >= start][:2]
        self.pages.append(rows)
        return _PageFuture(_Page(rows, None))


def test_each_page_of_a_scan_is_read_from_the_key_after_the_last_one_returned() -> None:
    from silt.kv.cassandra import CassandraStore

    store = CassandraStore.__new__(CassandraStore)
    store._config = CassandraConfig(page_size=2)
    store._closed = False
    store._suspects = _Suspects()
    store._scan_from = _SCAN_FROM
    session = _PagingSession()
    store._session = session
    scan = store._scan(_SCAN_ALL, (b"p",))
    assert session.requests == []  # nothing sent before the first entry is asked for
    assert [next(scan).key, next(scan).key] == [b"a", b"b"]
    assert session.requests == [(_READ_PROFILE, None)]
    # A full page goes on, whatever the paging state says, from the key after its last.
    assert next(scan).key == b"c"
    assert session.requests == [(_READ_PROFILE, None), (_READ_PROFILE, b"b\x00")]
    assert session.pages[0] == []  # a page read is let go, though the driver holds its request a while
    assert [entry.key for entry in scan] == [b"d", b"e"]
    # The short page ends it: no request after it.
    assert [start for _, start in session.requests] == [None, b"b\x00", b"d\x00"]
