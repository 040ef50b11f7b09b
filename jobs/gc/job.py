"""A garbage-collection run of one repository: prepare, mark, report, sweep, summary.

Runs inside any SparkSession: `silt gc run` starts a local one, ``spark-submit
jobs/gc/job.py REPO`` (or ``python -m jobs.gc.job REPO``) uses the cluster's. The driver
talks to graveler over gRPC (PrepareGC), then everything proportional to the repository's
size happens in DataFrames on the executors; the driver only collects the per-reason totals.

Datasets go through Spark's Parquet reader and writer on a local or S3 namespace, and through
the block adapter on one no Hadoop file system here reaches (jobs/gc/location.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import functions as F

from jobs.entry_point import (
    add_job_options,
    exit_code_of_main,
    job_config,
    print_progress,
    repository_name,
    start_job,
)
from jobs.gc.adapter_parquet import read_dataset, write_dataset
from jobs.gc.listing import list_objects
from jobs.gc.location import NamespaceRoot, configure_s3a, namespace_root, write_small_file
from jobs.gc.mark import EXPIRED, UNREFERENCED, mark, still_referenced, unprotected
from jobs.gc.sweep import sweep
from silt.config import BlockstoreConfig
from silt.errors import InvalidArgument, NotFound
from silt.gc_grace import DEFAULT_GRACE, DEFAULT_GRACE_SECONDS, check_grace, parse_grace
from silt.gc_runs import GC_PREFIX, validate_run_id
from silt.graveler.v1 import graveler_pb2 as api

REPORT_SCHEMA = "address string, size bigint, reason string"


@dataclass
class GCOptions:
    dry_run: bool = False
    grace_seconds: int = DEFAULT_GRACE_SECONDS
    sweep_only: str | None = None  # a run id whose report to sweep again
    listing_shards: int = 8
    sweep_partitions: int = 8
    # Accept a grace shorter than the staging API's link validity plus a margin
    # (silt/gc_grace.py): for tests, and for a repository nobody links uploads into.
    unsafe_short_grace: bool = False

    def __post_init__(self) -> None:
        check_grace(self.grace_seconds, unsafe_short_grace=self.unsafe_short_grace)


@dataclass
class Summary:
    repository: str
    run_id: str
    dry_run: bool
    objects: dict[str, int] = field(default_factory=dict)  # per reason
    bytes: dict[str, int] = field(default_factory=dict)
    deleted: int = 0
    spared: int = 0  # reported, but referenced again by the time of the sweep (kept)
    seconds: dict[str, float] = field(default_factory=dict)  # per phase
    report_location: str = ""

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


Progress = Callable[[str], None]


def run_gc(
    spark: Any,
    graveler: Any,
    repository: str,
    blockstore: BlockstoreConfig,
    options: GCOptions,
    progress: Progress = lambda message: None,
) -> Summary:
    """One run; ``graveler`` is a GravelerService stub (silt.client's, with timeouts).
    GraceTooShort, before anything starts, for a grace a linked upload could outlive."""
    # Checked here too, whoever built the options: GCOptions' fields may be changed after it
    # checked them.
    check_grace(options.grace_seconds, unsafe_short_grace=options.unsafe_short_grace)
    if options.sweep_only:
        return _sweep_only(spark, graveler, repository, blockstore, options, progress)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    progress(f"preparing: graveler exports the commit graph and staged entries of {repository}")
    prepared = graveler.PrepareGC(api.PrepareGCRequest(repository=repository), timeout=3600)
    timings["prepare"] = time.perf_counter() - started
    progress(
        f"run {prepared.run_id}: {prepared.commits} commits ({prepared.expired_commits} expired), "
        f"{prepared.staged_entries} staged entries"
    )
    root = namespace_root(prepared.storage_namespace, blockstore)
    configure_s3a(spark, root, blockstore)
    started_micros = prepared.started.seconds * 1_000_000 + prepared.started.nanos // 1000
    cutoff = started_micros - options.grace_seconds * 1_000_000

    phase = time.perf_counter()
    progress("marking: listing the namespace and reading the committed layer")
    listing = list_objects(spark, root, blockstore, options.listing_shards)
    report_path = prepared.location + "report"
    _write(mark(spark, root, prepared.location, listing, cutoff), root, report_path)
    summary = _summarise(spark, root, repository, prepared.run_id, report_path, options.dry_run)
    timings["mark"] = time.perf_counter() - phase
    progress(f"marked {sum(summary.objects.values())} objects, report at {root.namespace}/{prepared.location}report")

    if not options.dry_run:
        timings["sweep"] = _sweep(spark, graveler, root, report_path, blockstore, options, summary, progress)
    summary.seconds = {**timings, **summary.seconds, "total": time.perf_counter() - started}
    _write_summary(spark, root, blockstore, summary)
    return summary


def _sweep_only(
    spark: Any,
    graveler: Any,
    repository: str,
    blockstore: BlockstoreConfig,
    options: GCOptions,
    progress: Progress,
) -> Summary:
    run_id = validate_run_id(options.sweep_only or "")
    started = time.perf_counter()
    # The sweep's fresh export comes first, and with it PrepareGC's refusals (a namespace that
    # overlaps another live repository's, or lies outside the allowed roots): a sweep-only run
    # stops there, as a full run does, before Spark reads or deletes anything.
    progress("re-checking: graveler exports its references again (and checks the namespace is the repository's own)")
    fresh = graveler.PrepareGC(api.PrepareGCRequest(repository=repository), timeout=3600)
    root = namespace_root(fresh.storage_namespace, blockstore)
    configure_s3a(spark, root, blockstore)
    report_path = f"{GC_PREFIX}{run_id}/report"
    try:
        summary = _summarise(spark, root, repository, run_id, report_path, dry_run=False)
    except Exception as exc:
        if isinstance(exc, NotFound) or "PATH_NOT_FOUND" in str(exc):
            raise InvalidArgument(f"no report of GC run {run_id!r} in {fresh.storage_namespace}") from None
        raise
    summary.seconds["sweep"] = _sweep(
        spark, graveler, root, report_path, blockstore, options, summary, progress, fresh=fresh
    )
    summary.seconds["total"] = time.perf_counter() - started
    _write_summary(spark, root, blockstore, summary)
    return summary


def _read(spark: Any, root: NamespaceRoot, path: str) -> Any:
    """A report (or its checked copy) the run wrote."""
    if root.through_adapter:
        return read_dataset(spark, root, path, REPORT_SCHEMA)
    return spark.read.parquet(root.child(path))


def _write(frame: Any, root: NamespaceRoot, path: str) -> None:
    if root.through_adapter:
        write_dataset(frame, root, path)
    else:
        frame.write.mode("overwrite").parquet(root.child(path))


def _summarise(
    spark: Any, root: NamespaceRoot, repository: str, run_id: str, report_path: str, dry_run: bool
) -> Summary:
    report_uri = root.child(report_path)
    totals = (
        _read(spark, root, report_path)
        .groupBy("reason")
        .agg(F.count(F.lit(1)).alias("objects"), F.sum("size").alias("bytes"))
        .collect()
    )
    summary = Summary(repository, run_id, dry_run, report_location=report_uri)
    for reason in (EXPIRED, UNREFERENCED):
        summary.objects[reason] = 0
        summary.bytes[reason] = 0
    for row in totals:
        summary.objects[row.reason] = int(row.objects)
        summary.bytes[row.reason] = int(row.bytes or 0)
    return summary


def _sweep(
    spark: Any,
    graveler: Any,
    root: NamespaceRoot,
    report_path: str,
    blockstore: BlockstoreConfig,
    options: GCOptions,
    summary: Summary,
    progress: Progress,
    fresh: Any = None,
) -> float:
    """Re-check the report against a fresh export, then delete; return the sweep's seconds.

    Between the mark and the sweep a copy may stage an entry pointing at an address of an
    expiring commit, a branch may be created at an expired commit, a new commit may name an
    old address: a second export, taken now (or just before, by a sweep-only run: ``fresh``),
    protects all of those (docs/design/gc.md). PrepareGC refuses an overlapping namespace,
    so no mode deletes without that check.
    """
    phase = time.perf_counter()
    if fresh is None:
        progress("re-checking the report against a fresh export of graveler's references")
        fresh = graveler.PrepareGC(api.PrepareGCRequest(repository=summary.repository), timeout=3600)
    checked_path = f"{report_path.rstrip('/')}-checked-{fresh.run_id}"
    protected = still_referenced(spark, root, fresh.location)
    _write(unprotected(_read(spark, root, report_path), protected), root, checked_path)
    to_delete = _read(spark, root, checked_path)
    summary.spared = sum(summary.objects.values()) - to_delete.count()
    summary.seconds["recheck"] = time.perf_counter() - phase
    phase = time.perf_counter()
    progress(f"sweeping {sum(summary.objects.values()) - summary.spared} objects ({summary.spared} spared)")
    result = sweep(to_delete, root.namespace, blockstore, options.sweep_partitions)
    summary.deleted = result["deleted"]
    return time.perf_counter() - phase


def _write_summary(spark: Any, root: NamespaceRoot, blockstore: BlockstoreConfig, summary: Summary) -> None:
    """Beside the report, for operators and for the next run's comparison."""
    key = f"{GC_PREFIX}{summary.run_id}/summary{'-dry-run' if summary.dry_run else ''}.json"
    write_small_file(spark, root, blockstore, key, summary.as_json().encode())


# --- entry point for spark-submit -------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="silt-gc", description="Garbage-collect one Silt repository.")
    parser.add_argument("repository")
    parser.add_argument("--dry-run", action="store_true", help="mark and report only")
    parser.add_argument(
        "--grace", default=DEFAULT_GRACE, help=f"skip objects modified this long before the run ({DEFAULT_GRACE})"
    )
    parser.add_argument(
        "--unsafe-short-grace",
        action="store_true",
        help="accept a grace shorter than the staging API's link validity plus a margin (silt/gc_grace.py)",
    )
    parser.add_argument("--sweep-only", metavar="RUN_ID", help="sweep an earlier run's report again")
    add_job_options(parser)
    args = parser.parse_args(argv)
    # Refused before anything starts: a run with too short a grace can delete a linked upload.
    options = GCOptions(
        dry_run=args.dry_run,
        grace_seconds=parse_grace(args.grace),
        sweep_only=args.sweep_only,
        unsafe_short_grace=args.unsafe_short_grace,
    )
    config = job_config(args.config)
    spark, graveler = start_job(args, config, "silt-gc")
    summary = run_gc(spark, graveler, repository_name(args.repository), config.blockstore, options, print_progress)
    print(summary.as_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(exit_code_of_main("silt-gc", main))
