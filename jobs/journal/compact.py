"""Compacting a repository's shipped journal: old hours rewritten into fewer files, keeping
only the last change of each (partition, key) (docs/design/journal.md, "Shipping").

Rebuild only needs each key's final state, so among the compacted records a change that a
later change of the same key supersedes is dropped, and a record left with no change goes.
Records shipped twice (a shipper that crashed before deleting its rows) collapse into one.

The output goes under the oldest compacted hour, ``hour=<H>/compacted-<run id>/part-*.parquet``:
every record in it is at or after that hour's start, which is all rebuild's ordering needs
(silt/journal/rebuild.py). The inputs are deleted only after Spark committed the output; a
crash in between leaves both, and rebuild applies each record once whichever copy it reads.

Batches are signed (silt/journal/mac.py): the job checks every input's MAC before it reads
any, refuses the run if one is missing or wrong (unless told to accept unsigned inputs, for a
journal shipped before batches were signed), signs each output file the same way, and deletes
the inputs' MACs with them. So rebuild accepts the compacted journal as it accepts a shipped one.

On a namespace no Hadoop file system here reaches (jobs/gc/location.py), the job lists,
verifies, reads, writes, signs and deletes through the block adapter instead, the same way.

Runs inside any SparkSession: ``python -m jobs.journal.compact NAMESPACE`` starts a local one.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from jobs.gc.adapter_parquet import read_files, write_dataset
from jobs.gc.location import NamespaceRoot, configure_s3a, namespace_root
from silt.block.adapter import BlockAdapter
from silt.config import BlockstoreConfig
from silt.errors import InvalidArgument, NotFound
from silt.journal.batch import BATCH_PREFIX, MAX_BATCH_BYTES, SCHEMA
from silt.journal.mac import mac_key_of, matches, sign, signer

ORDER = ["logical_timestamp", "writer_id", "sequence"]
RECORD_COLUMNS = [
    "logical_timestamp",
    "writer_id",
    "sequence",
    "client_id",
    "repository",
    "repository_partition",
    "event_type",
    "source_partition",
]
# Rows per output file: rebuild reads a file whole.
RECORDS_PER_FILE = 200_000


@dataclass
class CompactionSummary:
    hours: int = 0
    files_in: int = 0
    records_in: int = 0
    changes_in: int = 0
    records_out: int = 0
    changes_out: int = 0
    unsigned_in: int = 0
    output: str = ""
    seconds: float = 0.0


def compact_journal(
    spark: Any,
    namespace: str,
    blockstore: BlockstoreConfig,
    older_than_hours: int,
    hmac_key: bytes,
    accept_unsigned: bool = False,
) -> CompactionSummary:
    """Compact every hour folder that started more than older_than_hours ago."""
    started = time.monotonic()
    root = namespace_root(namespace, blockstore)
    if root.through_adapter:
        return _compact_through_adapter(spark, root, older_than_hours, hmac_key, accept_unsigned, started)
    configure_s3a(spark, root, blockstore)
    base = root.child(BATCH_PREFIX.rstrip("/"))
    cutoff = datetime.now(UTC).timestamp() - older_than_hours * 3600
    fs, jvm_path = _filesystem(spark, base)
    hours = sorted(
        status.getPath().getName()[len("hour=") :]
        for status in (fs.globStatus(jvm_path(f"{base}/hour=*")) or [])
        if status.isDirectory()
    )
    old = [hour for hour in hours if _hour_start(hour) < cutoff]
    summary = CompactionSummary(hours=len(old))
    batches = [
        (f"{BATCH_PREFIX}hour={hour}/{relative}", path)
        for hour in old
        for relative, path in _parquet_files(fs, jvm_path(f"{base}/hour={hour}"))
    ]
    inputs = [path for _, path in batches]
    summary.files_in = len(inputs)
    if len(inputs) < 2:
        summary.seconds = time.monotonic() - started
        return summary  # nothing to gain
    for name, path in batches:
        if not _verified(fs, jvm_path, name, path, hmac_key):
            if not accept_unsigned:
                raise InvalidArgument(f"journal batch {name} has no valid MAC: not compacted (nothing was changed)")
            summary.unsigned_in += 1

    records = spark.read.parquet(*inputs)
    compacted = _compacted(records, summary)
    output = f"{base}/hour={old[0]}/compacted-{uuid.uuid4().hex}"
    compacted.write.option("maxRecordsPerFile", RECORDS_PER_FILE).parquet(output)

    written = spark.read.parquet(output)
    summary.records_out = written.count()
    summary.changes_out = written.select(F.explode("changes")).count()
    summary.output = output
    folder = f"{BATCH_PREFIX}hour={old[0]}/{output.rsplit('/', 1)[1]}"
    for relative, path in _parquet_files(fs, jvm_path(output)):
        signed = sign(hmac_key, f"{folder}/{relative}", _read(fs, jvm_path(path)))
        _write(fs, jvm_path(_mac_path(path)), signed)
    # Only now, with the output committed and signed, do the inputs go, each with its MAC.
    for _, path in batches:
        fs.delete(jvm_path(path), False)
        fs.delete(jvm_path(_mac_path(path)), False)
    summary.seconds = time.monotonic() - started
    return summary


def _compacted(records: Any, summary: CompactionSummary) -> Any:
    """The records with only each key's last change, in order; counts the input into summary."""
    changes = records.select(*RECORD_COLUMNS, F.posexplode("changes").alias("index", "change"))
    summary.records_in = records.count()
    summary.changes_in = changes.count()
    key = Window.partitionBy("change.partition", "change.key").orderBy(*[F.col(c).desc() for c in ORDER])
    last = changes.withColumn("rank", F.row_number().over(key)).where(F.col("rank") == 1)
    compacted = last.groupBy(*RECORD_COLUMNS).agg(
        F.sort_array(F.collect_list(F.struct("index", "change"))).alias("indexed")
    )
    return compacted.select(*RECORD_COLUMNS, F.col("indexed.change").alias("changes")).orderBy(*ORDER)


def _compact_through_adapter(
    spark: Any, root: NamespaceRoot, older_than_hours: int, hmac_key: bytes, accept_unsigned: bool, started: float
) -> CompactionSummary:
    """compact_journal on a namespace reached through the block adapter: the same steps."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from silt.block import open_adapter

    assert root.blockstore is not None
    adapter = open_adapter(root.blockstore)
    cutoff = datetime.now(UTC).timestamp() - older_than_hours * 3600
    by_hour: dict[str, list[str]] = {}
    for item in adapter.list_objects(root.namespace, BATCH_PREFIX + "hour="):
        folder, _, relative = item.key[len(BATCH_PREFIX) :].partition("/")
        if not relative:
            continue
        hour = by_hour.setdefault(folder[len("hour=") :], [])
        # Spark's bookkeeping (_SUCCESS) and batches' MACs are never a batch.
        if relative.endswith(".parquet") and not any(part[:1] in "._" for part in relative.split("/")):
            hour.append(item.key)
    old = sorted(hour for hour in by_hour if _hour_start(hour) < cutoff)
    summary = CompactionSummary(hours=len(old))
    inputs = sorted(key for hour in old for key in by_hour[hour])
    summary.files_in = len(inputs)
    if len(inputs) < 2:
        summary.seconds = time.monotonic() - started
        return summary  # nothing to gain
    for key in inputs:
        if not _verified_object(adapter, root.namespace, key, hmac_key):
            if not accept_unsigned:
                raise InvalidArgument(f"journal batch {key} has no valid MAC: not compacted (nothing was changed)")
            summary.unsigned_in += 1

    schema = from_arrow_schema(SCHEMA)
    compacted = _compacted(read_files(spark, root, inputs, schema), summary)
    output = f"{BATCH_PREFIX}hour={old[0]}/compacted-{uuid.uuid4().hex}"
    files = write_dataset(compacted, root, output, max_records_per_file=RECORDS_PER_FILE)
    written = read_files(spark, root, [file.key for file in files], schema)
    summary.records_out = written.count()
    summary.changes_out = written.select(F.explode("changes")).count()
    summary.output = root.child(output)
    for file in files:
        signed = sign(hmac_key, file.key, _read_object(adapter, root.namespace, file.key))
        adapter.put(root.namespace, mac_key_of(file.key), io.BytesIO(signed), len(signed))
    # Only now, with the output written and signed, do the inputs go, each with its MAC.
    for key in inputs:
        adapter.delete(root.namespace, key)
        adapter.delete(root.namespace, mac_key_of(key))
    summary.seconds = time.monotonic() - started
    return summary


def _verified_object(adapter: BlockAdapter, namespace: str, key: str, hmac_key: bytes) -> bool:
    try:
        mac = _read_object(adapter, namespace, mac_key_of(key), limit=1024)
    except NotFound:
        return False
    digest = signer(hmac_key, key)
    digest.update(_read_object(adapter, namespace, key))
    return matches(digest, mac)


def _read_object(adapter: BlockAdapter, namespace: str, key: str, limit: int = MAX_BATCH_BYTES) -> bytes:
    size = adapter.stat(namespace, key).size
    if size > limit:
        raise InvalidArgument(f"journal file {namespace}/{key} is above the {limit}-byte limit")
    with adapter.get(namespace, key) as stream:
        return stream.read()


def _filesystem(spark: Any, base: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()

    def jvm_path(uri: str) -> Any:
        return jvm.org.apache.hadoop.fs.Path(uri)

    return jvm_path(base).getFileSystem(conf), jvm_path


def _parquet_files(fs: Any, folder: Any) -> list[tuple[str, str]]:
    """(path below folder, full path) of each batch under folder."""
    found = []
    files = fs.listFiles(folder, True)
    while files.hasNext():
        path = files.next().getPath()
        relative = path.toString()[len(folder.toString()) :].lstrip("/")
        # Spark's own bookkeeping (_temporary, _SUCCESS, .crc) and batches' MACs are never a batch.
        if path.getName().endswith(".parquet") and not any(part[:1] in "._" for part in relative.split("/") if part):
            found.append((relative, path.toString()))
    return sorted(found)


def _mac_path(path: str) -> str:
    folder, _, name = path.rpartition("/")
    return f"{folder}/{mac_key_of(name)}"


def _verified(fs: Any, jvm_path: Any, key: str, path: str, hmac_key: bytes) -> bool:
    mac_path = jvm_path(_mac_path(path))
    if not fs.exists(mac_path):
        return False
    digest = signer(hmac_key, key)
    digest.update(_read(fs, jvm_path(path)))
    return matches(digest, _read(fs, mac_path, limit=1024))


def _read(fs: Any, path: Any, limit: int = MAX_BATCH_BYTES) -> bytes:
    if fs.getFileStatus(path).getLen() > limit:
        raise InvalidArgument(f"journal file {path.toString()} is above the {limit}-byte limit")
    stream = fs.open(path)
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def _write(fs: Any, path: Any, data: bytes) -> None:
    stream = fs.create(path, True)
    try:
        stream.write(data)
    finally:
        stream.close()


def _hour_start(hour: str) -> float:
    return datetime.strptime(hour, "%Y-%m-%dT%H").replace(tzinfo=UTC).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="silt-journal-compact", description="Compact a repository's shipped journal.")
    parser.add_argument("namespace", help="the repository's storage namespace, e.g. s3://bucket/repo")
    parser.add_argument("--older-than-hours", type=int, default=24, help="compact hours that started this long ago")
    parser.add_argument("--config", help="Silt configuration file (its blockstore section and the journal's key)")
    parser.add_argument(
        "--accept-unsigned", action="store_true", help="compact batches without a valid MAC too (and sign the output)"
    )
    args = parser.parse_args(argv)
    from silt.config import load_config
    from silt.journal.mac import journal_key
    from silt.spark import local_session

    config = load_config(args.config)
    key = journal_key(config)
    if key is None:
        parser.error("no journal key: set graveler.journal.hmac_key (or auth.encrypt_secret_key)")
    spark = local_session(None, master="local[*]", app_name="silt-journal-compact")
    summary = compact_journal(
        spark, args.namespace, config.blockstore, args.older_than_hours, key, accept_unsigned=args.accept_unsigned
    )
    print(json.dumps(asdict(summary), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
