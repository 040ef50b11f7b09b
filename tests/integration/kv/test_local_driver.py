"""The embedded `local` driver: one SQLite file shared by several processes, durable across restarts."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.errors import NotApplied, PredicateFailed, Unavailable
from silt.kv import local, open_store


def config_for(path: Path) -> DatabaseConfig:
    return DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(path)))


def _writer(path: str, worker: int, count: int) -> None:
    store = open_store(config_for(Path(path)))
    for i in range(count):
        store.set(b"shared", f"w{worker}/{i:05d}".encode(), str(os.getpid()).encode())
    store.close()


def _incrementer(path: str, rounds: int) -> None:
    # An optimistic counter: get, then set_if; PredicateFailed means another process won.
    store = open_store(config_for(Path(path)))
    done = 0
    while done < rounds:
        current = store.get(b"shared", b"counter")
        try:
            store.set_if(b"shared", b"counter", str(int(current.value) + 1).encode(), current.predicate)
            done += 1
        except PredicateFailed:
            continue
    store.close()


def test_several_processes_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "kv.db"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 500)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = open_store(config_for(path))
    keys = [e.key for e in store.scan(b"shared")]
    assert len(keys) == 2000
    assert keys == sorted(keys)
    store.close()


def test_set_if_is_atomic_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "kv.db"
    store = open_store(config_for(path))
    store.set(b"shared", b"counter", b"0")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_incrementer, args=(str(path), 200)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    # No increment lost: every successful set_if saw the value the previous one wrote.
    assert store.get(b"shared", b"counter").value == b"800"
    store.close()


def test_data_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "kv.db"
    store = open_store(config_for(path))
    store.set(b"p", b"k", b"durable")
    store.close()
    reopened = open_store(config_for(path))
    assert reopened.get(b"p", b"k").value == b"durable"
    reopened.close()


def test_closed_store_raises_unavailable(tmp_path: Path) -> None:
    store = open_store(config_for(tmp_path / "kv.db"))
    store.close()
    with pytest.raises(Unavailable):
        store.get(b"p", b"k")


def test_unusable_path_raises_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(Unavailable, match="cannot create directory"):
        open_store(config_for(blocker / "sub" / "kv.db"))
    with pytest.raises(Unavailable, match="local KV"):
        open_store(config_for(tmp_path))  # a directory is not a database file


def test_opening_waits_for_a_writer_on_a_fresh_file(tmp_path: Path) -> None:
    # Another process is creating the file (a rollback-journal write in progress): switching
    # to WAL then fails at once with "database is locked", without the busy timeout; the
    # driver must retry instead of failing the service that opens the file second.
    path = tmp_path / "kv.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO other VALUES (1)")
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    store = open_store(config_for(path))
    assert time.monotonic() - started >= 0.25
    store.set(b"p", b"k", b"v")
    assert store.get(b"p", b"k").value == b"v"
    store.close()
    release.join()
    holder.close()


def test_tombstones_older_than_the_grace_are_purged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timestamped delete leaves a tombstone row, kept while a late write could still arrive
    and purged once older than the grace; files made before tombstones existed gain the column."""
    path = tmp_path / "kv.db"
    with sqlite3.connect(path) as old:
        old.execute(
            "CREATE TABLE kv (partition_key BLOB NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL, "
            "ts INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (partition_key, key)) WITHOUT ROWID"
        )
    old.close()
    monkeypatch.setattr(local, "_PURGE_EVERY_S", 0.0)
    store = open_store(config_for(path))
    now = time.time_ns() // 1000
    store.apply(b"p", [], [b"old"], timestamp=now - local._TOMBSTONE_GRACE_US - 1_000_000)
    store.apply(b"p", [], [b"recent"], timestamp=now)
    store.close()
    with sqlite3.connect(path) as raw:
        left = sorted(bytes(row[0]) for row in raw.execute("SELECT key FROM kv WHERE tombstone = 1"))
    raw.close()
    assert left == [b"recent"]


def test_a_database_locked_past_the_busy_timeout_is_not_applied(tmp_path: Path) -> None:
    """Busy past the timeout, SQLite wrote nothing: NotApplied, which a caller may take as
    certain (any other Unavailable may have applied); a closed store likewise."""
    path = tmp_path / "kv.db"
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(path), busy_timeout_ms=50)))
    store.set(b"p", b"k", b"before")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(NotApplied):
            store.apply(b"p", [(b"k", b"during")], [b"other"])
        with pytest.raises(NotApplied):
            store.set(b"p", b"k", b"during")
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    assert store.get(b"p", b"k").value == b"before"
    store.close()
    with pytest.raises(NotApplied):
        store.get(b"p", b"k")
