"""A real Apache Cassandra for the test run, started once by a session fixture.

`scripts/cassandra.sh run` is started in its own process group on free ports with a
temporary data directory; the fixture waits until the native port serves a CQL session.
If Cassandra cannot be started the tests that need it fail (never skip): a green run
must mean the Cassandra driver was exercised.

Set ``SILT_TEST_CASSANDRA=host:port`` to use an existing cluster instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from silt.config import CassandraConfig, DatabaseConfig

EXTERNAL_ENV = "SILT_TEST_CASSANDRA"
START_TIMEOUT_ENV = "SILT_TEST_CASSANDRA_START_TIMEOUT"
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cassandra.sh"

# A cold start takes seconds here, but a first run downloads the package and a loaded CI
# machine can be slow: a deadline of minutes, not seconds.
DEFAULT_START_TIMEOUT_S = 300.0
# The JIT stops at C1: a test node starts about 5 s of CPU sooner, and test loads never make
# Cassandra's code hot enough for C2's compiles to repay them (the Cassandra tests of
# tests/integration/kv took a fifth less CPU in all, the journal's a sixteenth).
JVM_OPTS = "-XX:TieredStopAtLevel=1"
STOP_GRACE_S = 30.0
LOG_TAIL_LINES = 40


# Ports for a JVM that binds them seconds after they were found free: drawn below the kernel's
# range of ephemeral ports (32768-60999 on Linux), which every outgoing connection on the
# machine takes from, and which bind(0) hands out to the other test servers.
_PORT_RANGE = (20000, 32000)


def ports_free_on_all(addresses: tuple[str, ...], count: int) -> list[int]:
    """count consecutive ports (port, port+1, ...) free to bind on every address."""
    draw = random.Random()
    for _ in range(200):
        base = draw.randrange(*_PORT_RANGE)
        try:
            with contextlib.ExitStack() as stack:
                for address in addresses:
                    for port in range(base, base + count):
                        sock = stack.enter_context(socket.socket())
                        sock.bind((address, port))
        except OSError:
            continue
        return list(range(base, base + count))
    raise CassandraStartError(f"no {count} consecutive ports free on all of {', '.join(addresses)}")


class CassandraStartError(RuntimeError):
    pass


# Resolved before any fork: dlopen/dlsym in a forked child of a threaded process can deadlock.
try:
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _PRCTL = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Have the kernel SIGTERM the child if pytest dies without tearing down (Linux only)."""
    # Kept across the script's exec of java; without it a killed test run leaves a 1 GiB JVM.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not written)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


def _query_release_version(host: str, port: int, credentials: tuple[str, str] | None = None) -> str:
    """The node's release_version, over native protocol v3 (spoken by 2.1 through 5.0)."""
    # Imported here so that collecting tests never pays for cassandra-driver.
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    cluster = Cluster(
        [host],
        port=port,
        protocol_version=3,
        auth_provider=PlainTextAuthProvider(*credentials) if credentials else None,
        execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=RoundRobinPolicy())},
        connect_timeout=5,
        control_connection_timeout=5,
    )
    try:
        session = cluster.connect()
        return str(session.execute("SELECT release_version FROM system.local", timeout=10).one()[0])
    finally:
        cluster.shutdown()


def _release_version(host: str, port: int) -> tuple[int, ...]:
    try:
        text = _query_release_version(host, port)
    except Exception as exc:
        raise CassandraStartError(f"{EXTERNAL_ENV}={host}:{port}: cannot query Cassandra: {exc}") from exc
    return tuple(int(p) for p in text.split("-")[0].split(".") if p.isdigit())


def _cql_ready(host: str, port: int, credentials: tuple[str, str] | None = None) -> bool:
    """True once a driver session can query the node (logged in with credentials, if given)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            pass
    except OSError:
        return False
    try:
        _query_release_version(host, port, credentials)
    except Exception:
        return False
    return True


class CassandraServer:
    """A Cassandra node the tests talk to: one this helper started, or an external one."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        process: subprocess.Popen[bytes] | None = None,
        data_dir: Path | None = None,
        protocol_version: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.protocol_version = protocol_version
        self.start_seconds = 0.0  # how long the node took to serve CQL, when started here
        self._process = process
        self._data_dir = data_dir

    @classmethod
    def from_env(cls) -> CassandraServer | None:
        address = os.environ.get(EXTERNAL_ENV, "").strip()
        if not address:
            return None
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise CassandraStartError(f"{EXTERNAL_ENV} must be host:port, got {address!r}")
        version = _release_version(host, int(port))
        # Cassandra 2.1 answers the driver's opening protocol offer with an error the
        # driver does not take as "downgrade", so it must be told v3 up front.
        return cls(host, int(port), protocol_version=3 if version < (2, 2) else None)

    @classmethod
    def start(
        cls,
        timeout_s: float | None = None,
        *,
        configure: Path | None = None,
        credentials: tuple[str, str] | None = None,
        heap: str | None = None,
        killed: bool = True,
    ) -> CassandraServer:
        """A fresh node. configure: a script that edits its cassandra.yaml before it starts
        (scripts/cassandra.sh's SILT_CASSANDRA_CONFIGURE); credentials: the login that proves it
        ready (with authentication on, an anonymous session is refused). killed=False: no test
        kills it, so its commit log is synced every 10 s rather than before each write is
        acknowledged, which costs about half of a busy node's CPU."""
        env = dict(os.environ)
        env.setdefault("SILT_CASSANDRA_JVM_OPTS", JVM_OPTS)
        env["SILT_CASSANDRA_COMMITLOG_SYNC"] = "batch" if killed else "periodic"
        if configure is not None:
            env["SILT_CASSANDRA_CONFIGURE"] = str(configure)
        if heap is not None:
            env["SILT_CASSANDRA_HEAP"] = heap
        if timeout_s is None:
            timeout_s = float(os.environ.get(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S))
        data_dir = Path(tempfile.mkdtemp(prefix="silt-cassandra-"))
        port, storage_port = ports_free_on_all(("127.0.0.1",), 2)
        out = data_dir / "cassandra.out"
        with out.open("wb") as out_file:
            process = subprocess.Popen(
                [str(SCRIPT), "run", str(data_dir), str(port), str(storage_port)],
                stdin=subprocess.DEVNULL,
                env=env,
                stdout=out_file,
                stderr=subprocess.STDOUT,
                # Its own process group, so that stopping it reaches the JVM and whatever
                # the script started, and a Ctrl-C of pytest does not kill it mid-teardown.
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        # The test server is Cassandra 2.1: native protocol v3 at most, so skip the
        # driver's protocol negotiation (and its warnings).
        server = cls("127.0.0.1", port, process=process, data_dir=data_dir, protocol_version=3)
        try:
            server._wait_ready(timeout_s, out, credentials)
        except BaseException:
            # The data directory stays for a post-mortem: the error names its logs.
            server.stop(remove_data=False)
            raise
        return server

    def _wait_ready(self, timeout_s: float, out: Path, credentials: tuple[str, str] | None = None) -> None:
        assert self._process is not None and self._data_dir is not None
        started = time.monotonic()
        deadline = started + timeout_s
        while True:
            code = self._process.poll()
            if code is not None:
                raise CassandraStartError(self._failure(f"exited with status {code} before serving CQL", out))
            if _cql_ready(self.host, self.port, credentials):
                self.start_seconds = time.monotonic() - started
                return
            if time.monotonic() > deadline:
                raise CassandraStartError(self._failure(f"did not serve CQL within {timeout_s:g} s", out))
            time.sleep(0.5)

    def _failure(self, what: str, out: Path) -> str:
        assert self._data_dir is not None
        system_log = self._data_dir / "logs" / "system.log"
        return (
            f"Cassandra on {self.host}:{self.port} {what}.\n"
            f"--- {out} (last lines) ---\n{_tail(out)}\n"
            f"--- {system_log} (last lines) ---\n{_tail(system_log)}"
        )

    def stop(self, remove_data: bool = True) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._data_dir is not None and remove_data:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def database_config(self, keyspace: str, **cassandra: Any) -> DatabaseConfig:
        """A config for keyspace on this node; keyword arguments override CassandraConfig fields."""
        fields: dict[str, Any] = {
            "contact_points": [self.host],
            "port": self.port,
            "keyspace": keyspace,
            "protocol_version": self.protocol_version,
            "connect_timeout_s": 5.0,
            "request_timeout_s": 10.0,
            "read_timeout_s": 10.0,
            "page_size": 500,
        }
        fields.update(cassandra)
        return DatabaseConfig(type="cassandra", cassandra=CassandraConfig(**fields))


@pytest.fixture(scope="session")
def cassandra_server() -> Iterator[CassandraServer]:
    try:
        # Shared by every test, and so never killed: the tests that kill a node start their own.
        server = CassandraServer.from_env() or CassandraServer.start(killed=False)
    except CassandraStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
