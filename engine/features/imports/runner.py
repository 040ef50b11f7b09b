"""Where an import's ingestion runs: in a worker process, or in a thread of this one.

Ingesting is CPU-bound Python (walking listings, encoding entries and ranges) for as long as
the listing lasts. In the serving process it would hold the GIL against every request, so a
service whose KV and object store other processes can reach (every KV driver but ``mem``)
ingests in a worker process of its own, started with the graveler when imports are allowed (or
with the first import); with ``mem`` (tests, embedded use) a thread ingests. Either way, imports
run one at a time per graveler process and later ones wait their turn.

The worker runs at the serving processes' priority, unlike a commit's build (nice 10): an
import is one process on one core whatever its size, and its caller waits for it; measured on a
shared 2-core VM, nice 5 took a 100,000-file import from 23,000 to 18,000 objects/s.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Protocol

from engine.core.committed.ranges import encode_range
from engine.core.stores import open_stores
from engine.features.imports.ingest import IngestJob, IngestResult, ingest
from engine.features.imports.records import ImportRecords
from silt.block.adapter import BlockAdapter
from silt.child_process import spawn_pool
from silt.config import Config
from silt.kv import Store


class IngestRunner(Protocol):
    def submit(self, job: IngestJob) -> Future[IngestResult]: ...

    def close(self) -> None: ...


class InProcessRunner:
    def __init__(self, kv: Store, adapter: BlockAdapter) -> None:
        self._records = ImportRecords(kv)
        self._adapter = adapter
        self._pool: Executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import")
        self._closing = threading.Event()

    def submit(self, job: IngestJob) -> Future[IngestResult]:
        return self._pool.submit(ingest, job, self._adapter, self._records, self._closing.is_set)

    def close(self) -> None:
        # A running ingestion stops at its next progress check; its record, no longer beating,
        # reads as interrupted.
        self._closing.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


_records: ImportRecords | None = None
_adapter: BlockAdapter | None = None


def _init_worker(config: Config, niceness: int) -> None:
    """After spawn_pool's own start (dies with graveler, not dumpable)."""
    global _records, _adapter
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)
    stores = open_stores(config)
    _records, _adapter = ImportRecords(stores.kv), stores.adapter
    # Parquet's writer sets itself up on first use, about a second of CPU: paid here, at start-up,
    # rather than by the first import.
    encode_range([b"warm"], [b"warm"], [b"warm"])


def _ingest_in_worker(job: IngestJob) -> IngestResult:
    assert _records is not None and _adapter is not None, "worker not initialised"
    return ingest(job, _adapter, _records)


def _warm_up() -> None:
    assert _records is not None, "worker not initialised"


class ProcessRunner:
    def __init__(self, config: Config, niceness: int = 0, warm: bool = False) -> None:
        """warm: start the worker now (an installation that allows imports), so that the first
        import does not wait a second for an interpreter to import its libraries."""
        if config.database.type == "mem":
            raise ValueError("the mem KV driver lives in one process; ingest in-process instead")
        self._config = config
        self._niceness = niceness
        self._pool: ProcessPoolExecutor | None = None
        if warm:
            self._started().submit(_warm_up)

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = spawn_pool(1, _init_worker, (self._config, self._niceness))
        return self._pool

    def submit(self, job: IngestJob) -> Future[IngestResult]:
        return self._started().submit(_ingest_in_worker, job)

    def close(self) -> None:
        if self._pool is None:
            return
        # An ingestion may run for hours: its worker is stopped, not waited for. Its record, no
        # longer beating, reads as interrupted.
        workers = list(getattr(self._pool, "_processes", {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.terminate()
                worker.join(5)
