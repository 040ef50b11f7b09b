"""Group commit for the local blockstore: concurrent puts share the syncs that make them durable.

A put is durable once its bytes are on disk and then its rename is (the order matters: a rename
that reached the disk before the bytes could publish a torn object after a crash). Alone, each
put pays an fsync of its file and one of its directory. Here a put hands each of the two steps
to a batch and waits: the first waiter that finds no batch running leads one (leader/follower),
taking every step queued so far, and syncs them together — on Linux with one syncfs(2) per file
system, which writes every file's dirty pages and commits every rename made before it, however
many the batch holds; elsewhere with one fsync per file and per distinct directory. Steps queued
while a batch runs go to the next one, so no step is reported durable by a sync that began
before it was queued.

No thread of its own: batches run on the threads of the waiting callers, so nothing outlives
the adapter and nothing is left to join; close() waits (bounded) for a batch in progress and
refuses new steps. Every wait is bounded; a failed sync fails every waiter of its batch with
Unavailable (the kernel may already have dropped the pages it could not write, so no retry could
make them durable); a waiter that gives up is never reported durable either. The sync calls
themselves are system calls, unbounded as an fsync always was: a waiter stops waiting for one
after WAIT_SECONDS, the caller that runs it cannot.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Literal

from silt.errors import Unavailable

# An fsync that has not returned after this long means the disk is wedged; the puts waiting on
# it fail instead of holding their threads.
WAIT_SECONDS = 60.0


class _Waiter:
    """One caller's steps, and how it learns that they are done or that it is to lead a batch."""

    __slots__ = ("dirs", "done", "error", "fds", "promoted", "wake")

    def __init__(self, fds: list[int], dirs: list[str]) -> None:
        self.fds = fds
        self.dirs = dirs
        self.done = False
        self.promoted = False
        self.error: str | None = None
        # Held until the waiter is woken: cheaper than an Event, and wakes only this thread.
        self.wake = threading.Lock()
        self.wake.acquire()


def _fsync_directory(path: str, fsync: Callable[[int], None]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def libc_syncfs() -> Callable[[int], None] | None:
    """Linux's syncfs(2) through ctypes (the os module has no wrapper), or None where it is
    missing or untrusted: before Linux 5.8 syncfs returned success even when pages could not be
    written, which would acknowledge puts that are not on disk."""
    if sys.platform != "linux":
        return None
    release = re.match(r"(\d+)\.(\d+)", platform.release())
    if release is None or (int(release[1]), int(release[2])) < (5, 8):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int]
    call.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        # A CDLL call releases the GIL while the kernel writes, as os.fsync does.
        if call(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return syncfs


SyncMode = Literal["fsync", "group_fsync", "group_syncfs"]


def default_syncer(mode: SyncMode = "fsync") -> GroupSync:
    """The policy of blockstore.local.sync. Each put syncing on its own is the default because
    on ext4 it measured as fast as any batching (docs/benchmarks.md): the journal already merges
    the commits of concurrent fsyncs. Batches of fsyncs run one after another by the leader were
    slower; one syncfs per batch was faster only while fsyncs were contended, and far slower
    while another program had unsynced writes on the same file system, which syncfs waits for."""
    if mode == "fsync":
        return GroupSync(batching=False)
    if mode == "group_syncfs":
        syncfs = libc_syncfs()
        if syncfs is not None:
            return GroupSync(syncfs=syncfs)
    return GroupSync()


class GroupSync:
    """Makes files and directory entries durable, sharing the syncs between concurrent callers.

    With `batching` off, each caller syncs its own steps with fsync, concurrently with the others
    (the file system's journal may still merge their commits). With it on, batches sync with
    `syncfs` when given (one call per file system) or else with one `fsync` per file and per
    distinct directory. `fsync` and `syncfs` are the calls that make one file or directory, or
    a whole file system, durable; tests pass fault-injecting ones. default_syncer() picks.
    """

    def __init__(
        self,
        *,
        batching: bool = True,
        fsync: Callable[[int], None] = os.fsync,
        syncfs: Callable[[int], None] | None = None,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self.batching = batching
        self._fsync = fsync
        self._syncfs = syncfs
        self._wait_seconds = wait_seconds
        self._lock = threading.Lock()
        self._pending: list[_Waiter] = []
        self._leading = False
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False

    def sync_file(self, fd: int, what: str) -> None:
        """Return once an fsync of fd that began after this call has succeeded."""
        self._sync([fd], [], what)

    def sync_directories(self, paths: Iterable[str], what: str) -> None:
        """Return once an fsync of each directory that began after this call has succeeded, so
        that every rename, link and unlink made in them before the call is durable."""
        self._sync([], list(paths), what)

    @property
    def queued(self) -> int:
        """Callers waiting for the next batch."""
        with self._lock:
            return len(self._pending)

    def close(self, timeout: float | None = None) -> None:
        """Refuse new steps; wait (bounded) for a batch in progress to finish."""
        with self._lock:
            self._closed = True
        if not self._idle.wait(self._wait_seconds if timeout is None else timeout):
            raise Unavailable("local blockstore: an fsync batch was still running at close")

    def _sync(self, fds: list[int], dirs: list[str], what: str) -> None:
        if self._closed:
            # Not NotApplied: refused a rename's sync, a put has already made its object visible.
            raise Unavailable(f"local blockstore: {what}: the blockstore is closed")
        if not self.batching:
            try:
                for fd in fds:
                    self._fsync(fd)
                for path in dirs:
                    _fsync_directory(path, self._fsync)
            except OSError as exc:
                raise Unavailable(f"local blockstore: {what}: fsync failed: {exc.strerror or exc}") from None
            return
        # The batch's fsync may still run after a waiter gives up and its caller closes fd:
        # a duplicate keeps the descriptor's number from naming another file meanwhile.
        try:
            owned = [os.dup(fd) for fd in fds]
        except OSError as exc:
            raise Unavailable(f"local blockstore: {what}: {exc.strerror or exc}") from None
        waiter = _Waiter(owned, dirs)
        with self._lock:
            self._pending.append(waiter)
            lead = not self._leading
            if lead:
                self._leading = True
                self._idle.clear()
        if not lead and not waiter.wake.acquire(timeout=self._wait_seconds):
            with self._lock:
                if waiter.done:
                    pass  # finished as the wait ran out
                elif waiter.promoted:
                    lead = True  # the wait ran out as the lead was handed over: take it
                else:
                    if waiter in self._pending:  # otherwise its batch is running and closes its fds
                        self._pending.remove(waiter)
                        self._close_fds(waiter)
                    raise Unavailable(f"local blockstore: {what}: fsync did not finish in {self._wait_seconds:.0f} s")
        if lead or (waiter.promoted and not waiter.done):
            self._lead()
        if waiter.error is not None:
            raise Unavailable(f"local blockstore: {what}: fsync failed: {waiter.error}")

    def _lead(self) -> None:
        """Run one batch of every step queued so far (the caller's among them), then hand the
        lead to the first step queued meanwhile, or give it up."""
        with self._lock:
            batch, self._pending = self._pending, []
        error: str | None = None
        try:
            fds = [fd for waiter in batch for fd in waiter.fds]
            dirs = list(dict.fromkeys(path for waiter in batch for path in waiter.dirs))
            self._run(fds, dirs)
        except OSError as exc:
            error = str(exc.strerror or exc)
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            for waiter in batch:
                self._close_fds(waiter)
            with self._lock:
                for waiter in batch:
                    waiter.error = error
                    waiter.done = True
                    if waiter.wake.locked():
                        waiter.wake.release()
                if self._pending:
                    heir = self._pending[0]
                    heir.promoted = True
                    heir.wake.release()
                else:
                    self._leading = False
                    self._idle.set()

    def _run(self, fds: list[int], dirs: list[str]) -> None:
        if self._syncfs is None:
            for fd in fds:
                self._fsync(fd)
            for path in dirs:
                _fsync_directory(path, self._fsync)
            return
        # One syncfs per file system writes every file's dirty pages and commits every rename
        # made so far on it, however many files and directories the batch holds.
        synced: set[int] = set()
        for fd in fds:
            device = os.fstat(fd).st_dev
            if device not in synced:
                synced.add(device)
                self._syncfs(fd)
        for path in dirs:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                device = os.fstat(fd).st_dev
                if device not in synced:
                    synced.add(device)
                    self._syncfs(fd)
            finally:
                os.close(fd)

    @staticmethod
    def _close_fds(waiter: _Waiter) -> None:
        for fd in waiter.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        waiter.fds = []
