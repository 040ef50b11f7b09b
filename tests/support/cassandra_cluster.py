"""A real three-node Apache Cassandra cluster for the test run, started once by a session fixture.

Three nodes of the Cassandra that scripts/cassandra.sh runs, on 127.0.0.1, 127.0.0.2 and
127.0.0.3 (Linux routes all of 127/8 to the loopback interface), each configured by
scripts/cassandra-cluster-node.sh: one token each, evenly spaced, seed 127.0.0.1, the same
native and storage ports on every address, no bootstrap (all three start at once) and
hinted hand-off on. Silt's keyspace on it has replication factor 3 and is used at
QUORUM / SERIAL, as in production.

The fixture can kill -9, pause (SIGSTOP), resume, stop and restart any node; fault tests
use that (tests/integration/kv/test_cluster_faults.py). Every JVM is stopped at the end of
the session, and dies with pytest if pytest is killed.

Set ``SILT_TEST_CASSANDRA_CLUSTER=host1,host2,host3:port`` to use a running cluster instead;
tests that need to kill or pause nodes are then skipped (they cannot reach its processes).

The session's cluster runs without authentication. ``CassandraCluster.start(configure=...,
credentials=...)`` starts another one whose nodes are further configured by a script, as
``CassandraServer.start`` does for one node: tests/support/k8s_run.py starts one configured as
the StatefulSet is (authentication on) for the whole stack on three nodes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from silt.config import CassandraConfig, DatabaseConfig
from silt.kv import Store, open_store
from tests.support.cassandra import (
    DEFAULT_START_TIMEOUT_S,
    REPO,
    SCRIPT,
    START_TIMEOUT_ENV,
    CassandraStartError,
    _cql_ready,
    _die_with_parent,
    _tail,
    ports_free_on_all,
)
from tests.support.cassandra import (
    JVM_OPTS as NODE_JVM_OPTS,
)

CLUSTER_ENV = "SILT_TEST_CASSANDRA_CLUSTER"
# How long the nodes' first start may take to serve CQL (logging in) before they are all started
# again (CassandraCluster.start): about 10 s on a quiet 2-core box, a minute or two under load.
FIRST_START_S = 150.0
CONFIGURE = REPO / "scripts" / "cassandra-cluster-node.sh"
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
KEYSPACE = "silt_cluster_tests"
# Measured on a 2-core box: three nodes serve CQL ~6 s after start, ~800 MiB RSS each with
# these settings (a 1 GiB heap each would be wasted on test data). The JIT stops at C1:
# three JVMs starting at once on two cores spend most of their start compiling with C2,
# for code that test loads never make hot enough to repay it.
HEAP = "512M"
JVM_OPTS = f"-Xmn100M {NODE_JVM_OPTS}"
# Murmur3 tokens span [-2**63, 2**63): one token per node, evenly spaced, balances the ring.
_RING = 2**64
STOP_GRACE_S = 20.0
# Each probe write at ALL is bounded by this; the wait that repeats probes has its own deadline.
_PROBE_TIMEOUT_S = 2.0


class NotAllSeen(CassandraStartError):
    """Writes at ALL kept failing through some nodes as coordinators: they do not take every
    other node for alive."""

    def __init__(self, pending: set[str], last_error: BaseException | None) -> None:
        super().__init__(
            f"the cluster's nodes did not all see each other in time; still failing through"
            f" {sorted(pending)}: {last_error}"
        )
        self.pending = set(pending)


# How long nodes started together get to see each other before the ones that do not are
# started again (they usually do within seconds).
GOSSIP_SETTLE_S = 90.0


class CassandraNode:
    """One node of the cluster: a scripts/cassandra.sh process in its own process group."""

    def __init__(
        self,
        index: int,
        address: str,
        token: int,
        data_dir: Path,
        port: int,
        storage_port: int,
        configure: Path | None = None,
    ) -> None:
        self.index = index
        self.address = address
        self.token = token
        self.data_dir = data_dir
        self.port = port
        self.storage_port = storage_port
        self.configure = configure
        self.paused = False
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"node{self.index + 1}({self.address})"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, seeds: str) -> None:
        """Start the JVM (on the data directory of an earlier run, if any); does not wait."""
        assert not self.running(), f"{self} is already running"
        env = dict(os.environ)
        env.update(
            SILT_CASSANDRA_CONFIGURE=str(CONFIGURE),
            SILT_CASSANDRA_NODE_ADDRESS=self.address,
            SILT_CASSANDRA_NODE_TOKEN=str(self.token),
            SILT_CASSANDRA_SEEDS=seeds,
            SILT_CASSANDRA_HEAP=HEAP,
            SILT_CASSANDRA_JVM_OPTS=JVM_OPTS,
        )
        if self.configure is not None:
            env["SILT_CASSANDRA_NODE_CONFIGURE"] = str(self.configure)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with (self.data_dir / "cassandra.out").open("ab") as out:
            self._process = subprocess.Popen(
                [str(SCRIPT), "run", str(self.data_dir), str(self.port), str(self.storage_port)],
                stdin=subprocess.DEVNULL,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self.paused = False

    def wait_serving(self, deadline: float, credentials: tuple[str, str] | None = None) -> None:
        """Until the node answers CQL on its own address (logged in with credentials, if given);
        CassandraStartError past deadline."""
        while True:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                raise CassandraStartError(self.failure(f"exited with status {code} before serving CQL"))
            if _cql_ready(self.address, self.port, credentials):
                return
            if time.monotonic() > deadline:
                raise CassandraStartError(self.failure("did not serve CQL in time"))
            time.sleep(0.25)

    def failure(self, what: str) -> str:
        out, system_log = self.data_dir / "cassandra.out", self.data_dir / "logs" / "system.log"
        return (
            f"Cassandra {self} on port {self.port} {what}.\n"
            f"--- {out} (last lines) ---\n{_tail(out)}\n"
            f"--- {system_log} (last lines) ---\n{_tail(system_log)}"
        )

    def _signal(self, sig: int) -> None:
        assert self._process is not None, f"{self} was never started"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, sig)

    def kill(self) -> None:
        """kill -9: no shutdown hook runs, the kernel closes its sockets."""
        self._signal(signal.SIGKILL)
        assert self._process is not None
        self._process.wait(STOP_GRACE_S)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: sockets stay open, nothing answers (a long GC pause, a frozen VM)."""
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """A clean shutdown (SIGTERM: Cassandra's shutdown hook drains), SIGKILL past the grace time."""
        if not self.running():
            return
        if self.paused:
            self.resume()
        self._signal(signal.SIGTERM)
        assert self._process is not None
        try:
            self._process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill()


class CassandraCluster:
    """The cluster the tests talk to: one this module started (nodes set), or an external one."""

    def __init__(
        self,
        addresses: list[str],
        port: int,
        nodes: list[CassandraNode] | None = None,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.addresses = addresses
        self.port = port
        self.nodes = nodes or []
        # The login that probes use (authentication on); whoever changes it (a setup that drops
        # the built-in superuser) sets the new one here before a restart or heal.
        self.credentials = credentials
        self.start_seconds = 0.0
        self._root: Path | None = None

    @property
    def controllable(self) -> bool:
        """Whether this run can kill, pause and restart nodes (it started them)."""
        return bool(self.nodes)

    @classmethod
    def from_env(cls) -> CassandraCluster | None:
        value = os.environ.get(CLUSTER_ENV, "").strip()
        if not value:
            return None
        hosts, sep, port = value.rpartition(":")
        addresses = [h.strip() for h in hosts.split(",") if h.strip()]
        if not sep or not addresses or not port.isdigit():
            raise CassandraStartError(f"{CLUSTER_ENV} must be host1,host2,host3:port, got {value!r}")
        cluster = cls(addresses, int(port))
        cluster.wait_all_see_all(time.monotonic() + 30.0)
        return cluster

    @classmethod
    def start(
        cls,
        timeout_s: float | None = None,
        *,
        configure: Path | None = None,
        credentials: tuple[str, str] | None = None,
    ) -> CassandraCluster:
        """Three fresh nodes. configure: a script that further edits each node's cassandra.yaml
        (scripts/cassandra-cluster-node.sh's SILT_CASSANDRA_NODE_CONFIGURE); credentials: the
        login that proves them ready (with authentication on, an anonymous session is refused)."""
        if timeout_s is None:
            timeout_s = float(os.environ.get(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S))
        # The package is fetched once, before three nodes would each try to.
        subprocess.run([str(SCRIPT), "fetch"], check=True, stdin=subprocess.DEVNULL, timeout=timeout_s)
        port, storage_port, _ssl_storage_port = ports_free_on_all(ADDRESSES, 3)
        root = Path(tempfile.mkdtemp(prefix="silt-cassandra-cluster-"))
        nodes = [
            CassandraNode(
                i,
                address,
                -(2**63) + i * (_RING // len(ADDRESSES)),
                root / f"node{i + 1}",
                port,
                storage_port,
                configure,
            )
            for i, address in enumerate(ADDRESSES)
        ]
        cluster = cls(list(ADDRESSES), port, nodes, credentials)
        cluster._root = root
        started = time.monotonic()
        try:
            for node in nodes:
                node.start(seeds=ADDRESSES[0])
            deadline = started + timeout_s
            try:
                for node in nodes:
                    node.wait_serving(min(deadline, started + FIRST_START_S), credentials)
            except CassandraStartError:
                # Nodes of Cassandra 2.1 started at once on a loaded machine now and then never
                # log anyone in: each node creates the built-in superuser once, 10 s after its
                # start, and skips it for good when the peers it asks are not yet taken for
                # alive; and a seed that does not take a peer for alive cannot read its users.
                # All of them started again see each other and set it up again.
                for node in nodes:
                    node.kill()
                for node in nodes:
                    node.start(seeds=ADDRESSES[0])
                for node in nodes:
                    node.wait_serving(deadline, credentials)
            try:
                cluster.wait_all_see_all(min(deadline, time.monotonic() + GOSSIP_SETTLE_S))
            except NotAllSeen as stuck:
                # Nodes of Cassandra 2.1 started at once on a loaded machine now and then never
                # take one of their peers for alive (minutes later, still not). A node started
                # again learns its peers afresh from the seed, as heal() relies on.
                for node in nodes:
                    if node.address in stuck.pending:
                        node.kill()
                        node.start(seeds=ADDRESSES[0])
                for node in nodes:
                    node.wait_serving(deadline, credentials)
                cluster.wait_all_see_all(deadline)
        except BaseException:
            cluster.stop(remove_data=False)  # kept for a post-mortem: the error names the logs
            raise
        cluster.start_seconds = time.monotonic() - started
        return cluster

    def database_config(self, keyspace: str = KEYSPACE, **cassandra: Any) -> DatabaseConfig:
        """Silt's configuration for keyspace on the cluster: RF 3, QUORUM / SERIAL; keyword
        arguments override CassandraConfig fields."""
        fields: dict[str, Any] = {
            "contact_points": list(self.addresses),
            "port": self.port,
            "keyspace": keyspace,
            "protocol_version": 3,  # Cassandra 2.1: see tests/support/cassandra.py
            "replication_factor": 3,
            "consistency": "QUORUM",
            "serial_consistency": "SERIAL",
            "connect_timeout_s": 5.0,
            "request_timeout_s": 10.0,
            "read_timeout_s": 10.0,
            "page_size": 500,
        }
        fields.update(cassandra)
        return DatabaseConfig(type="cassandra", cassandra=CassandraConfig(**fields))

    # --- faults ------------------------------------------------------------------------------

    def restart(self, node: CassandraNode, timeout_s: float = 120.0) -> float:
        """Start a stopped or killed node again and wait until every node sees every other;
        returns the seconds that took."""
        started = time.monotonic()
        deadline = started + timeout_s
        node.start(seeds=self.addresses[0])
        node.wait_serving(deadline, self.credentials)
        try:
            self.wait_all_see_all(deadline)
        except NotAllSeen:
            # As at the cluster's start: a node of Cassandra 2.1 started on a loaded machine now
            # and then is never taken for alive by its peers (nor takes them), and writes at ALL
            # through every coordinator time out. Started once more, it learns its peers afresh
            # from the seed.
            node.kill()
            deadline = time.monotonic() + timeout_s
            node.start(seeds=self.addresses[0])
            node.wait_serving(deadline, self.credentials)
            self.wait_all_see_all(deadline)
        return time.monotonic() - started

    def heal(self, timeout_s: float = 120.0) -> None:
        """Whatever a test did, all nodes running, unpaused and in contact again."""
        for node in self.nodes:
            if node.paused:
                node.resume()
        for node in self.nodes:
            if not node.running():
                node.start(seeds=self.addresses[0])
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            node.wait_serving(deadline, self.credentials)
        self.wait_all_see_all(deadline)

    def wait_all_see_all(self, deadline: float) -> None:
        """Until a write at ALL succeeds through every node as coordinator: each node then
        takes every other for alive and reachable (gossip has settled after a (re)start)."""
        from cassandra import ConsistencyLevel
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import RoundRobinPolicy
        from cassandra.query import SimpleStatement

        probe = Cluster(
            list(self.addresses),
            port=self.port,
            protocol_version=3,
            auth_provider=PlainTextAuthProvider(*self.credentials) if self.credentials else None,
            execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=RoundRobinPolicy())},
            connect_timeout=_PROBE_TIMEOUT_S,
            control_connection_timeout=_PROBE_TIMEOUT_S,
        )
        last_error: BaseException | None = None
        try:
            session = _retry_until(deadline, probe.connect)
            _retry_until(
                deadline,
                lambda: session.execute(
                    "CREATE KEYSPACE IF NOT EXISTS silt_cluster_probe WITH replication ="
                    " {'class': 'SimpleStrategy', 'replication_factor': 3}",
                    timeout=30.0,
                ),
            )
            _retry_until(
                deadline,
                lambda: session.execute(
                    "CREATE TABLE IF NOT EXISTS silt_cluster_probe.t (k int PRIMARY KEY, v int)", timeout=30.0
                ),
            )
            write = SimpleStatement(
                "INSERT INTO silt_cluster_probe.t (k, v) VALUES (%s, %s)", consistency_level=ConsistencyLevel.ALL
            )
            pending = set(self.addresses)
            while pending:
                known = {host.address for host in probe.metadata.all_hosts()}
                if pending - known:
                    # A node whose peers row was still incomplete when the driver first read it is
                    # ignored ("invalid row for peer") until the topology is read again.
                    with contextlib.suppress(Exception):
                        probe.refresh_nodes()
                for host in probe.metadata.all_hosts():
                    if host.address not in pending:
                        continue
                    try:
                        for k in range(len(self.addresses)):  # one key per node's token range
                            session.execute(write, (k, 1), timeout=_PROBE_TIMEOUT_S, host=host)
                    except Exception as exc:
                        last_error = exc
                        continue
                    pending.discard(host.address)
                if pending:
                    if time.monotonic() > deadline:
                        raise NotAllSeen(pending, last_error)
                    time.sleep(0.2)
        finally:
            probe.shutdown()

    def stop(self, remove_data: bool = True) -> None:
        # Teardown kills: the data goes away, so a clean drain would only cost seconds.
        for node in self.nodes:
            if node.running():
                node.kill()
        if self._root is not None and remove_data:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


def _retry_until(deadline: float, call: Callable[[], Any]) -> Any:
    while True:
        try:
            return call()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


# What the session's cluster fixtures hold open, newest first: release_cluster() closes them before
# the session's end, once the last test that needs the cluster is done (cluster_last.py).
_RELEASES: list[Callable[[], None]] = []


def _once(close: Callable[[], None]) -> Callable[[], None]:
    done = False

    def closing() -> None:
        nonlocal done
        if not done:
            done = True
            close()

    return closing


def release_cluster() -> None:
    """Close the session's store on the cluster and stop the cluster now; their fixtures' own
    teardowns then find nothing left to do."""
    while _RELEASES:
        _RELEASES.pop()()


@pytest.fixture(scope="session")
def cassandra_cluster() -> Iterator[CassandraCluster]:
    """The 3-node cluster, started on first use (SILT_TEST_CASSANDRA_CLUSTER: an external one)."""
    try:
        cluster = CassandraCluster.from_env() or CassandraCluster.start()
    except CassandraStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    stop = _once(cluster.stop)
    _RELEASES.append(stop)
    try:
        yield cluster
    finally:
        stop()


@pytest.fixture(scope="session")
def cassandra_cluster_store(cassandra_cluster: CassandraCluster) -> Iterator[Store]:
    """A Store on the cluster's RF-3 keyspace at QUORUM / SERIAL, shared by the session (tests
    isolate themselves by fresh partitions, as on the single node)."""
    store = open_store(cassandra_cluster.database_config())
    close = _once(store.close)
    _RELEASES.append(close)
    yield store
    close()
