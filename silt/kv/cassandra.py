"""The production KV driver: Apache Cassandra through cassandra-driver.

One table per keyspace::

    kv(partition_key blob, key blob, value blob, PRIMARY KEY ((partition_key), key))

The KV partition is the Cassandra partition and the key its clustering column, so a scan
is a single-partition range read in byte order. Only CQL that Cassandra 2.1 through 5.0
all accept is used.

Consistency decisions (see docs/design/kv.md, "Drivers"):

* ``set_if`` is a lightweight transaction (Paxos at ``serial_consistency``, committed at
  ``consistency``), so compare-and-set is atomic whatever a reader saw before.
* ``get`` and ``scan`` read at ``consistency`` (LOCAL_QUORUM by default), not SERIAL. A
  successful write, LWT or not, is acknowledged by a quorum, so a later quorum read sees
  it. The only thing a quorum read can miss is an LWT whose outcome was reported as
  unknown (Unavailable) and whose Paxos round is still unfinished; reading that stale
  value costs the caller nothing worse than a PredicateFailed on its next ``set_if``,
  whose own Paxos round finishes the pending one, so the retry then reads the truth. A
  SERIAL read would close that window at the price of a Paxos round per read and of
  contention with writers on hot keys (branch records); on the single-node test server it
  takes a read from 0.7 to 1.2 ms (median).
* Plain writes and LWTs may touch the same key (a ``delete`` after ``set_if``s, a
  ``set`` that initialises a key later guarded by ``set_if``). Cassandra orders them by
  cell timestamp, and an LWT's timestamp is its Paxos ballot, taken from the coordinator's
  clock. Client-side timestamps would race that clock (a ``set`` followed by a ``set_if``
  within the same millisecond loses the ``set_if``), so every write takes its timestamp
  from the coordinator, whose single node-wide clock hands out strictly increasing
  timestamps to plain writes and ballots alike. The token-aware policy does not shuffle
  replicas, so one coordinator (the first replica, while it is up) orders all writes of a
  partition. Across a coordinator change, ordering relies on the nodes' clocks being
  synchronised, as all of Cassandra does.
* Cassandra before 2.2 (the test server is 2.1.0) has no such clock: a coordinator
  timestamp is the current millisecond, per request, and so is a ballot. Back-to-back
  writes then tie and Cassandra keeps the larger value, not the later write. Against such
  a server plain writes carry the driver's microsecond client timestamps instead, and an
  LWT waits, if needed, for the millisecond after this process's last plain write so that
  its ballot sorts after it.
* ``apply`` is one single-partition ``UNLOGGED BATCH``: applied as one mutation, atomic and
  isolated, no batch log; with a condition, one Paxos round for the whole batch. An
  unconditional apply given a timestamp writes every row ``USING TIMESTAMP`` it: the
  metadata journal's logical clock, so that of two blind writes to one key the one the
  journal orders last is the one kept, whatever the writers' clocks (docs/design/journal.md).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from cassandra import (
    AuthenticationFailed,
    ConsistencyLevel,
    InvalidRequest,
    OperationTimedOut,
    ReadTimeout,
    UnresolvableContactPoints,
    WriteTimeout,
    WriteType,
)
from cassandra import Unavailable as DriverUnavailable
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable, Session
from cassandra.connection import ConnectionException
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    RetryPolicy,
    TokenAwarePolicy,
)
from cassandra.query import BatchStatement, BatchType, PreparedStatement, tuple_factory

from silt.config import CassandraConfig, DatabaseConfig
from silt.errors import ConfigError, InvalidArgument, NotFound, PredicateFailed, SiltError, Unavailable
from silt.kv.durability import durability_warnings
from silt.kv.store import (
    Condition,
    Entry,
    Predicate,
    Store,
    ValueWithPredicate,
    check_apply,
    check_key,
    check_value,
    register_driver,
)

if TYPE_CHECKING:
    from cassandra.query import Statement

TABLE = "kv"

# Reconnection to a node that went away is attempted after 0.25 s, then backing off to
# every 2 s: a cluster that comes back is used again within about two seconds.
_RECONNECT_BASE_DELAY_S = 0.25
_RECONNECT_MAX_DELAY_S = 2.0
# Detects connections that died silently (no FIN: a crashed host, a dropped NAT entry).
_HEARTBEAT_INTERVAL_S = 10

# Servers from this version on give plain writes and ballots one node-wide monotonic clock
# (see the module docstring); the change came within 2.1, all of 2.1 is treated as older.
_SHARED_BALLOT_CLOCK_SINCE = (2, 2)


class _RetryPolicy(RetryPolicy):
    """The driver's default policy, minus every retry that could apply a write twice.

    The default retries any request whose connection broke on the next host. For an LWT
    that may have been applied already, the retry would then report PredicateFailed for
    our own write, so non-idempotent statements are never retried except when the server
    said it did not even try (Unavailable).
    """

    def on_read_timeout(self, query: Statement, consistency: int, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        if not _idempotent(query):
            return self.RETHROW, None
        return super().on_read_timeout(query, consistency, *args, **kwargs)

    def on_write_timeout(
        self,
        query: Statement,
        consistency: int,
        write_type: str,
        required_responses: int,
        received_responses: int,
        retry_num: int,
    ) -> tuple[int, Any]:
        if write_type == WriteType.SIMPLE and _idempotent(query) and retry_num == 0:
            return self.RETRY, consistency
        return self.RETHROW, None

    def on_request_error(self, query: Statement, consistency: int, error: Exception, retry_num: int) -> tuple[int, Any]:
        if _idempotent(query) and retry_num == 0:
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None


def _idempotent(query: Statement | None) -> bool:
    return query is not None and bool(query.is_idempotent)


class _LegacyBallotFence:
    """Makes an LWT's ballot sort after this process's earlier plain writes (Cassandra < 2.2).

    Those servers take a ballot from the current millisecond (its first microsecond), while
    plain writes here carry microsecond client timestamps: an LWT sent in the millisecond
    of a plain write would sort before it. Waiting for the next millisecond after the last
    plain write completed fixes that, assuming client and server share a clock, which holds
    for the local test server these versions serve as.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_plain_ms = 0

    def before_lwt(self) -> None:
        with self._lock:
            last = self._last_plain_ms
        while (now_ns := time.time_ns()) // 1_000_000 <= last:
            time.sleep(((last + 1) * 1_000_000 - now_ns) / 1e9)

    def after_plain_write(self) -> None:
        now_ms = time.time_ns() // 1_000_000
        with self._lock:
            self._last_plain_ms = max(self._last_plain_ms, now_ms)


def _parse_version(text: str | None) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in (text or "").split("-")[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def _reason(exc: BaseException, timeout_s: float) -> str:
    """A short, lower-case, one-line cause for exc; timeout_s is the one that ran out, if any."""
    if isinstance(exc, NoHostAvailable):
        if not exc.errors:
            return "no host available (all nodes are down or unreachable)"
        reasons = {endpoint: _reason(err, timeout_s) for endpoint, err in exc.errors.items()}
        if len(set(reasons.values())) == 1:
            return next(iter(reasons.values()))
        return "; ".join(f"{endpoint}: {reason}" for endpoint, reason in reasons.items())
    if isinstance(exc, ConnectionRefusedError) or (isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED):
        return "connection refused"
    if isinstance(exc, socket.gaierror | UnresolvableContactPoints):
        return "cannot resolve host name"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "connection timed out"
    if isinstance(exc, OperationTimedOut):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, DriverUnavailable):
        return (
            f"not enough replicas alive for {ConsistencyLevel.value_to_name.get(exc.consistency, exc.consistency)}"
            f" ({exc.alive_replicas} of {exc.required_replicas})"
        )
    if isinstance(exc, WriteTimeout):
        kind = WriteType.value_to_name.get(exc.write_type, "write") if exc.write_type is not None else "write"
        return (
            f"write timed out on the server ({kind},"
            f" {exc.received_responses} of {exc.required_responses} replicas answered)"
        )
    if isinstance(exc, ReadTimeout):
        return f"read timed out on the server ({exc.received_responses} of {exc.required_responses} replicas answered)"
    if isinstance(exc, AuthenticationFailed):
        return "authentication failed (check database.cassandra.username and password)"
    if isinstance(exc, ConnectionException):
        if "unsupported protocol version" in str(exc).lower():
            # Cassandra 2.1 answers the driver's opening offer with an error the driver
            # does not take as a request to downgrade.
            return "the server refused the native protocol version; set database.cassandra.protocol_version (3 for 2.1)"
        return f"connection lost: {_first_line(exc)}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return f"{type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class CassandraStore(Store):
    """The KV Store on a Cassandra keyspace; thread-safe, one driver Session shared."""

    def __init__(self, config: CassandraConfig) -> None:
        self._config = config
        self._contacts = ", ".join(f"{host}:{config.port}" for host in config.contact_points)
        self._closed = False
        self._close_lock = threading.Lock()
        self._fence: _LegacyBallotFence | None = None
        try:
            self._cluster = self._make_cluster(config)
        except Exception as exc:
            raise Unavailable(
                f"cassandra: cannot reach {self._contacts}: {_reason(exc, config.connect_timeout_s)}"
            ) from exc
        try:
            self._session = self._connect()
            if config.create_schema:
                self._create_schema()
            self._prepare()
            self._check_server_versions()
        except BaseException:
            self._cluster.shutdown()
            raise
        for warning in self.durability_warnings():
            logging.getLogger(__name__).warning("%s", warning)

    def durability_warnings(self) -> list[str]:
        """Why acknowledged writes might not survive losing one node, per the keyspace as the
        cluster reports it (it may have been created with other settings than today's config)."""
        replicas = self._config.replication_factor
        keyspace = self._cluster.metadata.keyspaces.get(self._config.keyspace)
        strategy = getattr(keyspace, "replication_strategy", None)
        if strategy is not None and getattr(strategy, "replication_factor", None) is not None:
            replicas = int(strategy.replication_factor)
        elif strategy is not None and getattr(strategy, "dc_replication_factors", None):
            replicas = min(int(n) for n in strategy.dc_replication_factors.values())
        elif self._config.replication_strategy == "NetworkTopologyStrategy" and self._config.datacenters:
            replicas = min(self._config.datacenters.values())
        return durability_warnings(self._config.keyspace, replicas, self._config.consistency)

    @classmethod
    def from_config(cls, config: DatabaseConfig) -> CassandraStore:
        return cls(config.cassandra)

    # --- setup ---------------------------------------------------------------------------

    @staticmethod
    def _make_cluster(config: CassandraConfig) -> Cluster:
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(
                # An empty local_dc makes the driver adopt the first contact point's
                # datacenter, which is right when contact points are local.
                DCAwareRoundRobinPolicy(local_dc=config.local_datacenter or ""),
                shuffle_replicas=False,
            ),
            retry_policy=_RetryPolicy(),
            consistency_level=ConsistencyLevel.name_to_value[config.consistency],
            serial_consistency_level=ConsistencyLevel.name_to_value[config.serial_consistency],
            request_timeout=config.request_timeout_s,
            row_factory=tuple_factory,
        )
        auth = None
        if config.username is not None:
            password = config.password.get_secret_value() if config.password is not None else ""
            auth = PlainTextAuthProvider(username=config.username, password=password)
        extra: dict[str, Any] = {}
        if config.protocol_version is not None:
            extra["protocol_version"] = config.protocol_version
        return Cluster(
            contact_points=list(config.contact_points),
            port=config.port,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            auth_provider=auth,
            connect_timeout=config.connect_timeout_s,
            control_connection_timeout=config.connect_timeout_s,
            reconnection_policy=ExponentialReconnectionPolicy(
                base_delay=_RECONNECT_BASE_DELAY_S, max_delay=_RECONNECT_MAX_DELAY_S, max_attempts=None
            ),
            idle_heartbeat_interval=_HEARTBEAT_INTERVAL_S,
            idle_heartbeat_timeout=max(config.request_timeout_s, 1.0),
            max_schema_agreement_wait=max(config.request_timeout_s, 10.0),
            **extra,
        )

    def _connect(self) -> Session:
        # The driver logs each failed first attempt with a traceback; the Unavailable raised
        # below says the same in one line, so those records are held back during the attempt.
        cluster_log = logging.getLogger("cassandra.cluster")
        previous = cluster_log.level
        cluster_log.setLevel(logging.CRITICAL)
        try:
            session = self._cluster.connect()
        except Exception as exc:
            raise Unavailable(
                f"cassandra: cannot reach {self._contacts}: {_reason(exc, self._config.connect_timeout_s)}"
            ) from exc
        finally:
            cluster_log.setLevel(previous)
        session.default_fetch_size = self._config.page_size
        return session

    def _create_schema(self) -> None:
        keyspace = self._config.keyspace
        # Unquoted CQL names are case-insensitive and stored in lower case.
        metadata = self._cluster.metadata.keyspaces.get(keyspace.lower())
        # Only missing objects are created: concurrent CREATE ... IF NOT EXISTS from many
        # processes starting together is how older clusters end up in schema disagreement.
        if metadata is None:
            self._ddl(
                f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication(self._config)}",
                "create keyspace",
            )
            metadata = self._cluster.metadata.keyspaces.get(keyspace.lower())
        if metadata is None or TABLE not in metadata.tables:
            self._ddl(
                f"CREATE TABLE IF NOT EXISTS {keyspace}.{TABLE} ("
                "partition_key blob, key blob, value blob, PRIMARY KEY ((partition_key), key))",
                "create table",
            )

    def _ddl(self, cql: str, what: str) -> None:
        try:
            result = self._session.execute(cql, timeout=max(self._config.request_timeout_s, 30.0))
        except Exception as exc:
            self._raise("", exc, what)
        if not result.response_future.is_schema_agreed:
            raise Unavailable(
                f"cassandra: {what} on {self._contacts}: the nodes did not agree on the schema in time; retry later"
            )

    def _prepare(self) -> None:
        table = f"{self._config.keyspace}.{TABLE}"
        statements = {
            "_get": (f"SELECT value FROM {table} WHERE partition_key = ? AND key = ?", True),
            "_set": (f"INSERT INTO {table} (partition_key, key, value) VALUES (?, ?, ?)", True),
            "_insert_if_absent": (
                f"INSERT INTO {table} (partition_key, key, value) VALUES (?, ?, ?) IF NOT EXISTS",
                False,
            ),
            "_update_if": (f"UPDATE {table} SET value = ? WHERE partition_key = ? AND key = ? IF value = ?", False),
            "_delete": (f"DELETE FROM {table} WHERE partition_key = ? AND key = ?", True),
            # For apply: rows written at a caller's timestamp, and a conditional delete.
            "_set_at": (f"INSERT INTO {table} (partition_key, key, value) VALUES (?, ?, ?) USING TIMESTAMP ?", True),
            "_delete_at": (f"DELETE FROM {table} USING TIMESTAMP ? WHERE partition_key = ? AND key = ?", True),
            "_delete_if": (f"DELETE FROM {table} WHERE partition_key = ? AND key = ? IF value = ?", False),
            "_scan_all": (f"SELECT key, value FROM {table} WHERE partition_key = ?", True),
            # An empty blob as a slice bound is not accepted by every version, hence two scans.
            "_scan_from": (f"SELECT key, value FROM {table} WHERE partition_key = ? AND key >= ?", True),
        }
        for attr, (cql, idempotent) in statements.items():
            try:
                prepared = self._session.prepare(cql)
            except InvalidRequest as exc:
                raise Unavailable(
                    f"cassandra: table {table} is not usable on {self._contacts}: {_first_line(exc)}"
                    + ("" if self._config.create_schema else " (database.cassandra.create_schema is false)")
                ) from exc
            except Exception as exc:
                self._raise("", exc, "prepare statements")
            prepared.is_idempotent = idempotent
            setattr(self, attr, prepared)

    def _check_server_versions(self) -> None:
        versions = [_parse_version(host.release_version) for host in self._cluster.metadata.all_hosts()]
        if any(version and version < _SHARED_BALLOT_CLOCK_SINCE for version in versions):
            self._fence = _LegacyBallotFence()
        else:
            # Coordinator-side timestamps: see the module docstring.
            self._session.use_client_timestamp = False

    # --- execution -----------------------------------------------------------------------

    _get: PreparedStatement
    _set: PreparedStatement
    _insert_if_absent: PreparedStatement
    _update_if: PreparedStatement
    _delete: PreparedStatement
    _set_at: PreparedStatement
    _delete_at: PreparedStatement
    _delete_if: PreparedStatement
    _scan_all: PreparedStatement
    _scan_from: PreparedStatement

    def _raise(self, op: str, exc: BaseException, what: str | None = None) -> NoReturn:
        if isinstance(exc, SiltError):
            raise exc
        if isinstance(exc, InvalidRequest):
            raise InvalidArgument(f"cassandra: {what or op} rejected: {_first_line(exc)}") from exc
        if self._closed:
            raise Unavailable("cassandra: the store is closed") from exc
        reason = _reason(exc, self._config.request_timeout_s)
        raise Unavailable(f"cassandra: {what or op} on {self._contacts} failed: {reason}") from exc

    def _execute(self, op: str, statement: Statement, params: tuple[bytes, ...] | None) -> Any:
        if self._closed:
            raise Unavailable("cassandra: the store is closed")
        try:
            return self._session.execute(statement, params)
        except Exception as exc:
            self._raise(op, exc)

    def _write(self, op: str, statement: Statement, params: tuple[bytes, ...] | None) -> Any:
        if self._fence is None:
            return self._execute(op, statement, params)
        try:
            return self._execute(op, statement, params)
        finally:
            self._fence.after_plain_write()

    # --- Store ---------------------------------------------------------------------------

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        check_key(partition, key)
        row = self._execute("get", self._get, (bytes(partition), bytes(key))).one()
        # A row without a value is never written by this driver; treat it as absent, as
        # set_if does (IF NOT EXISTS would refuse it, IF value = ? never matches it).
        if row is None or row[0] is None:
            raise NotFound("KV key not found")
        value = bytes(row[0])
        return ValueWithPredicate(value, Predicate(value))

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        check_key(partition, key)
        check_value(value)
        self._write("set", self._set, (bytes(partition), bytes(key), bytes(value)))

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        check_key(partition, key)
        check_value(value)
        if predicate is not None:
            check_value(predicate)
        params: tuple[bytes, ...]
        if predicate is None:
            statement, params = self._insert_if_absent, (bytes(partition), bytes(key), bytes(value))
        else:
            statement, params = self._update_if, (bytes(value), bytes(partition), bytes(key), bytes(predicate))
        self._conditional("set_if", statement, params)

    def _conditional(self, op: str, statement: Statement, params: tuple[bytes, ...] | None) -> None:
        """Run an LWT (one statement or a conditional batch); PredicateFailed if not applied."""
        if self._fence is not None:
            self._fence.before_lwt()
        try:
            result = self._execute(op, statement, params)
        except Unavailable as exc:
            cause = exc.__cause__
            # The server refusing up front (not enough replicas, no node to ask) means the
            # write was not attempted; anything else may have been applied.
            if isinstance(cause, DriverUnavailable | NoHostAvailable) or cause is None:
                raise
            raise Unavailable(
                f"cassandra: {op} on {self._contacts}: outcome unknown, the write may or may not have been"
                f" applied: {_reason(cause, self._config.request_timeout_s)}"
            ) from cause
        row = result.one()
        # The first column of an LWT's result is always [applied].
        if row is None or not row[0]:
            raise PredicateFailed(f"KV {op}: the current value does not match the predicate")

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | None = None,
        timestamp: int | None = None,
    ) -> None:
        partition, puts, deletes, condition, timestamp = check_apply(partition, puts, deletes, condition, timestamp)
        # One partition: Cassandra applies the batch as a single mutation, atomic and isolated,
        # so no batch log is needed; with a condition the whole batch is one Paxos round.
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        cond_key, predicate = condition or (None, None)
        for key, value in puts:
            if key == cond_key and predicate is None:
                batch.add(self._insert_if_absent, (partition, key, value))
            elif key == cond_key:
                batch.add(self._update_if, (value, partition, key, predicate))
            elif timestamp is not None:
                batch.add(self._set_at, (partition, key, value, timestamp))
            else:
                batch.add(self._set, (partition, key, value))
        for key in deletes:
            if key == cond_key:
                batch.add(self._delete_if, (partition, key, predicate))
            elif timestamp is not None:
                batch.add(self._delete_at, (timestamp, partition, key))
            else:
                batch.add(self._delete, (partition, key))
        if condition is not None:
            self._conditional("apply", batch, None)
            return
        # Every statement of an unconditional batch is idempotent: retrying it is safe.
        batch.is_idempotent = True
        self._write("apply", batch, None)

    def delete(self, partition: bytes, key: bytes) -> None:
        check_key(partition, key)
        self._write("delete", self._delete, (bytes(partition), bytes(key)))

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        if not isinstance(partition, bytes | bytearray) or not partition:
            raise InvalidArgument("KV partition must be non-empty bytes")
        if not isinstance(start, bytes | bytearray):
            raise InvalidArgument("KV scan start must be bytes")
        if start:
            return self._scan(self._scan_from, (bytes(partition), bytes(start)))
        return self._scan(self._scan_all, (bytes(partition),))

    def _scan(self, statement: PreparedStatement, params: tuple[bytes, ...]) -> Iterator[Entry]:
        # A generator, so that nothing is sent until the first entry is asked for and the
        # driver fetches each following page only when the previous one is consumed.
        result = self._execute("scan", statement, params)
        rows = iter(result)
        while True:
            try:
                key, value = next(rows)
            except StopIteration:
                return
            except Exception as exc:
                self._raise("scan", exc)
            yield Entry(bytes(key), b"" if value is None else bytes(value))

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._cluster.shutdown()

    def __repr__(self) -> str:
        return f"CassandraStore({self._contacts}, keyspace={self._config.keyspace})"


def replication(config: CassandraConfig) -> str:
    """The CQL replication map the configuration asks for (of Silt's keyspace, and of system_auth)."""
    if config.replication_strategy == "SimpleStrategy":
        return f"{{'class': 'SimpleStrategy', 'replication_factor': {config.replication_factor}}}"
    if not config.datacenters:
        raise ConfigError(
            "invalid configuration: database.cassandra.datacenters: NetworkTopologyStrategy needs at least"
            " one datacenter: replicas entry"
        )
    dcs = ", ".join(f"'{_cql_string(dc)}': {replicas}" for dc, replicas in config.datacenters.items())
    return f"{{'class': 'NetworkTopologyStrategy', {dcs}}}"


def _cql_string(text: str) -> str:
    return text.replace("'", "''")


register_driver("cassandra", CassandraStore.from_config)
