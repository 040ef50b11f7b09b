"""The local adapter's durability under group sync: no acknowledged put is lost at a power cut
(modelled: tests/integration/block/page_cache.py) or a kill -9 (real), a failed sync
acknowledges none of its batch, and every wait is bounded."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from silt.block.groupsync import GroupSync, libc_syncfs
from silt.block.local import LocalAdapter
from silt.errors import NotFound, Unavailable
from tests.integration.block.page_cache import PageCache
from tests.support.wait import wait_until

SIZE = 4096
WORKTREE = Path(__file__).resolve().parents[3]


def body_of(namespace: str, key: str) -> bytes:
    seed = hashlib.sha256(f"{namespace} {key}".encode()).digest()
    return (seed * (SIZE // len(seed) + 1))[:SIZE]


def _syncer(kind: str, cache: PageCache) -> GroupSync:
    if kind == "syncfs batches":
        return GroupSync(fsync=cache.fsync, syncfs=cache.syncfs)
    if kind == "fsync batches":
        return GroupSync(fsync=cache.fsync)
    return GroupSync(batching=False, fsync=cache.fsync)


def _relpath(namespace: str, key: str) -> str:
    return namespace.removeprefix("local://") + "/" + key


def _put_many(
    adapter: LocalAdapter, count: int, acked: dict[str, bytes], acked_lock: threading.Lock, threads: int = 12
) -> list[BaseException]:
    """count puts (half of them put_if_absent), some into directories they create; records each
    acknowledged one; returns the errors."""
    errors: list[BaseException] = []

    def put(i: int) -> None:
        namespace = f"local://ns{i % 3}"
        key = f"d{i % 5}/sub{i % 7}/k{i:04d}"
        body = body_of(namespace, key)
        write = adapter.put if i % 2 else adapter.put_if_absent
        try:
            write(namespace, key, io.BytesIO(body), SIZE)
        except Exception as exc:
            errors.append(exc)
            return
        with acked_lock:
            acked[_relpath(namespace, key)] = body

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, range(count)))
    return errors


def _lost_and_torn(cache: PageCache, acked: dict[str, bytes], acked_lock: threading.Lock) -> tuple[set[str], set[str]]:
    """At a power cut right now: the acknowledged objects missing or wrong, and the objects left
    with bytes no put wrote (torn)."""
    with cache.lock:  # no sync completes meanwhile, so no put is acknowledged that the view misses
        with acked_lock:
            expected = dict(acked)
        view = cache.durable_view()
    lost = {path for path, body in expected.items() if view.get(path) != body}
    objects = {path: body for path, body in view.items() if not any(p.startswith(".silt-") for p in path.split("/"))}
    torn = {
        path
        for path, body in objects.items()
        if body != body_of("local://" + path.split("/", 1)[0], path.split("/", 1)[1])
    }
    return lost, torn


@pytest.mark.parametrize("kind", ["syncfs batches", "fsync batches", "each put alone"])
def test_acknowledged_puts_survive_a_power_cut(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    cache = PageCache(str(root))
    adapter = LocalAdapter(root, syncer=_syncer(kind, cache))
    acked: dict[str, bytes] = {}
    acked_lock = threading.Lock()
    cuts: list[tuple[int, set[str], set[str]]] = []

    def write() -> list[BaseException]:
        return _put_many(adapter, 240, acked, acked_lock)

    writer, errors = _start(write)
    # Cuts while puts are in flight, then one after the last.
    for threshold in (40, 120):

        def reached(threshold: int = threshold) -> bool:
            return len(acked) >= threshold or not writer.is_alive()

        wait_until(reached, 30, "puts to be acknowledged", interval=0.005)
        cuts.append((len(acked), *_lost_and_torn(cache, acked, acked_lock)))
    writer.join(60)
    assert not writer.is_alive()
    cuts.append((len(acked), *_lost_and_torn(cache, acked, acked_lock)))
    assert errors == [[]]
    assert [cut for cut in cuts if cut[1] or cut[2]] == []
    assert cuts[0][0] < 240  # one cut at least came while puts were in flight
    assert len(acked) == 240
    if kind == "syncfs batches":
        # Batches did form: fewer syncfs calls than puts (each put alone makes two fsyncs).
        assert cache.calls < 240
    adapter.close()


class _SkippingSyncer(GroupSync):
    """A broken policy, to show the model catches one: skips the directory or the file syncs."""

    def __init__(self, skip: str, cache: PageCache) -> None:
        super().__init__(batching=False, fsync=cache.fsync)
        self.skip = skip

    def sync_file(self, fd: int, what: str) -> None:
        if self.skip != "file":
            super().sync_file(fd, what)

    def sync_directories(self, paths: object, what: str) -> None:
        if self.skip != "directory":
            super().sync_directories(paths, what)  # type: ignore[arg-type]


@pytest.mark.parametrize("skip", ["directory", "file"])
def test_the_model_catches_a_put_acknowledged_too_early(tmp_path: Path, skip: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    cache = PageCache(str(root))
    adapter = LocalAdapter(root, syncer=_SkippingSyncer(skip, cache))
    acked: dict[str, bytes] = {}
    lock = threading.Lock()
    assert _put_many(adapter, 20, acked, lock, threads=4) == []
    lost, torn = _lost_and_torn(cache, acked, lock)
    assert lost
    if skip == "file":
        assert torn  # renames made durable over bytes that were not: empty objects


class _GatedSyncfs:
    """The page cache's syncfs, whose first call waits for `gate` and whose calls numbered in
    `failing` fail."""

    def __init__(self, cache: PageCache, failing: set[int]) -> None:
        self.cache = cache
        self.failing = failing
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        number = self.calls
        if number == 1:
            self.entered.set()
            assert self.gate.wait(30)
        if number in self.failing:
            raise OSError(5, "Input/output error")
        self.cache.syncfs(fd)


def _start(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    result: list[object] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def test_a_failed_sync_fails_every_put_of_its_batch(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "ns" / "d").mkdir(parents=True)
    cache = PageCache(str(root))
    syncfs = _GatedSyncfs(cache, failing={2})
    syncer = GroupSync(fsync=cache.fsync, syncfs=syncfs)
    adapter = LocalAdapter(root, syncer=syncer)

    def put(key: str) -> Callable[[], object]:
        return lambda: adapter.put("local://ns", key, io.BytesIO(body_of("local://ns", key)), SIZE)

    first, first_result = _start(put("d/first"))
    assert syncfs.entered.wait(10)
    # Five puts queue behind the running batch: they make the next one, whose syncfs fails.
    queued = [_start(put(f"d/queued-{i}")) for i in range(5)]
    wait_until(lambda: syncer.queued >= 5, 10, "five puts to queue")
    syncfs.gate.set()
    for thread, _ in [(first, first_result), *queued]:
        thread.join(10)
    for _, result in queued:
        assert isinstance(result[0], Unavailable), result
        assert "fsync failed" in str(result[0])
    # Their bytes were never published: the rename waits for the bytes' sync.
    for i in range(5):
        with pytest.raises(NotFound):
            adapter.stat("local://ns", f"d/queued-{i}")
    # The syncer is not wedged: the next put is acknowledged and survives a cut.
    put("d/after")()
    assert cache.durable_view()["ns/d/after"] == body_of("local://ns", "d/after")
    adapter.close()


def test_waits_are_bounded_and_close_waits_for_the_running_batch(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "ns").mkdir(parents=True)
    cache = PageCache(str(root))
    syncfs = _GatedSyncfs(cache, failing=set())
    syncer = GroupSync(fsync=cache.fsync, syncfs=syncfs, wait_seconds=0.2)
    adapter = LocalAdapter(root, syncer=syncer)
    leader, leader_result = _start(lambda: adapter.put("local://ns", "a", io.BytesIO(b"a"), 1))
    assert syncfs.entered.wait(10)
    started = time.monotonic()
    with pytest.raises(Unavailable, match="did not finish"):
        adapter.put("local://ns", "b", io.BytesIO(b"b"), 1)
    assert time.monotonic() - started < 5
    with pytest.raises(Unavailable, match="still running"):
        syncer.close(timeout=0.05)
    syncfs.gate.set()
    leader.join(10)
    # Closed while its bytes were being synced: the put is refused its rename's sync, never
    # acknowledged.
    assert isinstance(leader_result[0], Unavailable) and "closed" in str(leader_result[0]), leader_result
    adapter.close()
    with pytest.raises(Unavailable, match="closed"):
        adapter.put("local://ns", "c", io.BytesIO(b"c"), 1)
    with pytest.raises(NotFound):
        adapter.stat("local://ns", "c")  # refused its bytes' sync: never published
    assert adapter.get("local://ns", "a").read() == b"a"  # reads still work


_WRITER = """
import io, sys, threading
from concurrent.futures import ThreadPoolExecutor
from silt.block.local import LocalAdapter
from tests.integration.block.test_local_group_sync import SIZE, body_of

adapter = LocalAdapter(sys.argv[1], sync="group_syncfs")
lock = threading.Lock()

def put(i):
    key = f"d{i % 4}/k{i:06d}"
    adapter.put("local://ns", key, io.BytesIO(body_of("local://ns", key)), SIZE)
    with lock:
        sys.stdout.write(key + "\\n")
        sys.stdout.flush()

with ThreadPoolExecutor(8) as pool:
    list(pool.map(put, range(1_000_000)))
"""


def test_every_put_acknowledged_before_a_kill_reads_back_whole(tmp_path: Path) -> None:
    root = tmp_path / "root"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root)], cwd=WORKTREE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdout is not None
    acked: list[str] = []
    stdout = child.stdout

    def read() -> None:
        for line in stdout:
            acked.append(line.decode())

    reader, _ = _start(read)
    try:
        wait_until(lambda: len(acked) >= 200 or child.poll() is not None, 20, "the writer's first acknowledged puts")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        reader.join(10)
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
    keys = [line[:-1] for line in acked if line.endswith("\n")]
    assert len(keys) >= 200
    adapter = LocalAdapter(root)
    for key in keys:
        assert adapter.get("local://ns", key).read() == body_of("local://ns", key), key
    # Whatever the kill interrupted left at most temporary files, never a torn object.
    for directory, _, files in os.walk(root / "ns"):
        for name in files:
            if not name.startswith(".silt-"):
                key = os.path.relpath(os.path.join(directory, name), root / "ns")
                assert adapter.get("local://ns", key).read() == body_of("local://ns", key), key
    if child.stderr:
        child.stderr.close()


def test_the_sync_setting_picks_the_policy_and_syncfs_only_where_linux_reports_its_errors(tmp_path: Path) -> None:
    found = libc_syncfs()
    if sys.platform == "linux":
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
        assert (found is not None) == ((major, minor) >= (5, 8))
    else:
        assert found is None
    assert not LocalAdapter(tmp_path / "a")._syncer.batching
    assert LocalAdapter(tmp_path / "b", sync="group_fsync")._syncer.batching
    grouped = LocalAdapter(tmp_path / "c", sync="group_syncfs")._syncer
    assert grouped.batching and (grouped._syncfs is not None) == (found is not None)
