"""Embedded KV driver: one SQLite file in WAL mode, shared safely by many threads and processes.

Every operation but `apply` is a single SQL statement in autocommit mode, so each is its
own atomic transaction; `set_if` is one conditional UPDATE (or INSERT .. DO NOTHING) whose
row count says whether the predicate held; `apply` is one explicit transaction. WAL lets
readers proceed while a writer commits, and the busy timeout makes concurrent writers from
other processes wait rather than fail.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.errors import NotApplied, NotFound, PredicateFailed, Unavailable
from silt.kv.store import (
    SCAN_CHUNK,
    CheckedBatch,
    Condition,
    Entry,
    Pair,
    Predicate,
    Store,
    ValueWithPredicate,
    check_key,
    check_value,
    chunk_size,
    entries_of,
    register_driver,
)

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    partition_key BLOB NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    ts INTEGER NOT NULL DEFAULT 0,
    tombstone INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_key, key)
) WITHOUT ROWID
"""
# What the purge of old tombstones walks, instead of the table.
_TOMBSTONE_INDEX = "CREATE INDEX IF NOT EXISTS kv_tombstones ON kv (ts) WHERE tombstone = 1"
# Four parameters a row, within the 999 that SQLite before 3.32 allows in one statement.
_MAX_ROWS_PER_INSERT = 200
# ts: the write timestamp of a row last written by a timestamped apply, 0 otherwise.
# tombstone: 1 for a row a timestamped delete left, as Cassandra does: invisible to every read,
# there only so that a write stamped before the delete and arriving after it is lost (last write
# wins by timestamp); purged once older than _TOMBSTONE_GRACE_US. Files made before either
# existed gain the columns on open.
_ADDED_COLUMNS = {
    "ts": "ALTER TABLE kv ADD COLUMN ts INTEGER NOT NULL DEFAULT 0",
    "tombstone": "ALTER TABLE kv ADD COLUMN tombstone INTEGER NOT NULL DEFAULT 0",
}
# How long a tombstone outlives its timestamp's wall time: far longer than any write may travel
# late (a staging write's deadline) plus any clock skew between writers. Cassandra's own grace
# (gc_grace_seconds) is longer only because it also waits for repairs.
_TOMBSTONE_GRACE_US = 3600 * 1_000_000
# At most one purge of old tombstones per this many seconds per store.
_PURGE_EVERY_S = 60.0
_PURGE = "DELETE FROM kv WHERE tombstone = 1 AND ts < ?"

_GET = "SELECT value FROM kv WHERE partition_key = ? AND key = ? AND tombstone = 0"
# An untimestamped write replaces whatever is there, a tombstone too (no key is written both
# ways: docs/design/kv.md, "One key, one kind of write").
_SET = (
    "INSERT INTO kv (partition_key, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (partition_key, key) DO UPDATE SET value = excluded.value, ts = 0, tombstone = 0"
)
# Last write wins by timestamp, as in Cassandra: an older write arriving late is lost; at equal
# timestamps a tombstone beats a value and the larger value beats the smaller (Cassandra's rule).
_WINS = "excluded.ts > kv.ts OR (excluded.ts = kv.ts AND kv.tombstone = 0 AND excluded.value > kv.value)"
_SET_AT = (
    "INSERT INTO kv (partition_key, key, value, ts) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (partition_key, key) DO UPDATE SET value = excluded.value, ts = excluded.ts, tombstone = 0 "
    f"WHERE {_WINS}"
)
# A timestamped delete leaves a tombstone row at its timestamp (see _ADDED_COLUMNS).
_DELETE_AT = (
    "INSERT INTO kv (partition_key, key, value, ts, tombstone) VALUES (?, ?, x'', ?, 1) "
    "ON CONFLICT (partition_key, key) DO UPDATE SET value = x'', ts = excluded.ts, tombstone = 1 "
    "WHERE excluded.ts >= kv.ts"
)
# Absent: no row, or a tombstone.
_INSERT_IF_ABSENT = (
    "INSERT INTO kv (partition_key, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (partition_key, key) DO UPDATE SET value = excluded.value, ts = 0, tombstone = 0 "
    "WHERE kv.tombstone = 1"
)
_UPDATE_IF = "UPDATE kv SET value = ?, ts = 0 WHERE partition_key = ? AND key = ? AND value = ? AND tombstone = 0"
_DELETE = "DELETE FROM kv WHERE partition_key = ? AND key = ?"
_SCAN_FIRST = "SELECT key, value FROM kv WHERE partition_key = ? AND key >= ? AND tombstone = 0 ORDER BY key LIMIT ?"
_SCAN_NEXT = "SELECT key, value FROM kv WHERE partition_key = ? AND key > ? AND tombstone = 0 ORDER BY key LIMIT ?"


class LocalStore(Store):
    def __init__(self, config: LocalDatabaseConfig) -> None:
        self._path = Path(config.path).expanduser()
        self._config = config
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        # Statements running now; close() waits for them: closing a connection while another
        # thread steps a statement on it frees what SQLite is reading (a segmentation fault).
        self._in_use = 0
        self._idle = threading.Condition(self._connections_lock)
        self._closed = False
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Unavailable(f"local KV: cannot create directory {self._path.parent}: {exc.strerror}") from None
        conn = self._conn()
        with self._errors():
            conn.execute(_SCHEMA)
            self._add_columns(conn)
            conn.execute(_TOMBSTONE_INDEX)
        self._purged_at = time.monotonic()

    @staticmethod
    def _add_columns(conn: sqlite3.Connection) -> None:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(kv)")}
        for column, statement in _ADDED_COLUMNS.items():
            if column in columns:
                continue
            try:
                conn.execute(statement)
            except sqlite3.OperationalError:
                # Another process opening the same file may have added it first: the table
                # says so, not the error's text.
                if column not in {row[1] for row in conn.execute("PRAGMA table_info(kv)")}:
                    raise

    @classmethod
    def from_config(cls, config: DatabaseConfig) -> LocalStore:
        return cls(config.local)

    def _conn(self) -> sqlite3.Connection:
        # sqlite3 connections are not shareable between threads in flight; one per thread
        # keeps concurrent readers from serialising on a lock.
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._errors():
            # Switching a new file to WAL takes an exclusive lock for which SQLite does not
            # wait (SQLITE_BUSY at once, busy timeout or not): when several processes open a
            # fresh database together (`make run` starts three), all but one must retry.
            for attempt in Retrying(
                retry=retry_if_exception(_is_lock_contention),
                stop=stop_after_delay(self._config.busy_timeout_ms / 1000),
                wait=wait_random_exponential(multiplier=0.005, max=0.1),
                reraise=True,
            ):
                with attempt:
                    conn = self._connect()
        assert conn is not None  # Retrying connected, or re-raised the last failure
        with self._connections_lock:
            self._connections.append(conn)
        self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._config.busy_timeout_ms / 1000,
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._config.synchronous}")
            conn.execute(f"PRAGMA busy_timeout={self._config.busy_timeout_ms}")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, for one operation; close() waits for it to end."""
        with self._connections_lock:
            if self._closed:
                raise NotApplied("local KV: store is closed")
            self._in_use += 1
        try:
            yield self._conn()
        finally:
            with self._connections_lock:
                self._in_use -= 1
                if not self._in_use:
                    self._idle.notify_all()

    def _errors(self) -> _SqliteErrors:
        return _SqliteErrors(self._path)

    def get(self, partition: bytes, key: bytes) -> ValueWithPredicate:
        check_key(partition, key)
        with self._using() as conn, self._errors():
            row = conn.execute(_GET, (partition, key)).fetchone()
        if row is None:
            raise NotFound(f"key {key!r} not found")
        value = bytes(row[0])
        return ValueWithPredicate(value, Predicate(value))

    def get_many(self, partition: bytes, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        for key in keys:
            check_key(partition, key)
        found: dict[bytes, bytes] = {}
        # Within SQLite's 999 parameters a statement, one of them the partition.
        for start in range(0, len(keys), _MAX_ROWS_PER_INSERT * 4):
            some = [bytes(key) for key in keys[start : start + _MAX_ROWS_PER_INSERT * 4]]
            marks = ", ".join("?" * len(some))
            with self._using() as conn, self._errors():
                rows = conn.execute(
                    f"SELECT key, value FROM kv WHERE partition_key = ? AND key IN ({marks}) AND tombstone = 0",
                    (partition, *some),
                ).fetchall()
            found.update((bytes(key), bytes(value)) for key, value in rows)
        return found

    def set(self, partition: bytes, key: bytes, value: bytes) -> None:
        check_key(partition, key)
        check_value(value)
        with self._using() as conn, self._errors():
            conn.execute(_SET, (partition, key, value))

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Predicate | None) -> None:
        check_key(partition, key)
        check_value(value)
        with self._using() as conn, self._errors():
            if predicate is None:
                changed = conn.execute(_INSERT_IF_ABSENT, (partition, key, value)).rowcount
            else:
                changed = conn.execute(_UPDATE_IF, (value, partition, key, bytes(predicate))).rowcount
        if changed != 1:
            reason = "exists already" if predicate is None else "changed since it was read"
            raise PredicateFailed(f"key {key!r} {reason}")

    def delete(self, partition: bytes, key: bytes) -> None:
        check_key(partition, key)
        with self._using() as conn, self._errors():
            conn.execute(_DELETE, (partition, key))

    def apply_checked(self, batch: CheckedBatch) -> None:
        with self._using() as conn:
            self._apply_on(conn, batch)

    def _apply_on(self, conn: sqlite3.Connection, batch: CheckedBatch) -> None:
        partition, puts, deletes, conditions, timestamp = batch
        if not conditions and not deletes and len(puts) <= _MAX_ROWS_PER_INSERT and not isinstance(timestamp, tuple):
            # The common case (a value and its journal row): one multi-row statement, which in
            # autocommit mode is its own transaction, costs a third of an explicit one.
            with self._errors():
                conn.execute(*_upsert_rows(partition, puts, timestamp))
            return
        with self._errors():
            # IMMEDIATE takes the write lock up front, so the condition read and the writes
            # are one serialised step; readers in WAL mode see the transaction whole or not at all.
            conn.execute("BEGIN IMMEDIATE")
            try:
                for condition in conditions:
                    self._check_condition(conn, partition, condition)
                if puts and timestamp is None:
                    conn.executemany(_SET, [(partition, key, value) for key, value in puts])
                elif puts:
                    rows = [(partition, key, value, batch.stamp_of(i)) for i, (key, value) in enumerate(puts)]
                    conn.executemany(_SET_AT, rows)
                if deletes and timestamp is None:
                    conn.executemany(_DELETE, [(partition, key) for key in deletes])
                elif deletes:
                    conn.executemany(_DELETE_AT, [(partition, key, timestamp) for key in deletes])
                conn.execute("COMMIT")
            except BaseException:
                # Some errors (a full disk, an I/O error) end the transaction themselves.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        if deletes and timestamp is not None:
            self._purge_old_tombstones(conn)

    def _purge_old_tombstones(self, conn: sqlite3.Connection) -> None:
        """Delete the tombstones older than the grace, at most once per _PURGE_EVERY_S (an
        index range scan: tombstones alone are indexed)."""
        now = time.monotonic()
        if now - self._purged_at < _PURGE_EVERY_S:
            return
        self._purged_at = now
        with self._errors():
            conn.execute(_PURGE, (time.time_ns() // 1000 - _TOMBSTONE_GRACE_US,))

    @staticmethod
    def _check_condition(conn: sqlite3.Connection, partition: bytes, condition: Condition) -> None:
        key, predicate = condition
        row = conn.execute(_GET, (partition, key)).fetchone()
        if predicate is None and row is not None:
            raise PredicateFailed(f"key {key!r} exists already")
        if predicate is not None and (row is None or bytes(row[0]) != bytes(predicate)):
            raise PredicateFailed(f"key {key!r} changed since it was read")

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        return entries_of(self.scan_chunks(partition, start, self._config.scan_page_size))

    def scan_chunks(self, partition: bytes, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[Sequence[Pair]]:
        check_key(partition, b"-")
        page_size = chunk_size(size)
        # Each page is its own short read so a slow consumer never pins a WAL snapshot.
        query, cursor = _SCAN_FIRST, bytes(start)
        while True:
            with self._using() as conn, self._errors():
                rows = conn.execute(query, (partition, cursor, page_size)).fetchall()
            if rows:
                yield rows  # (key, value) tuples of bytes: the columns are BLOBs
            if len(rows) < page_size:
                return
            query, cursor = _SCAN_NEXT, bytes(rows[-1][0])

    def close(self) -> None:
        with self._connections_lock:
            self._closed = True
            # A statement waits for a lock at most the busy timeout: past that and a margin,
            # the connections are left to be closed when their threads drop them.
            done = self._idle.wait_for(lambda: not self._in_use, self._config.busy_timeout_ms / 1000 + 5)
            connections, self._connections = self._connections, []
        self._local = threading.local()
        if not done:
            log.warning(
                "local KV %s: closed with statements still running; their connections are left open", self._path
            )
            return
        for conn in connections:
            conn.close()


def _upsert_rows(
    partition: bytes, puts: Sequence[tuple[bytes, bytes]], timestamp: int | None
) -> tuple[str, list[object]]:
    """One INSERT of every row, replacing existing ones as _SET (or, timestamped, _SET_AT) does."""
    params: list[object] = []
    for key, value in puts:
        params += [partition, key, value, timestamp or 0]
    return _upsert_sql(len(puts), timestamp is not None), params


@functools.cache
def _upsert_sql(rows: int, timestamped: bool) -> str:
    values = ", ".join(["(?, ?, ?, ?)"] * rows)
    sql = f"INSERT INTO kv (partition_key, key, value, ts) VALUES {values} ON CONFLICT (partition_key, key) DO UPDATE "
    if timestamped:
        return sql + f"SET value = excluded.value, ts = excluded.ts, tombstone = 0 WHERE {_WINS}"
    return sql + "SET value = excluded.value, ts = 0, tombstone = 0"


def _not_attempted(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (or an extended code of either: the primary code is its low
    byte): the statement, or the transaction rolled back, wrote nothing."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _is_lock_contention(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class _SqliteErrors:
    """Turns sqlite3 exceptions into Silt's typed errors."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or not isinstance(exc, sqlite3.Error):
            return
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in str(exc):
            raise NotApplied("local KV: store is closed") from None
        # The database busy or locked past the busy timeout: the statement (or the transaction,
        # rolled back) wrote nothing.
        error = NotApplied if _not_attempted(exc) else Unavailable
        raise error(f"local KV {self._path}: {exc}") from None


register_driver("local", LocalStore.from_config)
