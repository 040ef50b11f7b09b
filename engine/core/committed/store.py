"""Reading and writing range and metarange objects through a block adapter and the caches.

Works with any ``BlockAdapter``. Objects of a remote store are spilled into the disk cache
when there is one, so the next process-local miss costs a file read instead of a request;
objects of the local adapter are already local files and are read directly. Without a disk
cache an object is buffered in memory, which the chunking byte cap keeps small.
"""

from __future__ import annotations

import dataclasses
import io
import threading
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TypeVar, cast

from engine.core.committed.cache import CommittedCache, DiskCache, cache_key
from engine.core.committed.metarange import MetaRange, decode_metarange, encode_metarange, metarange_id
from engine.core.committed.model import MetaRangeId, RangeId, RangeInfo, metarange_key, range_key
from engine.core.committed.ranges import RangeData, decode_range, encode_range, identity_in_file, range_id
from silt.block.adapter import BlockAdapter
from silt.errors import NotFound

LOCAL_SCHEME = "local"
RANGE = "range"
METARANGE = "metarange"


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
        decoded = MetaRange.of(new_id, ranges)
        self._cache.memory.put(cache_key(METARANGE, namespace, new_id), decoded, decoded.memory_size)
        return new_id

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
        holds key, and nothing is kept: a reader of one key in many ranges (a log filtered by
        path) would otherwise decode them whole and push out what other readers use.
        """
        cached = self._cache.memory.get(cache_key(RANGE, namespace, object_id))
        if cached is not None:
            self._count("range_memory_hits")
            record = cast(RangeData, cached).find(key)
            return None if record is None else record.identity
        with self._open(namespace, RANGE, object_id, range_key) as stream:
            return identity_in_file(stream, key)

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
