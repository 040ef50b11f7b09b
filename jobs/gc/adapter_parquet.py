"""Parquet datasets in a storage namespace, moved through Silt's block adapter instead of a
Hadoop file system: for stores Spark has no connector for here (Azure Blob Storage, GCS).

A dataset is what Spark's Parquet reader and writer make of a path: the object at the path
itself (graveler's exports: ``_silt/gc/<run>/staged.parquet``), or every object below
``<path>/`` whose name below it has no component starting with ``_`` or ``.`` (committed
ranges ``_silt/ranges/<id>``; a report's ``part-*.parquet``; ``_SUCCESS`` is a marker).

* Reading lists the files on the driver (``list_objects``: a handful, never one per data
  object), spreads their keys over tasks, and each task opens its files one at a time through
  its own adapter (built on the executor, never shipped), spools each whole into a bounded
  temporary file (pyarrow needs to seek; a spool spills to disk past ``SPOOL_BYTES``) and
  streams its record batches into Spark with ``mapInArrow``.
* Writing first deletes what is below ``<path>/`` (mode overwrite), then each task writes its
  partition as ``part-<partition>-c<n>.parquet`` (a new file every ``max_records_per_file``
  rows): a spool again, put once whole; a retried or speculative task writes the same names.
  An empty partition writes nothing. Last, ``_SUCCESS``: the dataset is complete.
"""

from __future__ import annotations

import io
import itertools
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from jobs.gc.location import NamespaceRoot
from silt.config import BlockstoreConfig
from silt.errors import InvalidArgument, NotFound

SUCCESS_MARKER = "_SUCCESS"
# A file read or written is spooled in memory up to this size, then on local disk.
SPOOL_BYTES = 16 * 1024 * 1024
# Rows per record batch handed to Spark.
BATCH_ROWS = 8192
# Read tasks per core of the session, at most: one file each, or several one after the other.
TASKS_PER_CORE = 4

_WRITTEN = "key string, rows long, bytes long"


@dataclass(frozen=True)
class WrittenFile:
    key: str
    rows: int
    bytes: int


def _blockstore(root: NamespaceRoot) -> BlockstoreConfig:
    if not root.through_adapter or root.blockstore is None:
        raise InvalidArgument(f"{root.namespace}: not a namespace whose datasets move through the block adapter")
    return root.blockstore


def _hidden(relative: str) -> bool:
    return any(part[:1] in ("_", ".") for part in relative.split("/"))


def dataset_files(root: NamespaceRoot, path: str) -> list[str] | None:
    """Keys of the dataset's Parquet files in key order; None when nothing at all is there."""
    from silt.block import open_adapter

    adapter = open_adapter(_blockstore(root))
    path = path.strip("/")
    found = False
    files: list[str] = []
    for item in adapter.list_objects(root.namespace, path):
        if item.key == path:
            return [path]  # a single-file dataset (nothing else may share its name)
        if not item.key.startswith(path + "/"):
            continue  # a sibling whose name starts with this one's: report-checked-... beside report
        found = True
        if not _hidden(item.key[len(path) + 1 :]):
            files.append(item.key)
    return files if found else None


def read_dataset(
    spark: Any,
    root: NamespaceRoot,
    path: str,
    schema: StructType | str,
    file_name_column: str | None = None,
    missing_ok: bool = False,
) -> DataFrame:
    """The dataset at `path` (relative to the namespace) as a DataFrame of `schema` (a StructType or
    DDL): its columns are read from the files by name, except `file_name_column`, which is the name
    of the file each row came from (what Spark's ``_metadata.file_name`` gives). NotFound if nothing
    at all is there, unless `missing_ok`."""
    files = dataset_files(root, path)
    if files is None:
        if not missing_ok:
            raise NotFound(f"no dataset at {root.namespace}/{path.strip('/')}")
        files = []
    return read_files(spark, root, files, schema, file_name_column)


def read_files(
    spark: Any, root: NamespaceRoot, keys: list[str], schema: StructType | str, file_name_column: str | None = None
) -> DataFrame:
    """The rows of the given Parquet files, as read_dataset reads them."""
    blockstore = _blockstore(root)
    if isinstance(schema, str):
        parsed = StructType.fromDDL(schema)
        if not isinstance(parsed, StructType):
            raise InvalidArgument(f"not the schema of rows: {schema!r}")
        schema = parsed
    if not keys:
        return spark.createDataFrame([], schema)
    tasks = min(len(keys), spark.sparkContext.defaultParallelism * TASKS_PER_CORE)
    listed = spark.createDataFrame(spark.sparkContext.parallelize([(key,) for key in keys], tasks), "key string")
    return listed.mapInArrow(_file_reader(blockstore, root.namespace, schema, file_name_column), schema)


def _file_reader(blockstore: BlockstoreConfig, namespace: str, schema: StructType, file_name_column: str | None) -> Any:
    def read(batches: Iterator[Any]) -> Iterator[Any]:
        # Imported on the executor: the adapter is built there, never shipped.
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        from jobs.executor_adapters import executor_adapter
        from silt.block import CHUNK_SIZE

        adapter = executor_adapter(blockstore)
        target = to_arrow_schema(schema)
        columns = [name for name in target.names if name != file_name_column]
        for batch in batches:
            for key in batch.column(0).to_pylist():
                name = key.rsplit("/", 1)[-1]
                with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
                    with adapter.get(namespace, key) as stream:
                        shutil.copyfileobj(stream, spool, CHUNK_SIZE)
                    spool.seek(0)
                    parquet = pq.ParquetFile(spool)
                    for read in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                        arrays = [
                            pa.array([name] * read.num_rows, field.type)
                            if field.name == file_name_column
                            else read.column(field.name).cast(field.type)
                            for field in target
                        ]
                        yield pa.RecordBatch.from_arrays(arrays, schema=target)

    return read


def write_dataset(
    frame: DataFrame, root: NamespaceRoot, path: str, max_records_per_file: int | None = None
) -> list[WrittenFile]:
    """Write the frame as the dataset at `path`, replacing what was there; return its files.

    What was there is deleted before the frame is computed: the frame must not read it (Spark's
    writer refuses that too)."""
    from silt.block import open_adapter

    blockstore = _blockstore(root)
    if max_records_per_file is not None and max_records_per_file < 1:
        raise InvalidArgument(f"max records per file must be positive, got {max_records_per_file}")
    path = path.strip("/")
    adapter = open_adapter(blockstore)
    delete_dataset(root, path)
    writer = _partition_writer(blockstore, root.namespace, path, max_records_per_file)
    rows = frame.mapInArrow(writer, _WRITTEN).collect()
    written = [WrittenFile(row.key, int(row.rows), int(row.bytes)) for row in rows]
    adapter.put(root.namespace, f"{path}/{SUCCESS_MARKER}", io.BytesIO(b""), 0)
    return sorted(written, key=lambda file: file.key)


def delete_dataset(root: NamespaceRoot, path: str) -> int:
    """Delete every object below `path`/; return how many."""
    from silt.block import open_adapter

    adapter = open_adapter(_blockstore(root))
    path = path.strip("/")
    # Listed whole first: deleting while a listing pages through the same keys is not portable.
    keys = [item.key for item in adapter.list_objects(root.namespace, path + "/")]
    for key in keys:
        adapter.delete(root.namespace, key)
    return len(keys)


def _partition_writer(blockstore: BlockstoreConfig, namespace: str, path: str, max_records_per_file: int | None) -> Any:
    def write(batches: Iterator[Any]) -> Iterator[Any]:
        # Imported on the executor: the adapter is built there, never shipped.
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        from jobs.executor_adapters import executor_adapter

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        adapter = None
        result = pa.schema([("key", pa.string()), ("rows", pa.int64()), ("bytes", pa.int64())])
        for number, group in itertools.groupby(_file_pieces(batches, max_records_per_file), key=lambda p: p[0]):
            pieces = (piece for _, piece in group)
            first = next(pieces)
            key = f"{path}/part-{partition:05d}-c{number:03d}.parquet"
            rows = 0
            with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
                with pq.ParquetWriter(spool, first.schema, compression="snappy") as writer:
                    for piece in itertools.chain([first], pieces):
                        writer.write_batch(piece)
                        rows += piece.num_rows
                size = spool.tell()
                spool.seek(0)
                adapter = adapter or executor_adapter(blockstore)
                adapter.put(namespace, key, cast(BinaryIO, spool), size)
            yield pa.RecordBatch.from_pydict({"key": [key], "rows": [rows], "bytes": [size]}, schema=result)

    return write


def _file_pieces(batches: Iterator[Any], limit: int | None) -> Iterator[tuple[int, Any]]:
    """The non-empty slices of a partition's record batches, each with the number of the file it
    goes to: a new file every `limit` rows."""
    number = rows = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            if limit is not None and rows == limit:
                number, rows = number + 1, 0
            take = batch.num_rows - offset if limit is None else min(batch.num_rows - offset, limit - rows)
            yield number, batch.slice(offset, take)
            offset += take
            rows += take
