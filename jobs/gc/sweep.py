"""The sweep phase: delete what a report lists, on the executors, through the block adapter.

Deleting a missing object is not an error for any adapter, so a sweep can be re-run over
the same report (``--sweep-only RUN_ID``) after a crash: it finishes what is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import DataFrame

from silt.block.adapter import MAX_DELETE_BATCH, BlockAdapter
from silt.config import BlockstoreConfig
from silt.kv.store import chunked

# Deletes go in batches, one store call each where the store allows (S3's DeleteObjects, a
# local disk's one directory sync per batch: BlockAdapter.delete_many); a few batches in
# flight per task keep an object store's requests flowing.
THREADS_PER_TASK = 4


def sweep(report: DataFrame, namespace: str, blockstore: BlockstoreConfig, partitions: int) -> dict[str, int]:
    """Delete every reported object; return the count of deletes issued."""

    def delete_partition(rows: Iterable[Any]) -> Iterator[int]:
        # Imported on the executor: the adapter is built there, never shipped.
        from jobs.executor_adapters import executor_adapter

        adapter = executor_adapter(blockstore)
        batches = chunked((row.address for row in rows), MAX_DELETE_BATCH)
        count = 0
        with ThreadPoolExecutor(THREADS_PER_TASK) as pool:
            for size in pool.map(lambda batch: _delete(adapter, namespace, batch), batches):
                count += size
        yield count

    deleted = report.select("address").repartition(partitions).rdd.mapPartitions(delete_partition).sum()
    return {"deleted": int(deleted)}


def _delete(adapter: BlockAdapter, namespace: str, batch: list[str]) -> int:
    adapter.delete_many(namespace, batch)
    return len(batch)
