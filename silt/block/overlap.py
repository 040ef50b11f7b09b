"""Work that runs beside a large write on a helper thread: the MD5 of its bytes, and the
flush of its pages to disk.

One MD5 is sequential, and at ~470 MiB/s on this project's machines it is slower than
writing to the page cache or receiving on loopback; and the fsync that makes an object
durable before it is published waits for every page written. Done in the writer's thread,
an upload costs the sum of writing, hashing and flushing. hashlib and fdatasync release the
GIL, so here a chunk is hashed on another core while the writer writes it and reads the
next, and the pages written so far go to disk while later ones are still being written,
leaving the final fsync little to do. Each helper has at most one task in the pool at a
time: an upload never queues more than one chunk, and a digest is never updated by two
threads at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from silt.errors import Unavailable

# Below this a hand-off to the pool costs more than hashing in the caller's thread.
INLINE_HASH_BYTES = 256 * 1024
# Pages are sent to disk after this many bytes are written since the last flush began.
FLUSH_EVERY_BYTES = 16 * 1024 * 1024
# Hashing a chunk takes milliseconds and flushing 16 MiB well under a second on any disk
# fit for a blockstore; a wait this long means the disk or the pool is wedged, which must
# fail the upload rather than hold its thread.
WAIT_SECONDS = 60.0

_POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="silt-block")


def _wait(pending: Future[None] | None, what: str) -> None:
    if pending is None:
        return
    try:
        pending.result(timeout=WAIT_SECONDS)
    except FutureTimeout:
        raise Unavailable(f"{what} took over {WAIT_SECONDS:.0f} s") from None


class BackgroundMD5:
    """hashlib.md5's update/digest, with large chunks hashed off the caller's thread."""

    def __init__(self) -> None:
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._pending: Future[None] | None = None

    def update(self, chunk: bytes | bytearray | memoryview) -> None:
        self._finish_pending()
        # Only bytes are immutable: a buffer the caller may refill is hashed before returning.
        if len(chunk) < INLINE_HASH_BYTES or type(chunk) is not bytes:
            self._md5.update(chunk)
        else:
            self._pending = _POOL.submit(self._md5.update, chunk)

    def digest(self) -> bytes:
        self._finish_pending()
        return self._md5.digest()

    def hexdigest(self) -> str:
        return self.digest().hex()

    def _finish_pending(self) -> None:
        pending, self._pending = self._pending, None
        _wait(pending, "hashing an upload's bytes")


class EarlyFlush:
    """fdatasync of an open file in the background every FLUSH_EVERY_BYTES written to it.

    Use as a context manager around the writes, inside the file's lifetime: leaving it waits
    for a flush under way, so none outlives the descriptor, and raises the flush's error
    (once the kernel has reported a write-back error to one fdatasync, a later fsync of the
    same descriptor may not report it again).
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
        self._unflushed = 0
        self._pending = _POOL.submit(os.fdatasync, self._fd)

    def finish(self) -> None:
        """Wait for the flush under way, if any; its OSError is raised here."""
        pending, self._pending = self._pending, None
        _wait(pending, "flushing an upload to disk")

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            # The write failed and its file is discarded; the flush's own outcome is moot.
            with contextlib.suppress(Exception):
                self.finish()
