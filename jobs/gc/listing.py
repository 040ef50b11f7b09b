"""Listing the objects physically under a storage namespace, in shards listed on the executors.

The driver only builds a handful of shard descriptions; each executor task lists its shard
and streams rows ``(key, size, mtime_micros)`` as Arrow batches, so neither the driver's memory
nor its time grows with the number of objects.

* local: each of N tasks (no more than Spark's parallelism) walks the namespace's directory
  tree (names only) and stats the files whose key hashes to its shard;
* an object store (S3, Azure, GCS): the key space is cut at fixed boundaries into ranges
  ``(lo, hi]``; each task lists its range through the block adapter (silt/block/registry.py's
  ``list_under``, S3's StartAfter) from ``lo`` until a key passes ``hi``. The ranges cover every
  key whatever its spelling; the boundaries only balance the physical addresses graveler hands
  out (``data/<hex>``).

Never listed: Silt's own metadata (``_silt/``) and the local adapter's reserved names
(``.silt-*``: temporary files, ETag records, multipart uploads). S3 lists no multipart parts.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.gc.location import NamespaceRoot
from silt.block.registry import list_under
from silt.block.rules import RESERVED_PREFIX, split_namespace
from silt.config import BlockstoreConfig

SILT_PREFIX = "_silt/"
LISTING_SCHEMA = StructType(
    [
        StructField("key", StringType(), False),
        StructField("size", LongType(), False),
        StructField("mtime_micros", LongType(), False),
    ]
)
_HEX = "0123456789abcdef"
_BATCH_ROWS = 10_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def is_candidate_key(key: str) -> bool:
    """Whether a listed object may be garbage: never Silt's own metadata or reserved names, nor
    a name Silt could not have written (an object store's "folder/" placeholder, "a//b"): no
    adapter accepts those keys, so a sweep could not delete them anyway."""
    if key.startswith(SILT_PREFIX):
        return False
    parts = key.split("/")
    return not any(not part or part in (".", "..") or part.startswith(RESERVED_PREFIX) for part in parts)


def list_objects(spark: Any, root: NamespaceRoot, blockstore: BlockstoreConfig, shards: int) -> Any:
    """A DataFrame of (key, size, mtime_micros) of every candidate object under the namespace."""
    namespace = root.namespace
    tasks: list[Any]
    if root.kind == "local":
        # Every shard walks the whole tree (only its stats are its own): no more shards than
        # Spark runs at once, or the walks cost more than the stats they share out.
        shards = max(1, min(shards, spark.sparkContext.defaultParallelism))
        tasks = [(namespace, i, shards) for i in range(shards)]
        lister = _local_lister(blockstore)
    else:
        tasks = _key_ranges(namespace)
        lister = _adapter_lister(blockstore)
    # One task per shard, each streaming its rows to the JVM as Arrow batches: far cheaper than
    # pickled rows, which the JVM unpickles one by one.
    shard_ids = spark.range(0, len(tasks), 1, len(tasks))
    return shard_ids.mapInArrow(_in_batches(lister, tasks), LISTING_SCHEMA)


def _in_batches(lister: Any, tasks: list[Any]) -> Any:
    def list_shards(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for shard in batch.column(0).to_pylist():
                keys: list[str] = []
                sizes: list[int] = []
                mtimes: list[int] = []
                for key, size, mtime_micros in lister(tasks[shard]):
                    keys.append(key)
                    sizes.append(size)
                    mtimes.append(mtime_micros)
                    if len(keys) == _BATCH_ROWS:
                        yield _batch(keys, sizes, mtimes)
                        keys, sizes, mtimes = [], [], []
                if keys:
                    yield _batch(keys, sizes, mtimes)

    return list_shards


def _batch(keys: list[str], sizes: list[int], mtimes: list[int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.string()), pa.array(sizes, pa.int64()), pa.array(mtimes, pa.int64())],
        names=[field.name for field in LISTING_SCHEMA.fields],
    )


def _local_lister(blockstore: BlockstoreConfig) -> Any:
    root = os.path.realpath(os.path.expanduser(blockstore.local.path))

    def list_shard(task: tuple[str, int, int]) -> Iterator[tuple[str, int, int]]:
        namespace, shard, shards = task
        name, prefix = split_namespace(namespace, "local")
        base = os.path.join(root, name, *prefix)
        for directory, dirs, files in os.walk(base, followlinks=False):
            relative = os.path.relpath(directory, base)
            relative = "" if relative == "." else relative.replace(os.sep, "/") + "/"
            # Pruned in place: os.walk never descends into Silt's metadata or reserved names.
            dirs[:] = [d for d in dirs if not d.startswith(RESERVED_PREFIX) and relative + d + "/" != SILT_PREFIX]
            for file_name in files:
                key = relative + file_name
                if zlib.crc32(key.encode()) % shards != shard or not is_candidate_key(key):
                    continue
                try:
                    st = os.lstat(os.path.join(directory, file_name))
                except FileNotFoundError:
                    continue  # deleted since the walk read the directory
                if stat.S_ISREG(st.st_mode):
                    yield key, st.st_size, st.st_mtime_ns // 1000

    return list_shard


def _key_ranges(namespace: str) -> list[tuple[str, str | None, str | None]]:
    """Ranges (lo, hi] of keys (relative to the namespace) that cover them all, one task each."""
    bounds: list[str | None] = [None, *[f"data/{a}{b}" for a in _HEX for b in "08"], None]
    return [(namespace, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def _adapter_lister(blockstore: BlockstoreConfig) -> Any:
    def list_range(task: tuple[str, str | None, str | None]) -> Iterator[tuple[str, int, int]]:
        # Imported on the executor: the adapter is built there, never shipped.
        from jobs.executor_adapters import executor_adapter

        namespace, low, high = task
        adapter = executor_adapter(blockstore)
        # Every key of (low, high] starts with what the two bounds share: listing that prefix
        # reads only the range's own part of the namespace, even on a store without a
        # start-after (Azure), which would otherwise read every key before `low` again.
        # Character by character on purpose: keys share a prefix of characters, not of path parts.
        prefix = os.path.commonprefix([low, high]) if low is not None and high is not None else ""  # noqa: RUF071
        # Keys come in UTF-8 byte order, which is the order of Python's str comparison.
        for item in list_under(adapter, namespace, prefix, after=low or "", strict=False):
            if high is not None and item.key > high:
                return
            if is_candidate_key(item.key):
                yield item.key, item.size, (item.mtime - _EPOCH) // _MICROSECOND

    return list_range
