"""The sweep phase: delete what a report lists, on the executors, through the block adapter.

Deleting a missing object is not an error for any adapter, so a sweep can be re-run over
the same report (``--sweep-only RUN_ID``) after a crash: it finishes what is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import DataFrame

from silt.config import BlockstoreConfig

# Deletes are I/O bound (one request each on S3): a few threads per task keep them flowing.
THREADS_PER_TASK = 8


def sweep(report: DataFrame, namespace: str, blockstore: BlockstoreConfig, partitions: int) -> dict[str, int]:
    """Delete every reported object; return the count of deletes issued."""

    def delete_partition(rows: Iterable[Any]) -> Iterator[int]:
        # Imported on the executor: the adapter is built there, never shipped.
        from jobs.executor_adapters import executor_adapter

        adapter = executor_adapter(blockstore)
        count = 0
        with ThreadPoolExecutor(THREADS_PER_TASK) as pool:
            for _ in pool.map(lambda row: adapter.delete(namespace, row.address), rows):
                count += 1
        yield count

    deleted = report.select("address").repartition(partitions).rdd.mapPartitions(delete_partition).sum()
    return {"deleted": int(deleted)}
