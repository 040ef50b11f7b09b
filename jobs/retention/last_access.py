"""A last-access run of one branch: prepare, find what the rules expire, report, expire, summary.

Runs inside any SparkSession: `silt gc expire` starts a local one, ``spark-submit
jobs/retention/last_access.py REPO BRANCH`` (or ``python -m jobs.retention.last_access``)
uses the cluster's. The driver talks to graveler over gRPC (PrepareLastAccess, then
ExpireEntries batch by batch); the join of listing and history happens in DataFrames, and the
driver streams the report's rows (``toLocalIterator``), one batch in memory at a time.

A dry run writes the report and prints its first paths; it changes nothing. A real run
deletes each batch from the branch in a commit by the system user, whose message names the
rule; the bytes stay until `silt gc run` frees them like any other deleted object's.

The export and the report go through Spark's Parquet reader and writer on a local or S3
namespace, and through the block adapter on one no Hadoop file system here reaches
(jobs/gc/location.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
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
from jobs.gc.location import configure_s3a, namespace_root, write_small_file
from jobs.retention.expired import expired, last_access
from silt.config import BlockstoreConfig
from silt.errors import InvalidArgument
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

MAX_BATCH = 1000  # graveler's limit per ExpireEntries call
MAX_LISTED_PATHS = 1000  # paths a summary shows; the report holds them all
# The columns read of graveler's export, and the report's.
LISTING_SCHEMA = "key string, physical_address string, size bigint, last_modified_us bigint"
EVENTS_SCHEMA = "key string, timestamp_us bigint"
REPORT_SCHEMA = "key string, physical_address string, size bigint, last_access_us bigint, rule int"


@dataclass
class LastAccessOptions:
    dry_run: bool = False
    batch_size: int = MAX_BATCH
    # graveler.history.retention_days as this job's configuration says: a rule longer than the
    # history keeps events cannot see reads older than that, and is warned about.
    history_retention_days: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise InvalidArgument(f"batch size must be 1..{MAX_BATCH}, got {self.batch_size}")


@dataclass
class RuleTotals:
    rule: str  # the rule in words
    objects: int = 0
    bytes: int = 0
    expired: int = 0
    spared: int = 0  # read, written or deleted since the export: kept


@dataclass
class Summary:
    repository: str
    branch: str
    run_id: str
    dry_run: bool
    entries: int = 0  # listed under the rules' prefixes
    events: int = 0  # read and write events exported
    rules: list[RuleTotals] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # the first expired paths, in key order
    paths_truncated: bool = False
    report_location: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


Progress = Callable[[str], None]


def describe(rule: pb.LastAccessRule) -> str:
    return f"{rule.days} days under {', '.join(repr(p) for p in rule.prefixes)}"


def _history_warnings(rules: list[pb.LastAccessRule], history_days: float | None) -> list[str]:
    if history_days is None:
        return []
    return [
        f"rule {number} ({describe(rule)}) is longer than the history's retention ({history_days:g} days): "
        "a read older than that no longer keeps an object"
        for number, rule in enumerate(rules, 1)
        if rule.days > history_days
    ]


def run_last_access(
    spark: Any,
    graveler: Any,
    repository: str,
    branch: str,
    blockstore: BlockstoreConfig,
    options: LastAccessOptions,
    progress: Progress = lambda message: None,
) -> Summary:
    """One run; ``graveler`` is a GravelerService stub (silt.client's, with timeouts)."""
    started = time.perf_counter()
    progress(f"preparing: graveler exports the listing and history of {repository}/{branch}")
    request = api.PrepareLastAccessRequest(repository=repository, branch=branch)
    prepared = graveler.PrepareLastAccess(request, timeout=3600)
    summary = Summary(repository, branch, prepared.run_id, options.dry_run, prepared.entries, prepared.events)
    summary.rules = [RuleTotals(describe(rule)) for rule in prepared.rules]
    summary.warnings = _history_warnings(list(prepared.rules), options.history_retention_days)
    for warning in summary.warnings:
        progress(f"warning: {warning}")
    summary.seconds["prepare"] = time.perf_counter() - started
    progress(f"run {prepared.run_id}: {prepared.entries} objects under the rules, {prepared.events} events")

    phase = time.perf_counter()
    root = namespace_root(prepared.storage_namespace, blockstore)
    configure_s3a(spark, root, blockstore)
    if root.through_adapter:
        listing = read_dataset(spark, root, prepared.listing_location, LISTING_SCHEMA)
        events = read_dataset(spark, root, prepared.events_location, EVENTS_SCHEMA)
    else:
        listing = spark.read.parquet(root.child(prepared.listing_location))
        events = spark.read.parquet(root.child(prepared.events_location))
    started_us = prepared.started.seconds * 1_000_000 + prepared.started.nanos // 1000
    report_path = prepared.location + "expired"
    report_uri = root.child(report_path)
    found = expired(last_access(listing, events), list(prepared.rules), started_us)
    columns = found.select("key", "physical_address", "size", "last_access_us", "rule")
    if root.through_adapter:
        write_dataset(columns, root, report_path)
        report = read_dataset(spark, root, report_path, REPORT_SCHEMA)
    else:
        columns.write.mode("overwrite").parquet(report_uri)
        report = spark.read.parquet(report_uri)
    summary.report_location = report_uri
    for row in report.groupBy("rule").agg(F.count(F.lit(1)).alias("objects"), F.sum("size").alias("bytes")).collect():
        totals = summary.rules[row.rule - 1]
        totals.objects, totals.bytes = int(row.objects), int(row.bytes or 0)
    first = report.select("key").orderBy("key").limit(MAX_LISTED_PATHS + 1).collect()
    summary.paths = [row.key for row in first[:MAX_LISTED_PATHS]]
    summary.paths_truncated = len(first) > MAX_LISTED_PATHS
    summary.seconds["find"] = time.perf_counter() - phase
    progress(f"found {sum(r.objects for r in summary.rules)} expired objects, report at {report_uri}")

    if not options.dry_run:
        phase = time.perf_counter()
        _expire(graveler, prepared, report, options.batch_size, summary, progress)
        summary.seconds["expire"] = time.perf_counter() - phase
    summary.seconds["total"] = time.perf_counter() - started
    key = f"{prepared.location}summary{'-dry-run' if summary.dry_run else ''}.json"
    write_small_file(spark, root, blockstore, key, summary.as_json().encode())
    return summary


def _batches(rows: Iterator[Any], size: int) -> Iterator[tuple[int, list[Any]]]:
    """Rows sorted by rule, cut into batches of one rule each."""
    batch: list[Any] = []
    for row in rows:
        if batch and (row.rule != batch[0].rule or len(batch) >= size):
            yield batch[0].rule, batch
            batch = []
        batch.append(row)
    if batch:
        yield batch[0].rule, batch


def _expire(graveler: Any, prepared: Any, report: Any, size: int, summary: Summary, progress: Progress) -> None:
    rows = report.select("rule", "key", "physical_address").orderBy("rule", "key").toLocalIterator()
    for number, batch in _batches(rows, size):
        request = api.ExpireEntriesRequest(
            repository=summary.repository,
            branch=summary.branch,
            rule=prepared.rules[number - 1],
            entries=[api.ExpiredEntry(key=r.key, physical_address=r.physical_address) for r in batch],
            since=prepared.started,
            run_id=prepared.run_id,
        )
        done = graveler.ExpireEntries(request, timeout=600)
        totals = summary.rules[number - 1]
        totals.expired += done.expired
        totals.spared += done.spared
        if done.commit_id:
            summary.commits.append(done.commit_id)
        progress(f"rule {number}: expired {done.expired}, spared {done.spared} (commit {done.commit_id or '-'})")


# --- entry point for spark-submit -------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="silt-last-access", description="Expire a branch's objects by last access.")
    parser.add_argument("repository")
    parser.add_argument("branch")
    parser.add_argument("--dry-run", action="store_true", help="report only; change nothing")
    parser.add_argument("--batch-size", type=int, default=MAX_BATCH, help=f"objects per commit (1..{MAX_BATCH})")
    add_job_options(parser)
    args = parser.parse_args(argv)
    config = job_config(args.config)
    options = LastAccessOptions(
        dry_run=args.dry_run,
        batch_size=args.batch_size,
        history_retention_days=config.graveler.history.retention_days,
    )
    spark, graveler = start_job(args, config, "silt-last-access")
    summary = run_last_access(
        spark, graveler, repository_name(args.repository), args.branch, config.blockstore, options, print_progress
    )
    print(summary.as_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(exit_code_of_main("silt-last-access", main))
