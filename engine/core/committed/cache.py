"""Local caches for committed objects: decoded objects in memory, fetched files on disk.

Ranges and metaranges are immutable and named by content, so an entry never goes stale
and needs no invalidation. Entries are keyed by kind, storage namespace and id: an id is
only a name that a repository's commits (or a restored dump) give, not proof that the
object is in that repository's namespace, so a cache shared by repositories must never
answer one repository's read with an object another repository stored. Both caches are
bounded by bytes and evict the least recently used entries. Both are safe to share between
threads and managers.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import BinaryIO

from silt.block.adapter import CHUNK_SIZE

CacheKey = tuple[str, str]  # (kind, name): see cache_key


def cache_key(kind: str, namespace: str, object_id: str) -> CacheKey:
    """The key of an object of a namespace: the namespace as a digest keeps the disk cache's
    file names short and free of the namespace's own characters."""
    return kind, f"{_scope(namespace)}-{object_id}"


@functools.lru_cache(maxsize=1024)
def _scope(namespace: str) -> str:
    # Every object read asks: a log filtered by path reads two metaranges per commit.
    return hashlib.sha256(namespace.encode()).hexdigest()[:32]


DEFAULT_MEMORY_BYTES = 256 * 1024 * 1024
DEFAULT_DISK_BYTES = 4 * 1024 * 1024 * 1024


class MemoryCache:
    """LRU of decoded objects, bounded by their estimated in-memory size."""

    def __init__(self, max_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        self._max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: CacheKey) -> object | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: CacheKey, value: object, size: int) -> None:
        if size > self._max_bytes:
            return  # would evict everything else and still not fit
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self._max_bytes:
                _, (_, evicted_size) = self._entries.popitem(last=False)
                self._bytes -= evicted_size

    @property
    def size(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)


class DiskCache:
    """Files fetched from a remote store, as ``<directory>/<kind>/<id>``, bounded by total size.

    Files are written to a temporary name and renamed into place, so a reader never sees a
    partial file; a reader that opened a file before it was evicted keeps reading it (POSIX
    unlink semantics). Survives restarts: existing files are adopted at start, oldest first.
    One process owns a directory.
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int = DEFAULT_DISK_BYTES) -> None:
        self._directory = Path(directory)
        self._directory.mkdir(parents=True, exist_ok=True)
        self._max_bytes = max_bytes
        self._entries: OrderedDict[CacheKey, int] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._adopt_existing()

    def _path(self, key: CacheKey) -> Path:
        kind, object_id = key
        return self._directory / kind / object_id

    def _adopt_existing(self) -> None:
        found: list[tuple[float, CacheKey, int]] = []
        for path in self._directory.glob("*/*"):
            if path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)  # left by a crash mid-download
                continue
            stat = path.stat()
            found.append((stat.st_mtime, (path.parent.name, path.name), stat.st_size))
        for _, key, size in sorted(found):
            self._entries[key] = size
            self._bytes += size
        with self._lock:
            self._evict_locked()

    def open(self, key: CacheKey) -> BinaryIO | None:
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            try:
                return open(self._path(key), "rb")
            except FileNotFoundError:
                # Removed behind our back (someone cleaned the directory): forget it.
                self._bytes -= self._entries.pop(key)
                return None

    def store(self, key: CacheKey, stream: BinaryIO) -> BinaryIO:
        """Copy ``stream`` into the cache and return the cached file opened for reading."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        reader: BinaryIO | None = None
        try:
            with os.fdopen(handle, "wb") as target:
                shutil.copyfileobj(stream, target, CHUNK_SIZE)
            # Opened before the rename: an eviction racing with us cannot take it from the caller.
            reader = open(temporary, "rb")  # noqa: SIM115 - the caller closes it
            os.replace(temporary, path)
        except BaseException:
            if reader is not None:
                reader.close()
            Path(temporary).unlink(missing_ok=True)
            raise
        size = os.fstat(reader.fileno()).st_size
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous
            self._entries[key] = size
            self._bytes += size
            self._evict_locked()
        return reader

    def discard(self, key: CacheKey) -> None:
        """Forget an entry and remove its file: for a copy found unusable (a damaged index)."""
        with self._lock:
            size = self._entries.pop(key, None)
            if size is None:
                return
            self._bytes -= size
            self._path(key).unlink(missing_ok=True)

    def _evict_locked(self) -> None:
        # The newest entry always stays, even alone over the bound: a caller is about to read it.
        while self._bytes > self._max_bytes and len(self._entries) > 1:
            oldest, size = self._entries.popitem(last=False)
            self._bytes -= size
            self._path(oldest).unlink(missing_ok=True)

    @property
    def size(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)


class CommittedCache:
    """The caches one process keeps for committed objects; share one instance between managers."""

    def __init__(
        self,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        disk_directory: str | os.PathLike[str] | None = None,
        disk_bytes: int = DEFAULT_DISK_BYTES,
    ) -> None:
        self.memory = MemoryCache(memory_bytes)
        self.disk = DiskCache(disk_directory, disk_bytes) if disk_directory is not None else None
