"""Writing an import's ranges behind its listing: a block adapter whose puts run in a thread.

Every range and metarange object is fsynced where it is stored (silt/block/local.py), and on a
busy disk an fsync can take longer than listing and encoding thousands of entries. The ingestion
hands each encoded object to this writer and goes on; at most DEPTH objects (a few MiB each: the
chunking byte cap bounds a range) wait at a time, and `finish` returns once every one is stored,
raising the first failure, before anything names them.
"""

from __future__ import annotations

import io
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

from silt.block.adapter import BlockAdapter, PutResult

DEPTH = 4


class WriteBehind:
    def __init__(self, adapter: BlockAdapter, depth: int = DEPTH) -> None:
        self._adapter = adapter
        self.scheme = adapter.scheme
        self._depth = depth
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-writer")
        self._pending: deque[Future[PutResult]] = deque()

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        data = stream.read()
        while len(self._pending) >= self._depth:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(self._adapter.put, namespace, key, io.BytesIO(data), len(data)))
        # The committed layer names objects by their content and never reads a put's ETag.
        return PutResult(len(data), "")

    def finish(self) -> None:
        """Wait until every put is stored; the first failure is raised."""
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __getattr__(self, name: str) -> Any:
        # Reads, stats and the S3 client the listing uses are the adapter's own.
        return getattr(self._adapter, name)
