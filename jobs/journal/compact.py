"""Compacting a repository's shipped journal: old hours rewritten into fewer files, keeping
only the last change of each (partition, key) (docs/design/journal.md, "Shipping").

Rebuild only needs each key's final state, so among the compacted records a change that a
later change of the same key supersedes is dropped, and a record left with no change goes.
Records shipped twice (a shipper that crashed before deleting its rows) collapse into one.

The output goes under the oldest compacted hour, ``hour=<H>/compacted-<run id>/part-*.parquet``:
every record in it is at or after that hour's start, which is all rebuild's ordering needs
(silt/journal/rebuild.py). The inputs are deleted only after Spark committed the output; a
crash in between leaves both, and rebuild applies each record once whichever copy it reads.

Runs inside any SparkSession: ``python -m jobs.journal.compact NAMESPACE`` starts a local one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from jobs.gc.location import configure_s3a, namespace_root
from silt.config import BlockstoreConfig
from silt.journal.batch import BATCH_PREFIX

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
    output: str = ""
    seconds: float = 0.0


def compact_journal(
    spark: Any, namespace: str, blockstore: BlockstoreConfig, older_than_hours: int
) -> CompactionSummary:
    """Compact every hour folder that started more than older_than_hours ago."""
    started = time.monotonic()
    root = namespace_root(namespace, blockstore)
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
    inputs = [path for hour in old for path in _parquet_files(fs, jvm_path(f"{base}/hour={hour}"))]
    summary.files_in = len(inputs)
    if len(inputs) < 2:
        summary.seconds = time.monotonic() - started
        return summary  # nothing to gain

    records = spark.read.parquet(*inputs)
    changes = records.select(*RECORD_COLUMNS, F.posexplode("changes").alias("index", "change"))
    summary.records_in = records.count()
    summary.changes_in = changes.count()
    key = Window.partitionBy("change.partition", "change.key").orderBy(*[F.col(c).desc() for c in ORDER])
    last = changes.withColumn("rank", F.row_number().over(key)).where(F.col("rank") == 1)
    compacted = last.groupBy(*RECORD_COLUMNS).agg(
        F.sort_array(F.collect_list(F.struct("index", "change"))).alias("indexed")
    )
    compacted = compacted.select(*RECORD_COLUMNS, F.col("indexed.change").alias("changes")).orderBy(*ORDER)
    output = f"{base}/hour={old[0]}/compacted-{uuid.uuid4().hex}"
    compacted.write.option("maxRecordsPerFile", RECORDS_PER_FILE).parquet(output)

    written = spark.read.parquet(output)
    summary.records_out = written.count()
    summary.changes_out = written.select(F.explode("changes")).count()
    summary.output = output
    # Only now, with the output committed, do the inputs go.
    for path in inputs:
        fs.delete(jvm_path(path), False)
    summary.seconds = time.monotonic() - started
    return summary


def _filesystem(spark: Any, base: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()

    def jvm_path(uri: str) -> Any:
        return jvm.org.apache.hadoop.fs.Path(uri)

    return jvm_path(base).getFileSystem(conf), jvm_path


def _parquet_files(fs: Any, folder: Any) -> list[str]:
    found = []
    files = fs.listFiles(folder, True)
    while files.hasNext():
        path = files.next().getPath()
        relative = path.toString()[len(folder.toString()) :]
        # Spark's own bookkeeping (_temporary, _SUCCESS, .crc) is never a batch.
        if path.getName().endswith(".parquet") and not any(part[:1] in "._" for part in relative.split("/") if part):
            found.append(path.toString())
    return sorted(found)


def _hour_start(hour: str) -> float:
    return datetime.strptime(hour, "%Y-%m-%dT%H").replace(tzinfo=UTC).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="silt-journal-compact", description="Compact a repository's shipped journal.")
    parser.add_argument("namespace", help="the repository's storage namespace, e.g. s3://bucket/repo")
    parser.add_argument("--older-than-hours", type=int, default=24, help="compact hours that started this long ago")
    parser.add_argument("--config", help="Silt configuration file (its blockstore section)")
    args = parser.parse_args(argv)
    from silt.config import load_config
    from silt.spark import local_session

    config = load_config(args.config)
    spark = local_session(None, master="local[*]", app_name="silt-journal-compact")
    summary = compact_journal(spark, args.namespace, config.blockstore, args.older_than_hours)
    print(json.dumps(asdict(summary), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
