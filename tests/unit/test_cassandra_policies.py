"""The Cassandra driver's policy choices, without a server (docs/design/kv.md, "Faults on a
Cassandra cluster"): which statements may be sent twice (retried or speculated), what the retry
policy does with each error, and which driver objects the configuration builds."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import ConsistencyLevel, WriteType
from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.policies import (
    ConstantSpeculativeExecutionPolicy,
    DCAwareRoundRobinPolicy,
    NoSpeculativeExecutionPolicy,
    RetryPolicy,
    TokenAwarePolicy,
)
from cassandra.query import SimpleStatement

from silt.config import CassandraConfig
from silt.kv.cassandra import (
    _LWT_PROFILE,
    _READ_PROFILE,
    _SERIAL_READ_PROFILE,
    CassandraStore,
    _RetryPolicy,
    _Suspects,
    _SuspectsLastPolicy,
    execution_profiles,
)


class _Prepared:
    def __init__(self, cql: str) -> None:
        self.cql = cql
        self.is_idempotent = False
        self.consistency_level: int | None = None


class _PreparingSession:
    def __init__(self, client_timestamps: bool) -> None:
        self.use_client_timestamp = client_timestamps

    def prepare(self, cql: str) -> _Prepared:
        return _Prepared(cql)


def _prepared(client_timestamps: bool) -> CassandraStore:
    store = CassandraStore.__new__(CassandraStore)
    store._config = CassandraConfig()
    store._session = _PreparingSession(client_timestamps)
    store._contacts = "127.0.0.1:9042"
    store._prepare()
    return store


READS = ("_get", "_get_serial", "_get_many", "_scan_all", "_scan_from")
LWTS = ("_insert_if_absent", "_update_if", "_delete_if")


@pytest.mark.parametrize("client_timestamps", [False, True])
def test_reads_and_fixed_timestamp_writes_are_idempotent_lwts_never(client_timestamps: bool) -> None:
    store = _prepared(client_timestamps)
    for name in (*READS, "_set_at", "_delete_at"):
        assert getattr(store, name).is_idempotent, name
    for name in LWTS:
        assert not getattr(store, name).is_idempotent, name
    # A plain write is stamped by its coordinator from Cassandra 2.2 on: a copy sent again could
    # land over a later write. With client timestamps (older servers) a copy is harmless.
    for name in ("_set", "_delete"):
        assert getattr(store, name).is_idempotent is client_timestamps, name
    assert store._get_serial.consistency_level == ConsistencyLevel.LOCAL_SERIAL


def test_lwts_reads_and_writes_are_each_bounded_by_their_own_timeout() -> None:
    config = CassandraConfig(request_timeout_s=3.0, lwt_timeout_s=1.0, read_timeout_s=6.5)
    profiles = execution_profiles(config, _Suspects())
    assert profiles[_LWT_PROFILE].request_timeout == 1.0
    # An LWT's read-back at SERIAL keeps the LWT's bound: one in doubt is settled within it.
    assert profiles[_SERIAL_READ_PROFILE].request_timeout == 1.0
    assert profiles[_READ_PROFILE].request_timeout == 6.5
    assert profiles[EXEC_PROFILE_DEFAULT].request_timeout == 3.0


def test_reads_may_be_sent_again_once_per_copy_and_their_plans_hold_a_host_per_send() -> None:
    config = CassandraConfig(retries=2, speculative_executions=2)
    profiles = execution_profiles(config, _Suspects())
    for name in (_READ_PROFILE, _SERIAL_READ_PROFILE):
        assert profiles[name].retry_policy.retries == 4, name
    assert profiles[EXEC_PROFILE_DEFAULT].retry_policy.retries == profiles[_LWT_PROFILE].retry_policy.retries == 2
    for name in (_READ_PROFILE, _SERIAL_READ_PROFILE):
        assert profiles[name].load_balancing_policy._passes == 1 + 2 + 4, name
    # The control connection walks the default plan to connect: a connect timeout per host listed.
    assert profiles[EXEC_PROFILE_DEFAULT].load_balancing_policy._passes == 2


def test_reads_outlast_the_servers_stock_read_timeout_by_default() -> None:
    # Cassandra's read_request_timeout_in_ms is 5 s from 2.1 to 5.0; a read held that long must
    # still have time to be sent to another coordinator after the server's ReadTimeout.
    profiles = execution_profiles(CassandraConfig(), _Suspects())
    assert profiles[_READ_PROFILE].request_timeout >= 5.0 + 1.0
    assert profiles[EXEC_PROFILE_DEFAULT].request_timeout == profiles[_LWT_PROFILE].request_timeout == 3.0


def test_profiles_route_token_aware_within_the_datacenter_and_speculate_per_config() -> None:
    config = CassandraConfig(
        local_datacenter="dc2",
        speculative_delay_s=0.3,
        speculative_executions=1,
        retries=3,
        request_timeout_s=4.0,
        read_timeout_s=9.0,
        consistency="QUORUM",
        serial_consistency="SERIAL",
    )
    profiles = execution_profiles(config, _Suspects())
    assert set(profiles) == {EXEC_PROFILE_DEFAULT, _READ_PROFILE, _SERIAL_READ_PROFILE, _LWT_PROFILE}
    for profile in profiles.values():
        suspects_last = profile.load_balancing_policy
        assert isinstance(suspects_last, _SuspectsLastPolicy)
        token_aware = suspects_last._child_policy
        assert isinstance(token_aware, TokenAwarePolicy)
        assert token_aware.shuffle_replicas is False
        assert isinstance(token_aware._child_policy, DCAwareRoundRobinPolicy)
        assert token_aware._child_policy.local_dc == "dc2"
        speculation = profile.speculative_execution_policy
        assert isinstance(speculation, ConstantSpeculativeExecutionPolicy)
        assert (speculation.delay, speculation.max_attempts) == (0.3, 1)
        assert isinstance(profile.retry_policy, _RetryPolicy) and profile.retry_policy.retries in (3, 3 + 1)
        assert profile.request_timeout == (9.0 if profile is profiles[_READ_PROFILE] else 4.0)
        assert profile.consistency_level == ConsistencyLevel.QUORUM
        assert profile.serial_consistency_level == ConsistencyLevel.SERIAL


def test_no_speculation_when_configured_off() -> None:
    profiles = execution_profiles(CassandraConfig(speculative_executions=0), _Suspects())
    assert all(isinstance(p.speculative_execution_policy, NoSpeculativeExecutionPolicy) for p in profiles.values())


def test_defaults_reach_every_replica_of_three_and_notice_a_frozen_node_within_two_seconds() -> None:
    config = CassandraConfig()
    assert config.speculative_executions == 2
    assert config.heartbeat_interval_s + config.heartbeat_timeout_s <= 2.0


def _statement(idempotent: bool, plain_write: bool = False) -> Any:
    statement = SimpleStatement("-", is_idempotent=idempotent)
    if plain_write:
        statement.silt_plain_write = True
    return statement


RETRY, RETHROW = RetryPolicy.RETRY_NEXT_HOST, RetryPolicy.RETHROW


@pytest.mark.parametrize(
    ("statement", "expected"),
    [(_statement(True), RETRY), (_statement(False), RETHROW)],
    ids=["read", "lwt"],
)
def test_read_timeouts_and_lost_connections_move_only_idempotent_statements(statement: Any, expected: int) -> None:
    policy = _RetryPolicy(2)
    assert policy.on_read_timeout(statement, 0, 2, 1, False, 0)[0] == expected
    assert policy.on_request_error(statement, 0, ConnectionError(), 0)[0] == expected
    assert policy.on_read_timeout(statement, 0, 2, 1, False, 2)[0] == RETHROW  # retries spent


def test_write_timeouts_move_plain_writes_never_lwts() -> None:
    policy = _RetryPolicy(2)
    plain = _statement(False, plain_write=True)
    assert policy.on_write_timeout(plain, 0, WriteType.SIMPLE, 2, 1, 0)[0] == RETRY
    assert policy.on_write_timeout(plain, 0, WriteType.UNLOGGED_BATCH, 2, 1, 1)[0] == RETRY
    lwt = _statement(False)
    assert policy.on_write_timeout(lwt, 0, WriteType.CAS, 2, 1, 0)[0] == RETHROW
    assert policy.on_write_timeout(lwt, 0, WriteType.SIMPLE, 2, 1, 0)[0] == RETHROW


def test_unavailable_moves_any_statement_once_unless_retries_are_off() -> None:
    lwt = _statement(False)
    assert _RetryPolicy(2).on_unavailable(lwt, 0, 2, 1, 0)[0] == RETRY
    assert _RetryPolicy(2).on_unavailable(lwt, 0, 2, 1, 1)[0] == RETHROW
    assert _RetryPolicy(0).on_unavailable(lwt, 0, 2, 1, 0)[0] == RETHROW


class _Answered:
    """A result set whose request went to these hosts, the last one answering."""

    def __init__(self, *hosts: str) -> None:
        self.response_future = type("Future", (), {"attempted_hosts": list(hosts)})()


def test_nodes_a_request_had_to_go_past_are_tried_last_for_a_while() -> None:
    suspects = _Suspects()
    suspects.add_slow(_Answered("a"))
    assert suspects.current() == set()
    suspects.add_slow(_Answered("a", "b", "c"))  # a speculative copy, then a retry, answered
    assert suspects.current() == {"a", "b"}
    suspects.add_slow(object())  # a result without a request (a scripted session's)
    assert suspects.current() == {"a", "b"}


def test_doctor_reads_server_timeouts_of_either_settings_naming() -> None:
    from silt.kv.cassandra_settings import server_timeouts_ms

    legacy = [("write_request_timeout_in_ms", "2000"), ("cas_contention_timeout_in_ms", "1000"), ("x", None)]
    assert server_timeouts_ms(legacy) == {"write": 2000.0, "cas_contention": 1000.0}
    current = [("write_request_timeout", "2000ms"), ("read_request_timeout", "5s"), ("cas_contention_timeout", "1s")]
    assert server_timeouts_ms(current) == {"write": 2000.0, "read": 5000.0, "cas_contention": 1000.0}


def test_doctor_warns_of_server_timeouts_the_client_outlasts_not_of_stock_ones() -> None:
    from silt.kv.cassandra_settings import timeout_findings

    stock = timeout_findings({"write": 2000.0, "cas_contention": 1000.0, "read": 5000.0}, CassandraConfig())
    assert all(f.ok for f in stock)
    slow = timeout_findings({"write": 10000.0, "cas_contention": 1000.0}, CassandraConfig())
    assert [f.name for f in slow if not f.ok] == ["server write timeout"]
    assert "request_timeout_s" in slow[0].detail


def test_doctor_warns_when_the_server_holds_a_read_until_the_client_has_given_up() -> None:
    from silt.kv.cassandra_settings import timeout_findings

    # A client bound at or under the server's read timeout plus a retry fails the request
    # before the server answers ReadTimeout and the read is sent elsewhere.
    for client_s in (3.0, 5.0, 5.5):
        findings = timeout_findings({"read": 5000.0}, CassandraConfig(read_timeout_s=client_s))
        assert [f.ok for f in findings] == [False], client_s
        assert "read_timeout_s to 6 s" in findings[0].detail
    assert timeout_findings({"read": 5000.0}, CassandraConfig(read_timeout_s=6.0))[0].ok
    assert timeout_findings({"read": 1500.0}, CassandraConfig(read_timeout_s=3.0))[0].ok


def test_doctor_warns_of_a_percentile_speculative_retry() -> None:
    from silt.kv.cassandra_settings import speculative_retry_finding

    assert speculative_retry_finding("ALWAYS").ok and speculative_retry_finding("always").ok
    assert speculative_retry_finding("ALWAYS").detail == "ALWAYS"
    # A fixed delay works, and the finding says what it costs while a replica is frozen.
    assert speculative_retry_finding("50.0ms").ok and speculative_retry_finding("50ms").ok
    assert "ALWAYS" in speculative_retry_finding("50ms").detail
    for option in ("99.0PERCENTILE", "99p", "NONE", None):
        assert not speculative_retry_finding(option).ok


class _FixedPlan:
    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts

    def make_query_plan(self, working_keyspace: str | None = None, query: Any = None) -> Any:
        return iter(self.hosts)


def test_plan_puts_suspects_last_and_leaves_hosts_for_a_retry_after_the_speculative_copies() -> None:
    suspects = _Suspects()
    suspects.add("a")
    policy = _SuspectsLastPolicy(_FixedPlan(["a", "b", "c"]), suspects)
    assert list(policy.make_query_plan()) == ["b", "c", "a", "b", "c", "a"]
    assert list(_SuspectsLastPolicy(_FixedPlan(["a", "b"]), _Suspects(), passes=3).make_query_plan()) == ["a", "b"] * 3


def test_a_slow_request_is_logged_once_with_the_nodes_it_went_to(caplog: pytest.LogCaptureFixture) -> None:
    from types import SimpleNamespace

    from silt.kv.cassandra import _SlowRequests

    hosts = [SimpleNamespace(endpoint="127.0.0.2:9042"), SimpleNamespace(endpoint="127.0.0.3:9042")]
    future: Any = SimpleNamespace(attempted_hosts=hosts)
    slow = _SlowRequests()
    with caplog.at_level("INFO", logger="silt.kv.cassandra"):
        slow.note("get", future, 0.99)
        assert not caplog.records
        slow.note("get", future, 2.5)
    assert [r.getMessage() for r in caplog.records] == [
        "cassandra: get took 2.50 s (sent to 127.0.0.2:9042, 127.0.0.3:9042)"
    ]


def test_slow_requests_are_logged_at_most_ten_lines_a_second_and_say_how_many_were_left_out(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from silt.kv import cassandra

    now = [100.2]
    monkeypatch.setattr(cassandra.time, "monotonic", lambda: now[0])
    future: Any = SimpleNamespace(attempted_hosts=[])
    slow = cassandra._SlowRequests()
    with caplog.at_level("INFO", logger="silt.kv.cassandra"):
        for _ in range(25):
            slow.note("scan", future, 1.5)
        now[0] = 101.1
        slow.note("scan", future, 1.5)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 11
    assert lines[-1] == (
        "cassandra: scan took 1.50 s (sent to no node); 15 more slow requests not logged in the 1 s before this one"
    )
