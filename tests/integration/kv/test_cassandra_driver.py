"""What only the Cassandra driver has to get right: schema, LWT ordering, outages.

The Store semantics every driver shares are in test_conformance.py; these run against the
real Cassandra of tests/support/cassandra.py, some through a TCP proxy that plays a node
going away, coming back, or hanging.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RoundRobinPolicy

from silt.errors import NotFound, OutcomeUnknown, PredicateFailed, Unavailable
from silt.free_ports import free_port
from silt.kv import Store, open_store
from silt.kv.store import Predicate
from tests.support.cassandra import CassandraServer
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.cassandra

KEYSPACE = "silt_driver_tests"


@pytest.fixture(scope="module")
def store(cassandra_server: CassandraServer) -> Iterator[Store]:
    opened = open_store(cassandra_server.database_config(KEYSPACE))
    yield opened
    opened.close()


@pytest.fixture
def raw_cluster(cassandra_server: CassandraServer) -> Iterator[Cluster]:
    """A plain driver connection, to look at the schema behind the store's back."""
    extra = {} if cassandra_server.protocol_version is None else {"protocol_version": cassandra_server.protocol_version}
    cluster = Cluster(
        [cassandra_server.host],
        port=cassandra_server.port,
        execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=RoundRobinPolicy())},
        **extra,
    )
    cluster.connect()
    yield cluster
    cluster.shutdown()


def _wait_until_ok(store: Store, partition: bytes, key: bytes, within_s: float) -> float:
    """Seconds until store.get succeeds again; fails the test after within_s."""
    started = time.monotonic()
    while True:
        try:
            store.get(partition, key)
            return time.monotonic() - started
        except Unavailable:
            if time.monotonic() - started > within_s:
                raise
            time.sleep(0.1)


# --- schema ------------------------------------------------------------------------------


def test_creates_keyspace_and_table_on_a_new_keyspace(cassandra_server: CassandraServer, raw_cluster: Cluster) -> None:
    keyspace = f"silt_schema_{uuid.uuid4().hex[:12]}"
    session = raw_cluster.connect()
    try:
        with open_store(cassandra_server.database_config(keyspace, replication_factor=1)) as store:
            store.set(b"p", b"k", b"v")
            assert store.get(b"p", b"k").value == b"v"

        raw_cluster.refresh_schema_metadata()
        meta = raw_cluster.metadata.keyspaces[keyspace]
        assert meta.replication_strategy.name == "SimpleStrategy"
        assert meta.replication_strategy.replication_factor == 1
        table = meta.tables["kv"]
        assert [c.name for c in table.partition_key] == ["partition_key"]
        assert [c.name for c in table.clustering_key] == ["key"]
        assert {name: col.cql_type for name, col in table.columns.items()} == {
            "partition_key": "blob",
            "key": "blob",
            "value": "blob",
        }
        # A coordinator asks one replica more than it needs at once, not after the table's percentile.
        assert table.options["speculative_retry"].upper() == "ALWAYS", table.options["speculative_retry"]

        # A second store finds the schema in place and sees the data.
        with open_store(cassandra_server.database_config(keyspace)) as again:
            assert again.get(b"p", b"k").value == b"v"
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)


def test_missing_schema_without_create_schema_is_a_clear_error(cassandra_server: CassandraServer) -> None:
    keyspace = f"silt_absent_{uuid.uuid4().hex[:12]}"
    with pytest.raises(Unavailable) as err:
        open_store(cassandra_server.database_config(keyspace, create_schema=False))
    message = str(err.value)
    assert "\n" not in message
    assert f"{keyspace}.kv" in message and "create_schema is false" in message


# --- values and LWTs -----------------------------------------------------------------------


def test_empty_value_exists_for_plain_and_conditional_writes(store: Store, partition: bytes) -> None:
    store.set(partition, b"plain", b"")
    got = store.get(partition, b"plain")
    assert got.value == b""
    with pytest.raises(PredicateFailed):
        store.set_if(partition, b"plain", b"x", None)  # it exists
    store.set_if(partition, b"plain", b"x", got.predicate)  # IF value = 0x matches
    assert store.get(partition, b"plain").value == b"x"
    store.set_if(partition, b"plain", b"", Predicate(b"x"))
    assert store.get(partition, b"plain").value == b""

    store.set_if(partition, b"lwt", b"", None)
    assert store.get(partition, b"lwt").value == b""
    assert [(e.key, e.value) for e in store.scan(partition)] == [(b"lwt", b""), (b"plain", b"")]


def test_one_mebibyte_predicate(store: Store, partition: bytes) -> None:
    big = bytes(range(256)) * 4096
    store.set_if(partition, b"k", big, None)
    store.set_if(partition, b"k", big[::-1], store.get(partition, b"k").predicate)
    assert store.get(partition, b"k").value == big[::-1]


def test_plain_writes_and_lwts_on_one_key_keep_their_order(store: Store, partition: bytes) -> None:
    # Cassandra orders writes by timestamp, and an LWT's is its Paxos ballot: if plain
    # writes took timestamps from another clock, a set_if right after a set (or a set right
    # after a set_if) could be shadowed by the earlier write. The LWT's values sort below
    # the plain ones so that a timestamp tie would also show up as a lost write.
    for i in range(150):
        key = f"k{i % 5}".encode()
        store.set(partition, key, b"\x7f-plain")
        store.set_if(partition, key, b"\x01-lwt", Predicate(b"\x7f-plain"))
        assert store.get(partition, key).value == b"\x01-lwt", f"iteration {i}: set_if lost to an earlier set"
        store.set(partition, key, b"\x02-plain")
        assert store.get(partition, key).value == b"\x02-plain", f"iteration {i}: set lost to an earlier set_if"
        store.set_if(partition, key, b"\x01-lwt", Predicate(b"\x02-plain"))
        store.delete(partition, key)
        with pytest.raises(NotFound):
            store.get(partition, key)


def _race(stores: list[Store], partition: bytes, predicate: Predicate, tag: str) -> dict[int, str]:
    """Every store set_ifs one key at once; returns each contender's outcome."""
    barrier = threading.Barrier(len(stores))
    outcomes: dict[int, str] = {}

    def contend(i: int) -> None:
        barrier.wait()
        try:
            stores[i].set_if(partition, b"branch", f"{tag}-c{i}".encode(), predicate)
            outcomes[i] = "won"
        except PredicateFailed:
            outcomes[i] = "lost"
        except Exception as exc:  # reported in the assertion: a driver error is a failure
            outcomes[i] = repr(exc)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_lwt_race_between_separate_clients_has_one_winner(cassandra_server: CassandraServer, partition: bytes) -> None:
    # Unlike the conformance race (one store, many threads), each contender here has its
    # own store, hence its own connections: as separate processes would.
    contenders = 6
    config = cassandra_server.database_config(KEYSPACE)
    stores = [open_store(config) for _ in range(contenders)]
    try:
        stores[0].set(partition, b"branch", b"base")
        for round_no in range(5):
            predicate = stores[0].get(partition, b"branch").predicate
            outcomes = _race(stores, partition, predicate, f"r{round_no}")
            assert sorted(outcomes.values()) == ["lost"] * (contenders - 1) + ["won"], outcomes
            winner = next(i for i, outcome in outcomes.items() if outcome == "won")
            assert stores[-1].get(partition, b"branch").value == f"r{round_no}-c{winner}".encode()
    finally:
        for s in stores:
            s.close()


# --- reachability ------------------------------------------------------------------------------


def test_each_page_of_a_scan_has_the_whole_request_timeout(cassandra_server: CassandraServer, partition: bytes) -> None:
    """A scan read slowly takes longer in all than the request timeout: each page fetched is
    timed on its own."""
    config = cassandra_server.database_config(KEYSPACE, request_timeout_s=1.0, read_timeout_s=1.0, page_size=2)
    with open_store(config) as slow_reader:
        for index in range(6):
            slow_reader.set(partition, b"k%d" % index, b"v")
        read = []
        for entry in slow_reader.scan(partition):
            read.append(entry.key)
            time.sleep(0.4)
    assert read == [b"k%d" % index for index in range(6)]


def test_unreachable_cluster_fails_fast_with_one_line(cassandra_server: CassandraServer) -> None:
    port = free_port()  # nothing listens there
    config = cassandra_server.database_config("silt_unreachable", port=port, connect_timeout_s=2.0)
    started = time.monotonic()
    with pytest.raises(Unavailable) as err:
        open_store(config)
    assert time.monotonic() - started < 2.0 + 3.0
    assert str(err.value) == f"cassandra: cannot reach {cassandra_server.host}:{port}: connection refused"


def test_silent_server_fails_within_connect_timeout(cassandra_server: CassandraServer) -> None:
    # Accepts TCP connections (the kernel does) but never answers the protocol handshake.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        config = cassandra_server.database_config("silt_unreachable", port=port, connect_timeout_s=2.0)
        started = time.monotonic()
        with pytest.raises(Unavailable) as err:
            open_store(config)
        assert time.monotonic() - started < 2.0 + 3.0
    assert str(err.value) == f"cassandra: cannot reach {cassandra_server.host}:{port}: no answer within 2 s"


def test_password_appears_in_no_message_or_log(
    cassandra_server: CassandraServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "hunter2-" + uuid.uuid4().hex
    config = cassandra_server.database_config(
        "silt_unreachable", port=free_port(), username="silt", password=secret, connect_timeout_s=2.0
    )
    assert secret not in repr(config)
    with caplog.at_level(logging.DEBUG), pytest.raises(Unavailable) as err:
        open_store(config)
    assert secret not in str(err.value)
    assert secret not in caplog.text


@contextlib.contextmanager
def _four_keys_behind_a_proxy(
    cassandra_server: CassandraServer, partition: bytes, **settings: float
) -> Iterator[tuple[TcpProxy, Store]]:
    """A store reaching the node through a proxy the test can stop or freeze, with keys a to d
    written (two pages of two)."""
    with TcpProxy(cassandra_server.host, cassandra_server.port) as proxy:
        config = cassandra_server.database_config(
            KEYSPACE, port=proxy.port, connect_timeout_s=2.0, page_size=2, **settings
        )
        with open_store(config) as store:
            for key in (b"a", b"b", b"c", b"d"):
                store.set(partition, key, key)
            yield proxy, store


def test_outage_then_reconnect_without_a_new_store(cassandra_server: CassandraServer, partition: bytes) -> None:
    request_timeout = 3.0
    with _four_keys_behind_a_proxy(cassandra_server, partition, request_timeout_s=request_timeout) as (proxy, store):
        scan = store.scan(partition)
        assert next(scan).key == b"a"  # first page (a, b) fetched

        proxy.stop()  # the node goes away: connections dropped, new ones refused
        gone = time.monotonic()
        outage_ops = {
            "get": lambda: store.get(partition, b"a"),
            "set": lambda: store.set(partition, b"e", b"e"),
            "set_if": lambda: store.set_if(partition, b"a", b"x", Predicate(b"a")),
            "delete": lambda: store.delete(partition, b"a"),
            "scan": lambda: list(store.scan(partition)),
            "scan across a page": lambda: list(scan),
        }
        for name, op in outage_ops.items():
            started = time.monotonic()
            with pytest.raises(Unavailable) as err:
                op()
            assert time.monotonic() - started < request_timeout + 2.0, f"{name} hung"
            message = str(err.value)
            assert "\n" not in message and f"127.0.0.1:{proxy.port}" in message, f"{name}: {message}"
        # Deliberate: the node stays away until the driver has backed off to its longest
        # delay between reconnections (0.25 + 0.5 + 1 s, then 2 s); nothing signals that.
        time.sleep(max(0.0, gone + 2.0 - time.monotonic()))

        proxy.start()  # back on the same port
        elapsed = _wait_until_ok(store, partition, b"a", within_s=10.0)
        assert elapsed < 10.0
        assert store.get(partition, b"a").value == b"a"
        store.set(partition, b"e", b"e")
        store.set_if(partition, b"e", b"E", Predicate(b"e"))
        store.delete(partition, b"b")
        assert [e.key for e in store.scan(partition)] == [b"a", b"c", b"d", b"e"]


def test_a_following_page_of_a_scan_is_bounded_by_the_read_timeout(
    cassandra_server: CassandraServer, partition: bytes
) -> None:
    """Each page is a request of its own, timed from its own send: the driver's paging would
    send the second page on the first page's request object, with no timer at all."""
    read_timeout = 1.0
    with _four_keys_behind_a_proxy(cassandra_server, partition, read_timeout_s=read_timeout) as (proxy, store):
        scan = store.scan(partition)
        assert [next(scan).key, next(scan).key] == [b"a", b"b"]  # the first page, whole
        proxy.freeze()
        try:
            started = time.monotonic()
            with pytest.raises(Unavailable) as err:
                next(scan)
            # Before the heartbeat (0.5 + 1.5 s) would have closed the connection.
            assert time.monotonic() - started < read_timeout + 1.0
            assert "no answer within 1 s" in str(err.value)
        finally:
            proxy.thaw()


def test_hung_node_times_out_and_conditional_outcome_is_unknown(
    cassandra_server: CassandraServer, partition: bytes
) -> None:
    request_timeout = 2.0
    with TcpProxy(cassandra_server.host, cassandra_server.port) as proxy:
        config = cassandra_server.database_config(
            KEYSPACE,
            port=proxy.port,
            request_timeout_s=request_timeout,
            read_timeout_s=request_timeout,
            connect_timeout_s=2.0,
        )
        with open_store(config) as store:
            store.set(partition, b"k", b"v1")
            proxy.freeze()  # connections stay open; nothing gets through
            try:
                started = time.monotonic()
                with pytest.raises(Unavailable) as err:
                    store.get(partition, b"k")
                assert time.monotonic() - started < request_timeout + 2.0
                assert "no answer within 2 s" in str(err.value)

                with pytest.raises(OutcomeUnknown) as err:
                    store.set_if(partition, b"k", b"v2", Predicate(b"v1"))
                # Never success, never PredicateFailed: the LWT may or may not land.
                assert "outcome unknown" in str(err.value)
                assert "\n" not in str(err.value)
            finally:
                proxy.thaw()
            # The frozen set_if is delivered now and applies: exactly why it was "unknown". The
            # heartbeat took the frozen node for down: it is used again once reconnected.
            _wait_until_ok(store, partition, b"k", within_s=10.0)
            deadline = time.monotonic() + 10.0
            while store.get(partition, b"k").value != b"v2" and time.monotonic() < deadline:
                time.sleep(0.1)
            assert store.get(partition, b"k").value == b"v2"


def test_doctor_reads_the_tables_speculative_retry_and_says_when_timeouts_are_unreadable(
    cassandra_server: CassandraServer, store: Store
) -> None:
    from silt.kv.cassandra_settings import check_cluster

    findings = {f.name: f for f in check_cluster(cassandra_server.database_config(KEYSPACE).cassandra)}
    assert findings["cassandra version"].detail.startswith("2.1")
    assert findings["kv speculative_retry"].ok, findings["kv speculative_retry"].detail
    # Cassandra 2.1 has no system_views: the doctor says so instead of guessing.
    assert "not readable" in findings["server timeouts"].detail
