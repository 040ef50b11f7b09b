"""Work that runs beside a large write on helper threads: the MD5 of its bytes, and the
flush of its pages to disk.

One MD5 is sequential, and at ~470 MiB/s on this project's machines it is slower than
writing to the page cache or receiving on loopback; and the fsync that makes an object
durable before it is published waits for every page written. Done in the writer's thread,
an upload costs the sum of writing, hashing and flushing. hashlib and fdatasync release the
GIL, so here a chunk is hashed on another core while the writer writes it and reads the
next, and the pages written so far go to disk while later ones are still being written,
leaving the final fsync little to do.

Each helper has at most one task in flight: an upload never queues more than one chunk, and
a digest is never updated by two threads at once. Hashing and flushing have pools of their
own, so a slow disk delays no upload's hashing. A flush works on its own duplicate of the
file descriptor, closed when the flush ends, so however long it runs, it can never touch
another file that reuses the descriptor's number.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from silt.errors import Unavailable

# Below this a hand-off to the pool costs more than hashing in the caller's thread.
INLINE_HASH_BYTES = 256 * 1024
# Pages are sent to disk after this many bytes are written since the last flush began.
FLUSH_EVERY_BYTES = 16 * 1024 * 1024
# Hashing a queued chunk takes milliseconds of CPU per upload ahead of it; a flush that is
# already running writes at most the file's dirty pages. A wait this long means the pool or
# the disk is wedged, which must fail the upload rather than hold its thread.
WAIT_SECONDS = 60.0
# Flushes mostly wait on the disk, so more of them than cores can usefully run at once.
_FLUSH_WORKERS = 4

_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(kind: str) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(kind)
        if pool is None:
            workers = (os.cpu_count() or 2) if kind == "hash" else _FLUSH_WORKERS
            pool = _pools[kind] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"silt-{kind}")
        return pool


def _forget_pools_after_fork() -> None:
    # A forked child has none of the parent's threads: its pools would never run a task.
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _submit(kind: str, fn: Callable[..., Any], *args: Any) -> Future[Any] | None:
    """fn(*args) on kind's pool; None when the pools are shut down (the interpreter is exiting)."""
    try:
        return _pool(kind).submit(fn, *args)
    except RuntimeError:
        return None


def _wait(pending: Future[Any], what: str) -> None:
    try:
        pending.result(timeout=WAIT_SECONDS)
    except FutureTimeout:
        pending.cancel()
        raise Unavailable(f"local blockstore: {what} took over {WAIT_SECONDS:.0f} s") from None


class BackgroundMD5:
    """hashlib.md5's update/digest, with large chunks hashed off the caller's thread."""

    def __init__(self) -> None:
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._pending: Future[None] | None = None
        self._failed: Unavailable | None = None

    def update(self, chunk: bytes | bytearray | memoryview) -> None:
        self._finish_pending()
        # Only bytes are immutable: a buffer the caller may refill is hashed before returning.
        pending = None
        if len(chunk) >= INLINE_HASH_BYTES and type(chunk) is bytes:
            pending = _submit("hash", self._md5.update, chunk)
        if pending is None:
            self._md5.update(chunk)
        self._pending = pending

    def digest(self) -> bytes:
        self._finish_pending()
        return self._md5.digest()

    def hexdigest(self) -> str:
        return self.digest().hex()

    def _finish_pending(self) -> None:
        if self._failed is not None:
            # A chunk whose hashing timed out may still be applied later: the digest is lost.
            raise self._failed
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            _wait(pending, "hashing an upload's bytes")
        except Unavailable as exc:
            self._failed = exc
            raise


def _flush(fd: int) -> None:
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


class EarlyFlush:
    """fdatasync of an open file in the background every FLUSH_EVERY_BYTES written to it.

    Use as a context manager around the writes, inside the file's lifetime. finish (and
    leaving without an error) cancels a flush that has not started — the fsync before
    publishing covers its pages — and waits for one that has, raising its error: once the
    kernel has reported a write-back error to one fdatasync, a later fsync of the same file
    may not report it again.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._unflushed = 0
        self._pending: Future[None] | None = None

    def __enter__(self) -> EarlyFlush:
        return self

    def wrote(self, count: int) -> None:
        self._unflushed += count
        if self._unflushed < FLUSH_EVERY_BYTES:
            return
        if self._pending is not None:
            if not self._pending.done():
                return  # the disk is behind: the next call starts the next flush
            self.finish()
        duplicate = os.dup(self._fd)
        pending = _submit("flush", _flush, duplicate)
        if pending is None:
            os.close(duplicate)
            return

        def close_if_cancelled(done: Future[None]) -> None:
            # A flush cancelled before it ran still owns its descriptor.
            if done.cancelled():
                os.close(duplicate)

        pending.add_done_callback(close_if_cancelled)
        self._unflushed = 0
        self._pending = pending

    def finish(self) -> None:
        """Drop a flush not yet started; wait for one under way, raising its OSError."""
        pending, self._pending = self._pending, None
        if pending is None or pending.cancel():
            return
        _wait(pending, "flushing an upload to disk")

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.finish()
            return
        # The write failed and its file is discarded: the flush's outcome is moot, and the
        # flush holds its own descriptor, so nothing needs to wait for it.
        pending, self._pending = self._pending, None
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.cancel()
