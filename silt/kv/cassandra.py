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
  unknown (OutcomeUnknown) and whose Paxos round is still unfinished; reading that stale
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

Riding out one lost replica of three (docs/design/kv.md, "Faults on a cluster"):

* Requests a replica could not serve move to another one when that is safe (_RetryPolicy):
  every statement after an Unavailable (nothing was attempted), reads after any error,
  plain writes after a server write timeout (their timestamp is already fixed) and, when
  their timestamp is fixed before sending, after a lost connection. A read (or a write whose
  timestamp is fixed) not answered within ``speculative_delay_s`` is also sent to the next
  replica (execution_profiles).
* Reads are bounded by ``read_timeout_s``, above the server's read timeout: a Cassandra 2.1
  coordinator whose read repair waits on a replica that just died answers ReadTimeout when
  that timeout ends, and the read goes to the next host, by then reading around the dead node.
* A frozen node is noticed by the driver's heartbeat in about 2 s; a node that timed out a
  request is tried last for a few seconds, and one a request had to go past (a speculative
  copy answered) for two (_SuspectsLastPolicy, _Suspects.add_slow).
* An LWT whose outcome a fault left unknown is resolved by a read at SERIAL, and sent again
  only when that read shows it did not apply (_conditional, _resolve); when that cannot
  tell, OutcomeUnknown, which graveler resolves for branch records and staging guards from
  their content. Each send is bounded by lwt_timeout_s (its own profile, _LWT_PROFILE). A first
  send still unanswered past a multiple of the p99 of recent sends (LwtPatience) is read back
  at SERIAL through another node while it goes on waiting (_first_send): a round held by a
  coordinator that froze is settled well before the heartbeat finds the node out.
* One warning line per node going down or coming back (_HostStates); the driver's own
  records about it, some with tracebacks and one per reconnection attempt, are dropped.
"""

from __future__ import annotations

import enum
import errno
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

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
from cassandra.cluster import (
    EXEC_PROFILE_DEFAULT,
    Cluster,
    ExecutionProfile,
    NoHostAvailable,
    ResponseFuture,
    Session,
)
from cassandra.connection import ConnectionException
from cassandra.policies import (
    ConstantSpeculativeExecutionPolicy,
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    HostStateListener,
    RetryPolicy,
    TokenAwarePolicy,
    WrapperPolicy,
)
from cassandra.query import BatchStatement, BatchType, PreparedStatement, tuple_factory

from silt.config import CassandraConfig, DatabaseConfig
from silt.errors import (
    ConfigError,
    InvalidArgument,
    NotApplied,
    NotFound,
    OutcomeUnknown,
    PredicateFailed,
    ResendRefused,
    SiltError,
    Unavailable,
)
from silt.kv.durability import durability_warnings
from silt.kv.lwt_patience import LwtPatience
from silt.kv.store import (
    CheckedBatch,
    Entry,
    Predicate,
    Store,
    ValueWithPredicate,
    check_key,
    check_value,
    register_driver,
)

if TYPE_CHECKING:
    from cassandra.pool import Host
    from cassandra.query import Statement

TABLE = "kv"

# Reconnection to a node that went away is attempted after 0.25 s, then backing off to
# every 2 s: a cluster that comes back is used again within about two seconds.
_RECONNECT_BASE_DELAY_S = 0.25
_RECONNECT_MAX_DELAY_S = 2.0
# A node that left a request unanswered (timeout) or dropped its connection is tried last
# for this long, so that the next requests (and the resolution of an LWT it left unknown)
# do not wait for it again before the heartbeat has marked it down.
_SUSPECT_FOR_S = 5.0
# A node that a request had to go past (a speculative copy or a retry answered) is tried last
# for this long: about as long as the heartbeat takes to tell a frozen node from a slow one.
_SLOW_SUSPECT_FOR_S = 2.0
# An LWT left in doubt by a fault is resolved and, if it certainly did not apply, sent again:
# this many sends in all, and for an LWT whose every condition is on a value, more while the
# first was sent less than the LWT bound ago, up to _LWT_MAX_SENDS. Around a pause faults come in
# quick succession (the heartbeat closes the frozen node's connections with every request on
# them; a node just resumed answers late for about a second): three sends can be cut short well
# within the time a caller waits for one. Not for a condition on absence (unless the row is never
# deleted once written, AllOf.absence_is_final): a copy of one still held by a frozen coordinator
# could apply after a later copy and a delete (see _first_send), and every copy sent is one more
# that could.
_LWT_ATTEMPTS = 3
_LWT_MAX_SENDS = 6
_READ_PROFILE = "silt-read"
# Reads at SERIAL: an LWT's read-back and resolution.
_SERIAL_READ_PROFILE = "silt-serial-read"
# A request this slow is logged, with where it went, at most so many lines a second (_SlowRequests).
_SLOW_REQUEST_S = 1.0
_SLOW_LINES_PER_S = 10
# Lightweight transactions: the default profile but for their own timeout (lwt_timeout_s).
_LWT_PROFILE = "silt-lwt"

# Servers from this version on give plain writes and ballots one node-wide monotonic clock
# (see the module docstring); the change came within 2.1, all of 2.1 is treated as older.
_SHARED_BALLOT_CLOCK_SINCE = (2, 2)


class _RetryPolicy(RetryPolicy):
    """Moves a request the server could not serve to another replica, when that is safe.

    * Unavailable (the coordinator did not have enough live replicas and did not attempt the
      statement): any statement, LWTs included, is sent to the next host once; another
      coordinator may see the replicas differently while gossip catches up.
    * Read timeouts and connection errors: reads are idempotent and go to the next host.
    * Write timeouts: a plain write or unlogged batch that a coordinator gave up on already
      has its timestamp, so sending it again cannot reorder it; it goes to the next host. A
      timeout of an LWT (write type CAS, or SIMPLE in its commit phase) is never retried
      here: its outcome is unknown and ``CassandraStore._conditional`` resolves it.
    * Connection errors and other request errors: only statements marked idempotent (reads,
      writes whose timestamp is fixed; see ``CassandraStore._prepare``) are sent again.

    At most ``retries`` sends to another replica per request (speculative copies not counted).
    """

    def __init__(self, retries: int) -> None:
        self.retries = retries

    def on_read_timeout(
        self,
        query: Statement,
        consistency: int,
        required_responses: int,
        received_responses: int,
        data_retrieved: bool,
        retry_num: int,
    ) -> tuple[int, Any]:
        if _idempotent(query) and retry_num < self.retries:
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None

    def on_write_timeout(
        self,
        query: Statement,
        consistency: int,
        write_type: str,
        required_responses: int,
        received_responses: int,
        retry_num: int,
    ) -> tuple[int, Any]:
        retryable = write_type in (WriteType.SIMPLE, WriteType.BATCH, WriteType.UNLOGGED_BATCH)
        if retryable and _plain_write(query) and retry_num < self.retries:
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None

    def on_unavailable(
        self, query: Statement, consistency: int, required_replicas: int, alive_replicas: int, retry_num: int
    ) -> tuple[int, Any]:
        if retry_num == 0 and self.retries > 0:
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None

    def on_request_error(self, query: Statement, consistency: int, error: Exception, retry_num: int) -> tuple[int, Any]:
        if _idempotent(query) and retry_num < self.retries:
            return self.RETRY_NEXT_HOST, None
        return self.RETHROW, None


class _Suspects:
    """Nodes that recently timed out a request or dropped a connection, with when."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[Host, float] = {}

    def add(self, host: Host | None, seconds: float = _SUSPECT_FOR_S) -> None:
        if host is not None:
            with self._lock:
                self._until[host] = max(self._until.get(host, 0.0), time.monotonic() + seconds)

    def add_slow(self, result: Any) -> None:
        """After a request that succeeded: the nodes it was sent to before the one that answered
        (a speculative copy or a retry went further) are tried last for a short while. A node
        that just froze is then left by the next requests, LWTs included, after one slow read
        rather than after the heartbeat has noticed it; a node merely slow for a moment loses
        its place for as short."""
        attempted = getattr(getattr(result, "response_future", None), "attempted_hosts", None) or []
        for host in attempted[:-1]:
            self.add(host, _SLOW_SUSPECT_FOR_S)

    def clear(self, host: Host) -> None:
        with self._lock:
            self._until.pop(host, None)

    def current(self) -> set[Host]:
        now = time.monotonic()
        with self._lock:
            for host in [h for h, until in self._until.items() if until <= now]:
                del self._until[host]
            return set(self._until)


class _SuspectsLastPolicy(WrapperPolicy):
    """The child's plan (replicas first), with suspected nodes moved to its end; then the same
    hosts again, ``passes`` times in all.

    The further passes are for retries: speculative copies and retries take hosts from the
    same plan, one per send, and the driver skips a host it has marked down. With two copies
    out on three nodes, one of them dead, a single pass is empty after the first retry, and
    the driver then fails the whole request although copies are still waiting for their
    answers. So the plan holds as many passes as a request can make sends. A second send to a
    host that holds a copy is harmless: only idempotent statements are retried.
    """

    def __init__(self, child_policy: Any, suspects: _Suspects, passes: int = 2) -> None:
        super().__init__(child_policy)
        self._suspects = suspects
        self._passes = passes

    def make_query_plan(self, working_keyspace: str | None = None, query: Statement | None = None) -> Iterator[Host]:
        suspects = self._suspects.current()
        plan = list(self._child_policy.make_query_plan(working_keyspace, query))
        ordered = [host for host in plan if host not in suspects] + [host for host in plan if host in suspects]
        for _ in range(self._passes):
            yield from ordered


class _HostStates(HostStateListener):
    """Says once, in one line, that a node went down (a warning) or came back (info); the
    driver's own records about it are held back by _DriverNoise."""

    def __init__(self, suspects: _Suspects) -> None:
        self._suspects = suspects

    def on_down(self, host: Host) -> None:
        _log.warning("cassandra: node %s is down; requests go to the other replicas until it is back", host.endpoint)

    def on_up(self, host: Host) -> None:
        self._suspects.clear(host)
        _log.info("cassandra: node %s is up again", host.endpoint)

    def on_add(self, host: Host) -> None:
        pass

    def on_remove(self, host: Host) -> None:
        pass


class _DriverNoise(logging.Filter):
    """Drops the driver's warnings about a node being unreachable: some carry a traceback,
    and one comes per reconnection attempt (every 2 s) for as long as the node is down.
    Silt logs the change of state once instead (_HostStates). Other records pass."""

    _PREFIXES = (
        "Host %s has been marked down",
        "[control connection] Error connecting to",
        "Failed to create connection pool for new host",
        "Connection pool could not be created",
        "Error attempting to reconnect to",
        "Failed reconnecting",
        "Failed to create new connection to",
        "Failed to add new connection to pool",
        "Heartbeat failed for connection",
        "Failed sending heartbeat message",
        "Error trying to prepare all statements on host",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not str(record.msg).startswith(self._PREFIXES)


_log = logging.getLogger(__name__)
_NOISY_DRIVER_LOGGERS = ("cassandra.cluster", "cassandra.pool", "cassandra.connection")
_driver_noise = _DriverNoise()


def _quiet_driver_logs() -> None:
    for name in _NOISY_DRIVER_LOGGERS:
        logger = logging.getLogger(name)
        if _driver_noise not in logger.filters:
            logger.addFilter(_driver_noise)


def _idempotent(query: Statement | None) -> bool:
    return query is not None and bool(query.is_idempotent)


# Marks the statements (prepared, or a batch) that are plain writes: neither reads nor LWTs.
_PLAIN_WRITE = "silt_plain_write"


def _plain_write(query: Statement | None) -> bool:
    prepared = getattr(query, "prepared_statement", None)  # a bound statement's
    return bool(getattr(query, _PLAIN_WRITE, False) or getattr(prepared, _PLAIN_WRITE, False))


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


class _ReadBack(enum.Enum):
    """What a read at SERIAL told of a first LWT send still unanswered (CassandraStore._first_send)."""

    APPLIED = "applied"
    SEND_AGAIN = "not applied: send it again"


class _Change(NamedTuple):
    """What an LWT changes: one key's value from before (None: absent) to after (None: deleted)."""

    partition: bytes
    key: bytes
    before: bytes | None
    after: bytes | None


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


def not_attempted(exc: BaseException) -> bool:
    """Whether the driver's exc says the request was never attempted: the coordinator refused it
    for want of live replicas, or no node could be sent it (none known, or every connection
    refused). A write that timed out (WriteTimeout, OperationTimedOut) or a connection lost
    after sending may have been applied."""
    if isinstance(exc, DriverUnavailable):
        return True
    if isinstance(exc, NoHostAvailable):
        errors = list((exc.errors or {}).values())
        return all(not_attempted(error) or isinstance(error, ConnectionRefusedError) for error in errors)
    return False


class _SlowRequests:
    """One INFO line for a request that took _SLOW_REQUEST_S or more, with the nodes it went to
    in order: what a lost or frozen node held, and for how long, is read from these. At most
    _SLOW_LINES_PER_S lines a second, so that a cluster slow for minutes does not flood the
    log; the next line says how many were left out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._second = 0
        self._lines = 0
        self._left_out = 0
        self._first_left_out = 0.0

    def note(self, op: str, future: ResponseFuture, seconds: float) -> None:
        if seconds < _SLOW_REQUEST_S:
            return
        now = time.monotonic()
        with self._lock:
            if int(now) != self._second:
                self._second, self._lines = int(now), 0
            if self._lines >= _SLOW_LINES_PER_S:
                if not self._left_out:
                    self._first_left_out = now
                self._left_out += 1
                return
            self._lines += 1
            left_out, self._left_out = self._left_out, 0
        hosts = ", ".join(str(host.endpoint) for host in future.attempted_hosts or ())
        more = (
            f"; {left_out} more slow requests not logged in the {now - self._first_left_out:.0f} s before this one"
            if left_out
            else ""
        )
        _log.info("cassandra: %s took %.2f s (sent to %s)%s", op, seconds, hosts or "no node", more)


_slow_requests = _SlowRequests()
_note_if_slow = _slow_requests.note


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def execution_profiles(config: CassandraConfig, suspects: _Suspects) -> dict[object, ExecutionProfile]:
    """The driver's execution profiles: the default one (writes); one for reads, bounded by
    read_timeout_s (above the server's read timeout, so that a read a coordinator holds for a
    dead replica comes back as a server ReadTimeout, which _RetryPolicy sends to the next host,
    rather than failing here); and one for LWTs, whose sends may be bounded shorter
    (lwt_timeout_s: _conditional resolves a send that timed out by a read at SERIAL through
    another node, and sends again only if it did not land).

    All route token-aware (the partition's replicas first, in ring order, so that one
    coordinator orders a partition's writes while it is up), within the local datacenter, nodes
    that recently left a request unanswered last. All speculate, and the driver speculates
    only statements marked idempotent (``CassandraStore._prepare``): reads, and writes whose
    timestamp is fixed before they are sent. Never an LWT, nor a write its coordinator
    timestamps: a copy of one queued at a frozen coordinator would be stamped when that node
    wakes, over a later write of the key.
    """
    speculation = (
        ConstantSpeculativeExecutionPolicy(config.speculative_delay_s, config.speculative_executions)
        if config.speculative_executions > 0
        else None
    )

    # Reads may be sent again once per copy besides the retries: when every coordinator holding
    # a copy answers a server ReadTimeout (a replica that died, which the 2.1 repair read waits
    # for), a retry budget the first timeouts spent would make the next one end the request,
    # though the first retry may be about to answer.
    read_retries = config.retries + config.speculative_executions
    # A read's plan holds one host per send it can make: the first, its copies, its retries.
    # Other plans pass over the hosts twice: the driver's control connection also walks the
    # default profile's plan to (re)connect, a connect timeout per host it lists.
    read_passes = 1 + config.speculative_executions + read_retries

    def profile(
        timeout_s: float = config.request_timeout_s, retries: int = config.retries, passes: int = 2
    ) -> ExecutionProfile:
        return ExecutionProfile(
            load_balancing_policy=_SuspectsLastPolicy(
                TokenAwarePolicy(
                    # An empty local_dc makes the driver adopt the first contact point's
                    # datacenter, which is right when contact points are local.
                    DCAwareRoundRobinPolicy(local_dc=config.local_datacenter or ""),
                    shuffle_replicas=False,
                ),
                suspects,
                passes,
            ),
            retry_policy=_RetryPolicy(retries),
            consistency_level=ConsistencyLevel.name_to_value[config.consistency],
            serial_consistency_level=ConsistencyLevel.name_to_value[config.serial_consistency],
            request_timeout=timeout_s,
            row_factory=tuple_factory,
            speculative_execution_policy=speculation,
        )

    return {
        EXEC_PROFILE_DEFAULT: profile(),
        _READ_PROFILE: profile(config.read_timeout_s, read_retries, read_passes),
        # An LWT's read-back and resolution keep the LWT's bound, so that one in doubt is
        # settled (or reported unknown) within a few sends' time.
        _SERIAL_READ_PROFILE: profile(config.lwt_bound_s, read_retries, read_passes),
        _LWT_PROFILE: profile(config.lwt_bound_s),
    }


def _auth_provider(config: CassandraConfig) -> PlainTextAuthProvider | None:
    if config.username is None:
        return None
    password = config.password.get_secret_value() if config.password is not None else ""
    return PlainTextAuthProvider(username=config.username, password=password)


class CassandraStore(Store):
    """The KV Store on a Cassandra keyspace; thread-safe, one driver Session shared."""

    def __init__(self, config: CassandraConfig) -> None:
        self._config = config
        self._contacts = ", ".join(f"{host}:{config.port}" for host in config.contact_points)
        self._closed = False
        self._close_lock = threading.Lock()
        self._fence: _LegacyBallotFence | None = None
        self._suspects = _Suspects()
        self._lwt_patience = LwtPatience(config.lwt_bound_s, config.lwt_patience_factor, config.lwt_patience_floor_s)
        _quiet_driver_logs()
        try:
            self._cluster = self._make_cluster(config, self._suspects)
        except Exception as exc:
            raise Unavailable(
                f"cassandra: cannot reach {self._contacts}: {_reason(exc, config.connect_timeout_s)}"
            ) from exc
        try:
            self._session = self._connect()
            if config.create_schema:
                self._create_schema()
            # First: whether plain writes carry client timestamps decides their retries.
            self._check_server_versions()
            self._prepare()
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
    def _make_cluster(config: CassandraConfig, suspects: _Suspects) -> Cluster:
        return Cluster(
            contact_points=list(config.contact_points),
            port=config.port,
            execution_profiles=execution_profiles(config, suspects),
            auth_provider=_auth_provider(config),
            connect_timeout=config.connect_timeout_s,
            control_connection_timeout=config.connect_timeout_s,
            reconnection_policy=ExponentialReconnectionPolicy(
                base_delay=_RECONNECT_BASE_DELAY_S, max_delay=_RECONNECT_MAX_DELAY_S, max_attempts=None
            ),
            # A frozen node (paused, swapping, a dropped NAT entry: no FIN, no RST) is noticed
            # by the heartbeat of its idle connections, where gossip takes ~18 s to convict it.
            idle_heartbeat_interval=config.heartbeat_interval_s,
            idle_heartbeat_timeout=config.heartbeat_timeout_s,
            max_schema_agreement_wait=max(config.request_timeout_s, 10.0),
            **({} if config.protocol_version is None else {"protocol_version": config.protocol_version}),
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
        self._cluster.register_listener(_HostStates(self._suspects))
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
                "partition_key blob, key blob, value blob, PRIMARY KEY ((partition_key), key))"
                f" WITH speculative_retry = '{self._config.speculative_retry}'",
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
        # Whether a statement may be sent again at any time (a retry after a lost connection):
        # reads, and writes whose timestamp is fixed before they leave this process (USING
        # TIMESTAMP, or client timestamps). A plain write timestamped by its coordinator is
        # not: a copy still queued at a frozen node would be stamped when that node wakes,
        # after (and over) a later write of the same key. Such a write is sent again only when
        # its coordinator answered (a timeout from replicas: it already has its timestamp).
        plain = self._session.use_client_timestamp
        statements = {
            "_get": (f"SELECT value FROM {table} WHERE partition_key = ? AND key = ?", True),
            # Resolves an LWT left in doubt (consistency set below): see _resolve.
            "_get_serial": (f"SELECT value FROM {table} WHERE partition_key = ? AND key = ?", True),
            "_set": (f"INSERT INTO {table} (partition_key, key, value) VALUES (?, ?, ?)", plain),
            "_insert_if_absent": (
                f"INSERT INTO {table} (partition_key, key, value) VALUES (?, ?, ?) IF NOT EXISTS",
                False,
            ),
            "_update_if": (f"UPDATE {table} SET value = ? WHERE partition_key = ? AND key = ? IF value = ?", False),
            "_delete": (f"DELETE FROM {table} WHERE partition_key = ? AND key = ?", plain),
            # For apply: rows written at a caller's timestamp, and a conditional delete.
            "_set_at": (f"INSERT INTO {table} (partition_key, key, value) VALUES (?, ?, ?) USING TIMESTAMP ?", True),
            "_delete_at": (f"DELETE FROM {table} USING TIMESTAMP ? WHERE partition_key = ? AND key = ?", True),
            "_delete_if": (f"DELETE FROM {table} WHERE partition_key = ? AND key = ? IF value = ?", False),
            # Several keys of one partition in one read (the clock feed of blind staging writes).
            "_get_many": (f"SELECT key, value FROM {table} WHERE partition_key = ? AND key IN ?", True),
            "_scan_all": (f"SELECT key, value FROM {table} WHERE partition_key = ?", True),
            # An empty blob as a slice bound is not accepted by every version, hence two scans.
            "_scan_from": (f"SELECT key, value FROM {table} WHERE partition_key = ? AND key >= ?", True),
        }
        plain_writes = {"_set", "_delete", "_set_at", "_delete_at"}
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
            setattr(prepared, _PLAIN_WRITE, attr in plain_writes)
            setattr(self, attr, prepared)
        self._get_serial.consistency_level = ConsistencyLevel.name_to_value[self._config.serial_consistency]

    def _check_server_versions(self) -> None:
        versions = [_parse_version(host.release_version) for host in self._cluster.metadata.all_hosts()]
        if any(version and version < _SHARED_BALLOT_CLOCK_SINCE for version in versions):
            self._fence = _LegacyBallotFence()
        else:
            # Coordinator-side timestamps: see the module docstring.
            self._session.use_client_timestamp = False

    # --- execution -----------------------------------------------------------------------

    _get: PreparedStatement
    _get_serial: PreparedStatement
    _get_many: PreparedStatement
    _set: PreparedStatement
    _insert_if_absent: PreparedStatement
    _update_if: PreparedStatement
    _delete: PreparedStatement
    _set_at: PreparedStatement
    _delete_at: PreparedStatement
    _delete_if: PreparedStatement
    _scan_all: PreparedStatement
    _scan_from: PreparedStatement

    def _raise(self, op: str, exc: BaseException, what: str | None = None, timeout_s: float | None = None) -> NoReturn:
        if isinstance(exc, SiltError):
            raise exc
        if isinstance(exc, InvalidRequest):
            raise InvalidArgument(f"cassandra: {what or op} rejected: {_first_line(exc)}") from exc
        if self._closed:
            raise NotApplied("cassandra: the store is closed") from exc
        reason = _reason(exc, timeout_s or self._config.request_timeout_s)
        error = NotApplied if not_attempted(exc) else Unavailable
        raise error(f"cassandra: {what or op} on {self._contacts} failed: {reason}") from exc

    def _execute(
        self, op: str, statement: Statement, params: tuple[Any, ...] | None, profile: object = EXEC_PROFILE_DEFAULT
    ) -> Any:
        started = time.monotonic()
        future = self._send(op, statement, params, profile)
        try:
            return self._await(op, future)
        finally:
            _note_if_slow(op, future, time.monotonic() - started)

    def _send(self, op: str, statement: Statement, params: tuple[Any, ...] | None, profile: object) -> ResponseFuture:
        if self._closed:
            raise NotApplied("cassandra: the store is closed")
        try:
            return self._session.execute_async(statement, params, execution_profile=profile)
        except Exception as exc:
            self._raise(op, exc)

    def _await(self, op: str, future: ResponseFuture) -> Any:
        """The answer to a request sent, or its error as a Silt error."""
        try:
            result = future.result()
        except OperationTimedOut as exc:
            self._suspects.add(exc.last_host)
            self._raise(op, exc, timeout_s=future.timeout)
        except Exception as exc:
            self._raise(op, exc, timeout_s=future.timeout)
        self._suspects.add_slow(result)
        return result

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
        row = self._execute("get", self._get, (bytes(partition), bytes(key)), _READ_PROFILE).one()
        # A row without a value is never written by this driver; treat it as absent, as
        # set_if does (IF NOT EXISTS would refuse it, IF value = ? never matches it).
        if row is None or row[0] is None:
            raise NotFound("KV key not found")
        value = bytes(row[0])
        return ValueWithPredicate(value, Predicate(value))

    def get_many(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        for key in keys:
            check_key(partition, key)
        if not keys:
            return {}
        unique = [bytes(key) for key in dict.fromkeys(keys)]
        found: dict[bytes, bytes] = {}
        # A request per page_size keys: each answer fits in one page, so the driver's paging
        # (see _scan) is never used.
        step = self._config.page_size
        for at in range(0, len(unique), step):
            rows = self._execute("get_many", self._get_many, (bytes(partition), unique[at : at + step]), _READ_PROFILE)
            found.update((bytes(key), bytes(value)) for key, value in rows.current_rows if value is not None)
        return found

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
        before = None if predicate is None else bytes(predicate)
        change = _Change(bytes(partition), bytes(key), before, bytes(value))
        self._conditional("set_if", statement, params, change, on_values=predicate is not None)

    def _conditional(
        self, op: str, statement: Statement, params: tuple[bytes, ...] | None, change: _Change, *, on_values: bool
    ) -> None:
        """Run an LWT (one statement or a conditional batch) that makes change; PredicateFailed
        if not applied. One whose outcome a fault left unknown is resolved (_resolve), never
        taken as failed or done. on_values: every condition is on a row's value, or on the
        absence of a row that is never absent again once written (see _first_send)."""
        resent = False
        first_sent = time.monotonic()
        sends = 0
        fault = ""
        while self._may_send(sends, first_sent, on_values):
            sends += 1
            if self._fence is not None:
                self._fence.before_lwt()
            try:
                if resent:
                    result = self._execute(op, statement, params, _LWT_PROFILE)
                else:
                    result = self._first_send(op, statement, params, change, on_values)
            except Unavailable as exc:
                cause = exc.__cause__
                # The server refusing up front (not enough replicas, no node to ask) means the
                # write was not attempted; anything else may have been applied.
                if isinstance(cause, DriverUnavailable | NoHostAvailable) or cause is None:
                    if not resent:
                        raise
                    # This send wrote nothing, but an earlier one may still land: the SERIAL
                    # read that found it not applied does not finish a proposal accepted only
                    # by replicas outside its quorum, and the next Paxos round that reaches one
                    # of them commits it (Cassandra before 3.0.24 and 3.11.10). Only a resend
                    # that runs its own round settles it; this one did not run.
                    why = _reason(cause, self._config.lwt_bound_s) if cause is not None else str(exc)
                    raise OutcomeUnknown(
                        f"cassandra: {op} on {self._contacts}: outcome unknown, an earlier send interrupted by"
                        f" a fault may still apply; sending it again failed: {why}"
                    ) from exc
                if self._resolve(op, change, cause):
                    return
                fault = _reason(cause, self._config.lwt_bound_s)
                resent = True
                continue
            if result is _ReadBack.APPLIED:
                return
            if result is _ReadBack.SEND_AGAIN:
                fault = "no answer within the first send's patience"
                resent = True
                continue
            row = result.one()
            # The first column of an LWT's result is always [applied].
            if row is not None and row[0]:
                return
            if not resent:
                raise PredicateFailed(f"KV {op}: the current value does not match the predicate")
            # A resend that did not apply: the first send may have applied after all (its
            # coordinator was frozen, not dead, and woke up), or another writer got in.
            if self._resolve(op, change, None):
                return
            raise ResendRefused(
                f"cassandra: {op} on {self._contacts}: outcome unknown after resending it: the resend did not"
                " apply and the key reads as before"
            )
        raise OutcomeUnknown(
            f"cassandra: {op} on {self._contacts}: outcome unknown, the write may or may not have been applied:"
            f" not applied after {sends} sends in {time.monotonic() - first_sent:.1f} s, each interrupted by a"
            f" fault (the last: {fault})"
        )

    def _may_send(self, sends: int, first_sent: float, on_values: bool) -> bool:
        """Whether an LWT sent `sends` times so far, first at first_sent, and each time found not
        applied after a fault, is sent again (see _LWT_ATTEMPTS)."""
        if sends < _LWT_ATTEMPTS:
            return True
        return on_values and sends < _LWT_MAX_SENDS and time.monotonic() - first_sent < self._config.lwt_bound_s

    def _first_send(
        self, op: str, statement: Statement, params: tuple[bytes, ...] | None, change: _Change, on_values: bool
    ) -> Any:
        """The first send of an LWT: its answer, or what a read at SERIAL through another node
        tells once it has waited past the patience's bound (LwtPatience: a multiple of the p99 of
        recent sends), for a coordinator that froze in the middle of its round holds it until the
        heartbeat finds the node out, about 2 s. What the read shows:

        * the LWT's value: it applied (APPLIED);
        * the value it was conditioned on, when every condition is on a value (on_values): send it
          again (SEND_AGAIN). The first copy cannot apply after the resend has changed the value,
          for Silt's conditional values never repeat. A row's absence may repeat (created, then
          deleted), and a coordinator that is slow, not frozen, retries its round's condition
          until the server's CAS contention timeout: a copy conditioned on absence could apply
          after the resend and a delete, so such an LWT waits for its own answer, unless its
          caller promises the row is never deleted once written (AllOf.absence_is_final, which
          on_values then includes: staging guards);
        * anything else, or a read that fails: the first send's own answer, waited for up to the
          whole timeout, as without the bound: another writer got in, and only that answer tells
          whether ours came first.
        """
        started = time.monotonic()
        future = self._send(op, statement, params, _LWT_PROFILE)
        try:
            return self._first_answer(op, future, started, change, on_values)
        finally:
            _note_if_slow(op, future, time.monotonic() - started)

    def _first_answer(self, op: str, future: ResponseFuture, started: float, change: _Change, on_values: bool) -> Any:
        bound_s = self._lwt_patience.bound_s()
        if bound_s is None:
            try:
                return self._await(op, future)
            finally:
                self._lwt_patience.answered(time.monotonic() - started)
        answered = threading.Event()
        future.add_callbacks(lambda _: answered.set(), lambda _: answered.set())
        if answered.wait(bound_s):
            self._lwt_patience.answered(time.monotonic() - started)
            return self._await(op, future)
        self._lwt_patience.gave_up(bound_s)
        # Its coordinator goes last for a moment, so that the read below, a resend and the next
        # requests go elsewhere; the heartbeat takes over if it froze.
        self._suspects.add(future.attempted_hosts[-1] if future.attempted_hosts else None, _SLOW_SUSPECT_FOR_S)
        try:
            current = self._read_serial(op, change)
        except Unavailable:
            return self._await(op, future)
        if current == change.after:
            _log.info("cassandra: %s: no answer within %.2f s; read back at SERIAL: applied", op, bound_s)
            return _ReadBack.APPLIED
        if current == change.before and on_values:
            _log.info("cassandra: %s: no answer within %.2f s; read back: not applied, sending it again", op, bound_s)
            return _ReadBack.SEND_AGAIN
        return self._await(op, future)

    def _read_serial(self, op: str, change: _Change) -> bytes | None:
        """The changed key's value read at serial_consistency (None: absent): what any Paxos
        round in progress on it left, finished first."""
        row = self._execute(op, self._get_serial, (change.partition, change.key), _SERIAL_READ_PROFILE).one()
        return None if row is None or row[0] is None else bytes(row[0])

    def _resolve(self, op: str, change: _Change, cause: BaseException | None) -> bool:
        """Whether an LWT whose outcome is unknown applied (True), or has not so far and is to be
        sent again (False); OutcomeUnknown (an Unavailable) when that cannot be known.

        A read at SERIAL first finishes any Paxos round in progress that its quorum of replicas
        knows of: the LWT's value means it applied. The value it was conditioned on means it
        has not applied yet, but not that it cannot: a proposal accepted only by replicas
        outside that quorum stays pending (the read commits nothing that would supersede it),
        and the next Paxos round that reaches one of them commits it (Cassandra before 3.0.24
        and 3.11.10). The resend that follows settles it either way: its own round commits the
        pending proposal (then finds the key changed, and it is resolved again here) or
        supersedes it; a coordinator still holding the first send finds the key changed. Any
        other value means another writer changed the key since, and whether ours applied first
        cannot be told. Values are compared, so an LWT that writes the value a concurrent writer also
        wrote counts as applied: Silt's conditional values (records with fresh ids, counters,
        timestamps) do not repeat.
        """
        reason = "" if cause is None else f": {_reason(cause, self._config.lwt_bound_s)}"
        try:
            current = self._read_serial(op, change)
        except Unavailable as exc:
            raise OutcomeUnknown(
                f"cassandra: {op} on {self._contacts}: outcome unknown, the write may or may not have been"
                f" applied{reason}; reading it back at {self._config.serial_consistency} failed too:"
                f" {_reason(exc.__cause__ or exc, self._config.lwt_bound_s)}"
            ) from cause or exc
        if current == change.after:
            _log.info(
                "cassandra: %s: interrupted%s; read back at %s: applied", op, reason, self._config.serial_consistency
            )
            return True
        if current == change.before:
            _log.info("cassandra: %s: interrupted%s; read back: not applied, sending it again", op, reason)
            return False
        raise OutcomeUnknown(
            f"cassandra: {op} on {self._contacts}: outcome unknown, the write may or may not have been applied"
            f"{reason}; another writer has changed the key since"
        ) from cause

    def apply_checked(self, batch: CheckedBatch) -> None:
        partition, puts, deletes, conditions, timestamp = batch
        # One partition: Cassandra applies the batch as a single mutation, atomic and isolated,
        # so no batch log is needed; with conditions the whole batch is one Paxos round, which
        # applies every row only if every condition holds (a conditional batch may carry
        # conditions on several rows as long as they share the partition).
        statement = BatchStatement(batch_type=BatchType.UNLOGGED)
        predicates = dict(conditions)
        for index, (key, value) in enumerate(puts):
            stamp = batch.stamp_of(index)
            if key in predicates and predicates[key] is None:
                statement.add(self._insert_if_absent, (partition, key, value))
            elif key in predicates:
                statement.add(self._update_if, (value, partition, key, predicates[key]))
            elif stamp is not None:
                statement.add(self._set_at, (partition, key, value, stamp))
            else:
                statement.add(self._set, (partition, key, value))
        for key in deletes:
            if key in predicates:
                statement.add(self._delete_if, (partition, key, predicates[key]))
            elif timestamp is not None:
                statement.add(self._delete_at, (timestamp, partition, key))
            else:
                statement.add(self._delete, (partition, key))
        if conditions:
            # The batch is all or nothing: its first condition's row tells whether it applied
            # when a fault leaves the outcome unknown.
            cond_key, predicate = conditions[0]
            after = next((value for key, value in puts if key == cond_key), None)
            change = _Change(partition, cond_key, predicate, after)
            # A condition on absence is as safe to send again as one on a value when its caller
            # promises the key's absence never comes back (AllOf.absence_is_final).
            on_values = conditions.absence_is_final or all(expected is not None for _, expected in conditions)
            self._conditional("apply", statement, None, change, on_values=on_values)
            return
        # An unconditional batch is a plain write (see _prepare), with fixed timestamps if given.
        statement.is_idempotent = timestamp is not None or self._session.use_client_timestamp
        setattr(statement, _PLAIN_WRITE, True)
        self._write("apply", statement, None)

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
        """The entries, a page of page_size rows per request, each page sent once the previous
        one is consumed (a generator: nothing is sent before the first entry is asked for).

        A following page is read from the key after the last one returned, never from the
        driver's paging state: the driver's own paging reuses the first page's request object
        (whose timer is cancelled, so the next page would have no timeout and no speculative
        copy), and a speculative copy answering late overwrites that object's paging state and
        result, so the next page would start after another copy's last key, skipping or
        repeating rows. Each page here is the rows of the one answer that finished its request;
        the scan ends at a page shorter than page_size that the answer also says is the last.
        """
        partition = params[0]
        while True:
            page = self._execute("scan", statement, params, _READ_PROFILE)
            rows = page.current_rows
            last_page = page.paging_state is None and len(rows) < self._config.page_size
            for key, value in rows:
                yield Entry(bytes(key), b"" if value is None else bytes(value))
            if last_page or not rows:
                return
            # The smallest key after the last one, in byte order.
            statement, params = self._scan_from, (partition, bytes(rows[-1][0]) + b"\x00")
            # One page held at a time: the driver keeps a page's request, and so its rows, until
            # its speculation timer has run out, which is longer than reading a page can take.
            rows.clear()

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
