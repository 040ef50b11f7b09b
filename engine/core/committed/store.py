"""Reading and writing range and metarange objects through a block adapter and the caches.

Works with any ``BlockAdapter``. Objects of a remote store are spilled into the disk cache
when there is one, so the next process-local miss costs a file read instead of a request;
objects of the local adapter are already local files and are read directly. Without a disk
cache an object is buffered in memory, which the chunking byte cap keeps small.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import threading
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TypeVar, cast

from engine.core.committed.boundaries import IndexUnreadable, decode_index, encode_index, metarange_index_key
from engine.core.committed.cache import CommittedCache, DiskCache, cache_key
from engine.core.committed.metarange import MetaRange, decode_metarange, encode_metarange, metarange_id
from engine.core.committed.model import MetaRangeId, RangeId, RangeInfo, metarange_key, range_key
from engine.core.committed.ranges import RangeData, decode_range, encode_range, identity_in_file, range_id
from silt.block.adapter import BlockAdapter
from silt.errors import NotFound, SiltError

LOCAL_SCHEME = "local"


class NotInMemory(Exception):
    """A read asked to answer from the decoded objects in memory alone needed one that is not
    there: reading and decoding it is work its caller must not do where it is (an event loop)."""


RANGE = "range"
METARANGE = "metarange"
# A metarange decoded from its range-boundary index (boundaries.py): cached apart from those
# decoded from the metarange file, so that a read of the metarange itself still proves the
# file is there (a commit record naming a metarange is only accepted if it is).
INDEX = "index"
# One key's identity in a range, as read from the range file (identity_in_range).
IDENTITY = "identity"
_ANSWER_OVERHEAD = 250  # the cache key's strings and tuple, the answer's tuple

_log = logging.getLogger(__name__)


@dataclass
class CommittedStats:
    """Counters of object traffic, for tests and metrics; a snapshot is a plain copy."""

    range_reads: int = 0  # range files fetched from the block adapter
    range_memory_hits: int = 0
    range_disk_hits: int = 0
    metarange_reads: int = 0
    metarange_memory_hits: int = 0
    metarange_disk_hits: int = 0
    ranges_uploaded: int = 0
    metaranges_uploaded: int = 0
    uploads_skipped: int = 0  # the object existed already: content addressing made the write free
    index_reads: int = 0  # range-boundary indexes fetched from the block adapter
    index_memory_hits: int = 0
    index_disk_hits: int = 0
    indexes_uploaded: int = 0  # with their metarange, or later by a reader that found none
    indexes_missing: int = 0  # reads that found no index (a metarange older than indexes)
    indexes_refused: int = 0  # index files that did not decode to their metarange's rows
    identity_memory_hits: int = 0  # one key's identity in a range, answered from memory

    @property
    def range_loads(self) -> int:
        """Ranges decoded or taken from any cache: every range a caller needed, however served."""
        return self.range_reads + self.range_memory_hits + self.range_disk_hits


class _Sized(Protocol):
    @property
    def memory_size(self) -> int: ...


_Decoded = TypeVar("_Decoded", bound=_Sized)


class ObjectStore:
    def __init__(self, adapter: BlockAdapter, cache: CommittedCache) -> None:
        self._adapter = adapter
        self._cache = cache
        self._stats = CommittedStats()
        self._stats_lock = threading.Lock()
        self._spill_to: DiskCache | None = cache.disk if adapter.scheme != LOCAL_SCHEME else None

    def stats(self) -> CommittedStats:
        with self._stats_lock:
            return dataclasses.replace(self._stats)

    def _count(self, counter: str, amount: int = 1) -> None:
        with self._stats_lock:
            setattr(self._stats, counter, getattr(self._stats, counter) + amount)

    # --- writes -------------------------------------------------------------------------

    def write_range(
        self,
        namespace: str,
        keys: list[bytes],
        identities: list[bytes],
        values: list[bytes],
        estimated_bytes: int,
        known_ids: Container[str] = (),
    ) -> RangeInfo:
        """Store a range unless it exists; ``known_ids`` are ids the caller knows are stored."""
        new_id = range_id(keys, identities, values)
        if new_id not in known_ids and self._upload_if_absent(
            namespace, range_key(new_id), lambda: encode_range(keys, identities, values)
        ):
            self._count("ranges_uploaded")
        # Freshly committed ranges are the ones read next (reads of the new commit, the next apply).
        data = RangeData.of(keys, identities, values)
        self._cache.memory.put(cache_key(RANGE, namespace, new_id), data, data.memory_size)
        return RangeInfo(new_id, keys[0], keys[-1], len(keys), estimated_bytes)

    def write_metarange(self, namespace: str, ranges: list[RangeInfo]) -> MetaRangeId:
        new_id = metarange_id(ranges)
        if self._upload_if_absent(namespace, metarange_key(new_id), lambda: encode_metarange(ranges)):
            self._count("metaranges_uploaded")
            # After the metarange: an index never names a metarange that is not stored.
            self._write_index(namespace, new_id, ranges)
        decoded = MetaRange.of(new_id, ranges)
        self._cache.memory.put(cache_key(METARANGE, namespace, new_id), decoded, decoded.memory_size)
        return new_id

    def _write_index(self, namespace: str, metarange_id: MetaRangeId, ranges: list[RangeInfo]) -> None:
        """Store the metarange's range-boundary index, best effort: readers do without one."""
        payload = encode_index(ranges)
        try:
            self._adapter.put(namespace, metarange_index_key(metarange_id), io.BytesIO(payload), len(payload))
        except SiltError as exc:
            _log.warning("metarange index of %s not written in %s: %s", metarange_id, namespace, exc)
            return
        self._count("indexes_uploaded")

    def _upload_if_absent(self, namespace: str, key: str, encode: Callable[[], bytes]) -> bool:
        try:
            self._adapter.stat(namespace, key)
        except NotFound:
            payload = encode()
            self._adapter.put(namespace, key, io.BytesIO(payload), len(payload))
            return True
        self._count("uploads_skipped")
        return False

    # --- reads --------------------------------------------------------------------------

    def read_range(self, namespace: str, object_id: RangeId) -> RangeData:
        return self._load(namespace, RANGE, object_id, range_key, decode_range)

    def read_metarange(self, namespace: str, object_id: MetaRangeId) -> MetaRange:
        return self._load(
            namespace,
            METARANGE,
            object_id,
            metarange_key,
            lambda stream: decode_metarange(object_id, stream),
        )

    def range_in_memory(self, namespace: str, object_id: RangeId) -> RangeData:
        """read_range from the memory cache alone (NotInMemory otherwise)."""
        return cast(RangeData, self._in_memory(RANGE, namespace, object_id))

    def metarange_in_memory(self, namespace: str, object_id: MetaRangeId) -> MetaRange:
        """read_metarange from the memory cache alone (NotInMemory otherwise)."""
        return cast(MetaRange, self._in_memory(METARANGE, namespace, object_id))

    def _in_memory(self, kind: str, namespace: str, object_id: str) -> object:
        cached = self._cache.memory.get(cache_key(kind, namespace, object_id))
        if cached is None:
            raise NotInMemory(f"{kind} {object_id} of {namespace} is not in memory")
        self._count(f"{kind}_memory_hits")
        return cached

    def read_boundaries(self, namespace: str, object_id: MetaRangeId) -> MetaRange:
        """The metarange's rows, for readers that look up which range holds a key and compare
        range ids (a log filtered by path): from memory, else from its range-boundary index,
        a small file decoded with a few slices, else from the metarange file itself, after
        which the missing index is written (a metarange older than indexes)."""
        for kind in (METARANGE, INDEX):
            cached = self._cache.memory.get(cache_key(kind, namespace, object_id))
            if cached is not None:
                self._count(f"{kind}_memory_hits")
                return cached  # type: ignore[return-value]  # both kinds hold MetaRanges
        try:
            with self._open(namespace, INDEX, object_id, metarange_index_key) as stream:
                decoded = decode_index(object_id, stream.read())
        except NotFound:
            self._count("indexes_missing")
        except IndexUnreadable as exc:
            self._count("indexes_refused")
            _log.warning("%s in %s; reading the metarange instead", exc, namespace)
            if self._cache.disk is not None:
                # Named by content, a cached copy would never be replaced: the rewritten index
                # below is fetched again instead.
                self._cache.disk.discard(cache_key(INDEX, namespace, object_id))
        else:
            self._cache.memory.put(cache_key(INDEX, namespace, object_id), decoded, decoded.memory_size)
            return decoded
        metarange = self.read_metarange(namespace, object_id)
        # Replaces a refused file too: the index is named by content, so any writer writes the same.
        self._write_index(namespace, object_id, metarange.ranges)
        return metarange

    def _load(
        self,
        namespace: str,
        kind: str,
        object_id: str,
        key_of: Callable[[str], str],
        decode: Callable[[BinaryIO], _Decoded],
    ) -> _Decoded:
        key_in_cache = cache_key(kind, namespace, object_id)
        cached = self._cache.memory.get(key_in_cache)
        if cached is not None:
            self._count(f"{kind}_memory_hits")
            return cached  # type: ignore[return-value]  # kind decides the type stored
        with self._open(namespace, kind, object_id, key_of) as stream:
            decoded = decode(stream)
        self._cache.memory.put(key_in_cache, decoded, decoded.memory_size)
        return decoded

    def identity_in_range(self, namespace: str, object_id: RangeId, key: bytes) -> bytes | None:
        """The identity of key's record in the range (None: no such record).

        From the decoded range when it is in memory; otherwise from the part of the file that
        holds key, and only that answer is kept: a reader of one key in many ranges (a log
        filtered by path) would otherwise decode them whole and push out what other readers
        use. The answer is kept because that reader asks again at once: a range that differs
        from its parent's in one commit is the parent's range in the next commit down the log.
        """
        cached = self._cache.memory.get(cache_key(RANGE, namespace, object_id))
        if cached is not None:
            self._count("range_memory_hits")
            record = cast(RangeData, cached).find(key)
            return None if record is None else record.identity
        answer_key = cache_key(IDENTITY, namespace, f"{object_id}/{key.hex()}")
        answer = self._cache.memory.get(answer_key)
        if answer is not None:
            self._count("identity_memory_hits")
            return cast(tuple[bytes | None], answer)[0]
        with self._open(namespace, RANGE, object_id, range_key) as stream:
            identity = identity_in_file(stream, key)
        self._cache.memory.put(answer_key, (identity,), _ANSWER_OVERHEAD + 2 * len(key) + len(identity or b""))
        return identity

    def _open(self, namespace: str, kind: str, object_id: str, key_of: Callable[[str], str]) -> BinaryIO:
        # Only ids validated here name files (disk cache, object store); the memory cache holds
        # nothing under another id, so a hit needs no check.
        key = key_of(object_id)
        stream = self._cache.disk.open(cache_key(kind, namespace, object_id)) if self._cache.disk is not None else None
        if stream is not None:
            self._count(f"{kind}_disk_hits")
            return stream
        return self._fetch(namespace, kind, object_id, key)

    def _fetch(self, namespace: str, kind: str, object_id: str, key: str) -> BinaryIO:
        try:
            stream = self._adapter.get(namespace, key)
        except NotFound as exc:
            # A range or metarange file missing from the object store: an object, to clients.
            raise NotFound(f"{kind} {object_id} not found in {namespace}", what="object") from exc
        self._count(f"{kind}_reads")
        with stream:
            if self._spill_to is not None:
                return self._spill_to.store(cache_key(kind, namespace, object_id), stream)
            # Parquet readers seek (the footer comes first), and adapter streams need not.
            return io.BytesIO(stream.read())
