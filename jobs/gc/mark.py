"""The mark phase: which objects of a storage namespace are garbage, as DataFrames.

Inputs: graveler's export for the run (``_silt/gc/<run>/``: metaranges with an ``expired``
flag, staged addresses), the committed layer read directly as Parquet (every metarange
and range under ``_silt/``), and the physical listing of the namespace.

* **expired-commit**: addresses in ranges that only expired metaranges name, minus every
  address of any other range (retained commits, commits newer than the export, ranges of
  commits in flight) and every staged address.
* **unreferenced**: listed objects that no range at all and no staged entry names.

On a namespace reached through the block adapter (jobs/gc/location.py), the export and the
committed layer are read through it (jobs/gc/adapter_parquet.py); elsewhere Spark reads them.

Both exclude objects modified after ``cutoff`` (the run's start minus the grace period),
so an upload in flight when the run starts is never touched, and both are joined with the
listing, so only objects that exist under the namespace can ever be reported.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.core.committed.model import METARANGES_PREFIX, RANGES_PREFIX
from jobs.gc.adapter_parquet import read_dataset
from jobs.gc.location import NamespaceRoot
from silt.graveler.v1 import model_pb2 as pb

EXPIRED = "expired-commit"
UNREFERENCED = "unreferenced"
# Where graveler's committed layer keeps its objects in a namespace, as directories.
RANGES_DIR = RANGES_PREFIX.rstrip("/")
METARANGES_DIR = METARANGES_PREFIX.rstrip("/")


def _physical_address(value: bytes | None) -> str | None:
    if value is None:
        return None
    entry = pb.Entry()
    entry.ParseFromString(bytes(value))
    return entry.physical_address


@F.arrow_udf(T.StringType())  # type: ignore[call-overload]
def decoded_addresses(values: pa.Array) -> pa.Array:
    """The physical address of each serialized Entry, through the protobuf decoder; null for null.

    with_addresses sends only the entries it cannot read in SQL and a null for every other: a
    batch of nulls costs no decode at all.
    """
    if values.null_count == len(values):
        return pa.nulls(len(values), pa.string())
    return pa.array([_physical_address(value) for value in values.to_pylist()], pa.string())


# An Entry as graveler's serializer writes it starts with its physical address, field 1 (the
# serializer emits fields in number order): the tag byte 0x0A, the length as a varint, the UTF-8
# bytes. Addresses are at most a few KiB, so the varint is one byte or two.
_ADDRESS_TAG = 0x0A


def _byte_at(column: Any, position: int) -> Any:
    """The unsigned byte at a 1-based position of a binary column (null past its end)."""
    return F.conv(F.hex(F.substring(column, position, 1)), 16, 10).cast("int")


def with_addresses(frame: DataFrame, value: str, alias: str) -> DataFrame:
    """frame with the physical address of each serialized Entry in column value, as column alias.

    Read in Spark SQL from the bytes where the Entry starts with its address (every Entry
    graveler writes), through the protobuf decoder in Python for any other: a Python UDF costs
    each row a trip to a Python worker, three to four times the whole decode on the JVM.
    """
    column = F.col(value)
    tag, first, second = _byte_at(column, 1), _byte_at(column, 2), _byte_at(column, 3)
    one_byte = first < 128
    length = F.when(one_byte, first).otherwise(first - 128 + second * 128)
    start = F.when(one_byte, F.lit(3)).otherwise(F.lit(4))
    readable = (tag == _ADDRESS_TAG) & (one_byte | (second < 128)) & (F.length(column) >= start + length - 1)
    readable = F.coalesce(readable, F.lit(False))
    # One projection, so the input is read once: the UDF runs over every row (Spark evaluates a
    # Python UDF before the expression around it), but is handed the bytes of only the entries
    # SQL cannot read.
    # Marked nondeterministic only so the optimizer never inlines it into each use of the
    # column (relative_to reads it twice), which would run it once per use.
    decoded = decoded_addresses.asNondeterministic()(F.when(~readable, column))
    return frame.withColumn(
        alias, F.when(readable, F.substring(column, start, length).cast("string")).otherwise(decoded)
    )


def relative_to(namespace: str, column: Any) -> Any:
    """Addresses as keys in the namespace; a full URI elsewhere stays as is (and matches nothing)."""
    full = namespace.rstrip("/") + "/"
    return F.when(column.startswith(full), F.substring(column, len(full) + 1, 1 << 20)).otherwise(column)


def _read_committed(spark: Any, root: NamespaceRoot, directory: str, columns: list[str], schema: str) -> DataFrame:
    if root.through_adapter:
        # The object id is the file's name: what _metadata.file_name gives Spark's reader.
        return read_dataset(spark, root, directory, schema, file_name_column="object_id", missing_ok=True)
    try:
        frame = spark.read.parquet(root.child(directory))
    except Exception as exc:  # an empty namespace has no committed layer yet
        if "PATH_NOT_FOUND" in str(exc) or "UNABLE_TO_INFER_SCHEMA" in str(exc):
            return spark.createDataFrame([], schema)
        raise
    return frame.select(F.col("_metadata.file_name").alias("object_id"), *columns)


def _export_views(spark: Any, root: NamespaceRoot, run_location: str) -> tuple[DataFrame, DataFrame, DataFrame]:
    """From one export: decoded ranges (range_id, address), ranges only expired metaranges name,
    and staged addresses."""
    run = run_location.rstrip("/")
    if root.through_adapter:
        exported = read_dataset(spark, root, f"{run}/metaranges.parquet", "metarange_id string, expired boolean")
        exported_staged = read_dataset(spark, root, f"{run}/staged.parquet", "physical_address string")
    else:
        exported = spark.read.parquet(root.child(f"{run}/metaranges.parquet"))
        exported_staged = spark.read.parquet(root.child(f"{run}/staged.parquet"))
    expired_metaranges = exported.filter(F.col("expired")).select("metarange_id")
    staged = exported_staged.select(relative_to(root.namespace, F.col("physical_address")).alias("address"))
    metarange_rows = _read_committed(
        spark, root, METARANGES_DIR, ["range_id"], "object_id string, range_id string"
    ).withColumnRenamed("object_id", "metarange_id")
    in_expired = metarange_rows.join(F.broadcast(expired_metaranges), "metarange_id", "left_semi")
    in_kept = metarange_rows.join(F.broadcast(expired_metaranges), "metarange_id", "left_anti")
    expired_ranges = in_expired.select("range_id").distinct().join(in_kept.select("range_id"), "range_id", "left_anti")
    ranges = _read_committed(spark, root, RANGES_DIR, ["value"], "object_id string, value binary")
    entries = with_addresses(ranges, "value", "physical_address").select(
        F.col("object_id").alias("range_id"),
        relative_to(root.namespace, F.col("physical_address")).alias("address"),
    )
    return entries, expired_ranges, staged


def mark(
    spark: Any,
    root: NamespaceRoot,
    run_location: str,
    listing: DataFrame,
    cutoff_micros: int,
) -> DataFrame:
    """The report: (address, size, reason) of every object to delete."""
    entries, expired_ranges, staged = _export_views(spark, root, run_location)
    return garbage(entries, expired_ranges, staged, listing, cutoff_micros)


def garbage(
    entries: DataFrame, expired_ranges: DataFrame, staged: DataFrame, listing: DataFrame, cutoff_micros: int
) -> DataFrame:
    """(address, size, reason) of each listed object older than the cutoff that no staged entry
    and no range of a kept metarange names: expired-commit if some range names it, unreferenced
    if none does.

    One plan that reads each input once (the listing is listed by Python workers: a second read
    would list the namespace again): the ranges are reduced to one row per address, keyed by
    the address's 64-bit hash, saying whether any range that is not only expired names it, and
    the listing meets them in one join. A long key makes the aggregation and the join several
    times cheaper than the address. Two addresses sharing a hash can only spare an object,
    never report one: a listed object is reported only when no kept range names any address
    with its hash, and so when none names its own (a collision may also label an unreferenced
    object expired-commit). Staged addresses are compared whole.
    """
    flagged = entries.join(expired_ranges.withColumn("__expired_range", F.lit(True)), "range_id", "left")
    per_key = flagged.groupBy(address_key(F.col("address")).alias("__key")).agg(
        F.bool_or(F.col("__expired_range").isNull()).alias("__kept")
    )
    old_enough = listing.filter(F.col("mtime_micros") < F.lit(cutoff_micros)).select(
        F.col("key").alias("address"), "size"
    )
    candidates = (
        old_enough.join(staged, "address", "left_anti")
        .withColumn("__key", address_key(F.col("address")))
        # A hash join: the planner would otherwise broadcast the reduced ranges (its size
        # estimate is far below their million rows) or sort both sides.
        .join(per_key.hint("shuffle_hash"), "__key", "left")
    )
    return candidates.filter(~F.coalesce(F.col("__kept"), F.lit(False))).select(
        "address",
        "size",
        F.when(F.col("__kept").isNull(), F.lit(UNREFERENCED)).otherwise(F.lit(EXPIRED)).alias("reason"),
    )


def address_key(address: Column) -> Column:
    """The key the mark joins addresses on: their 64-bit hash (see garbage)."""
    return F.xxhash64(address)


def still_referenced(spark: Any, root: NamespaceRoot, run_location: str) -> DataFrame:
    """Addresses a fresh export protects: staged anywhere, or in a range some non-expired
    metarange names (commits made, branches moved or copies staged since the mark)."""
    entries, expired_ranges, staged = _export_views(spark, root, run_location)
    kept = entries.join(expired_ranges, "range_id", "left_anti").select("address")
    return kept.unionByName(staged)


def unprotected(report: DataFrame, protected: DataFrame) -> DataFrame:
    """The report's rows whose address shares its key (address_key) with no protected address.

    Joined on the key, as the mark joins, for the same reason: a long key is several times
    cheaper to shuffle and join than the address. A shared key can only keep an object: a
    reported address is let through only when no protected address has its key, and so when
    none is the address itself.
    """
    keys = protected.select(address_key(F.col("address")).alias("__key"))
    return (
        report.withColumn("__key", address_key(F.col("address")))
        # A hash join, as in garbage: the planner's size estimate of the protected side is far
        # below its rows.
        .join(keys.hint("shuffle_hash"), "__key", "left_anti")
        .drop("__key")
    )
