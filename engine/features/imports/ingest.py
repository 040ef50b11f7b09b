"""Ingesting an import: its sources' listings, merged into key order, written as one metarange.

The listings (listing.py) stream in, each in its own key order; they are merged by destination
key (when two locations put an object at the same key, the later location wins) and written
through the committed layer's MetaRangeWriter, which cuts ranges as it goes: memory holds one
listing page per source and one range being filled, whatever the number of objects. Nothing is
read from the objects themselves but a local file's bytes for its MD5.

Progress is written to the import's record about once a second, and a cancel is noticed there.
"""

from __future__ import annotations

import hashlib
import heapq
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from engine.core.committed.cache import CommittedCache
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import MetaRangeId, Record
from engine.features.imports.listing import Found, check_name, list_store, walk_local
from engine.features.imports.locations import OBJECT, Source
from engine.features.imports.records import ImportCanceled, ImportRecords
from engine.features.imports.write_behind import WriteBehind
from silt.block.adapter import BlockAdapter
from silt.block.external import LOCAL_EXTERNAL, ExternalFiles
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import SOURCE_MTIME_KEY, SOURCE_VERSION_KEY

# How often progress is written to the import's record (and a cancel looked for).
PROGRESS_SECONDS = 1.0
# An import writes ranges once and reads none back: a small cache is all it needs, and keeps a
# long import's memory flat.
INGEST_CACHE_BYTES = 8 * 1024 * 1024
_CHECK_EVERY = 1024


@dataclass(frozen=True)
class IngestJob:
    """Everything a runner needs, in this process or in a worker (picklable)."""

    import_id: str
    partition: bytes
    namespace: str
    sources: tuple[Source, ...]
    external_prefixes: tuple[str, ...]  # local:///dir, as silt/block/external.py names them
    policy: ChunkingPolicy


@dataclass(frozen=True)
class IngestResult:
    metarange_id: MetaRangeId
    ingested: int


def imported_record(key: bytes, address: str, found: Found) -> Record:
    """The committed record of an imported object: an entry naming its source, with its identity
    computed as engine/core/values.py's entry_value does (without address and times). A
    local file's mtime is kept for reads to compare (an S3 object's ETag suffices), and the
    version GCS or Azure gave the object for reads to ask for."""
    entry = pb.Entry(size=found.size, etag=found.etag)
    if found.version:
        # GCS's generation, Azure's ETag: reads ask for exactly this version of the source. Part
        # of the identity: an entry naming another version is another entry (the one it names
        # may be gone even if the bytes were the same).
        entry.metadata[SOURCE_VERSION_KEY] = found.version
    identity = hashlib.sha256(entry.SerializeToString(deterministic=True)).digest()
    entry.physical_address = address
    entry.last_modified.seconds, entry.last_modified.nanos = divmod(found.mtime_ns, 1_000_000_000)
    if address.startswith(LOCAL_EXTERNAL):
        entry.metadata[SOURCE_MTIME_KEY] = str(found.mtime_ns)
    return Record(key, identity, entry.SerializeToString(deterministic=True))


def _listing(source: Source, adapter: BlockAdapter, files: ExternalFiles) -> Iterator[Found]:
    if source.scheme == "store":
        return list_store(adapter, source)
    return walk_local(files, source)


def _keyed(index: int, source: Source, found: Iterable[Found]) -> Iterator[tuple[bytes, int, str, Found]]:
    # Sorted by destination key, later locations first on equal keys (-index). A local walk
    # checks its names itself, one directory entry at a time.
    check = source.scheme != "local" or source.kind == OBJECT
    for item in found:
        if check:
            check_name(source, item)
        yield source.destination_of(item.name).encode(), -index, source.address_of(item.name), item


def records_of(sources: Sequence[Source], adapter: BlockAdapter, files: ExternalFiles) -> Iterator[Record]:
    """Every source object as a record, in strictly increasing key order."""
    streams = [_keyed(index, source, _listing(source, adapter, files)) for index, source in enumerate(sources)]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams)
    last: bytes | None = None
    for key, _, address, found in merged:
        if key == last:
            continue  # an earlier location's object at a key a later one also fills
        last = key
        yield imported_record(key, address, found)


def counted(
    records: Iterator[Record], report: Callable[[int], None], stopped: Callable[[], bool] = lambda: False
) -> Iterator[Record]:
    """records, calling report(count so far) about every PROGRESS_SECONDS, and once at the end;
    ImportCanceled once stopped() says the process is closing."""
    count = 0
    due = time.monotonic() + PROGRESS_SECONDS
    for record in records:
        yield record
        count += 1
        if count % _CHECK_EVERY == 0:
            if stopped():
                raise ImportCanceled
            if time.monotonic() >= due:
                report(count)
                due = time.monotonic() + PROGRESS_SECONDS
    report(count)


def ingest(
    job: IngestJob,
    adapter: BlockAdapter,
    records_store: ImportRecords,
    stopped: Callable[[], bool] = lambda: False,
    cache_bytes: int = INGEST_CACHE_BYTES,
) -> IngestResult:
    """Write the job's source objects as one metarange in its namespace; ImportCanceled if canceled."""
    files = ExternalFiles(job.external_prefixes)
    writer = WriteBehind(adapter)
    # Its own small cache: the ranges are written once and read by nobody here.
    committed = CommittedManager(writer, CommittedCache(cache_bytes), job.policy)  # type: ignore[arg-type]
    total = 0

    def report(count: int) -> None:
        nonlocal total
        total = count
        records_store.progress(job.partition, job.import_id, count)

    try:
        stream = counted(records_of(job.sources, adapter, files), report, stopped)
        metarange_id = committed.write_metarange(job.namespace, stream)
    finally:
        writer.finish()
    return IngestResult(metarange_id, total)
