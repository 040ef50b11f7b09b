"""A GC run's export in lakeFS's formats, beside Silt's own (retention.py), for lakeFS's GC client.

lakeFS's Spark GC client asks the REST API to prepare a run and then reads, itself:

* the commits file, CSV with a header row ``commit_id,expired,metarange_id`` (as lakeFS's
  garbage_collection_manager writes it); the client keeps the rows whose ``expired`` is
  ``false``. lakeFS lists only the commits it keeps; here every commit is listed with its flag,
  which that reader takes the same way;
* the uncommitted addresses (staged, or compacted and not committed), a directory of Parquet
  files with ``physical_address`` (relative to the storage namespace; lakeFS leaves out
  entries outside it) and ``creation_date`` (Unix seconds).

Both land in the run's ``_silt/gc/<run id>/`` next to Silt's Parquet files. The client reads
Silt's committed ranges only through the REST API, so these two files are what it needs.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable

import pyarrow as pa

from engine.core.deadline import Deadline
from silt.block.adapter import BlockAdapter
from silt.graveler.v1 import model_pb2 as pb

COMMITS_CSV = "commits.csv"
COMMITS_HEADER = ("commit_id", "expired", "metarange_id")
UNCOMMITTED_DIR = "uncommitted/"
UNCOMMITTED_FILE = "staged.parquet"
UNCOMMITTED_SCHEMA = pa.schema(
    [
        pa.field("physical_address", pa.string(), nullable=False),
        pa.field("creation_date", pa.int64(), nullable=False),
    ]
)


def namespace_relative(address: str, namespace: str) -> str | None:
    """An entry's physical address as a key of the namespace, or None when it lies outside
    (an imported object, never collected)."""
    if "://" not in address:
        return address or None
    root = namespace.rstrip("/") + "/"
    if address.startswith(root) and len(address) > len(root):
        return address[len(root) :]
    return None


def write_commits_csv(
    adapter: BlockAdapter,
    namespace: str,
    key: str,
    commits: Iterable[pb.Commit],
    expired: set[str],
    deadline: Deadline,
    what: str,
) -> None:
    """The commits file, through a temporary file (a repository may have millions of commits)."""
    with tempfile.NamedTemporaryFile("w", prefix="silt-gc-", suffix=".csv", delete=False, newline="") as handle:
        path = handle.name
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COMMITS_HEADER)
        for n, commit in enumerate(commits):
            if n % 10_000 == 0:
                deadline.check(what)
            writer.writerow((commit.id, "true" if commit.id in expired else "false", commit.metarange_id))
    try:
        with open(path, "rb") as stream:
            adapter.put(namespace, key, stream, os.path.getsize(path))
    finally:
        os.unlink(path)


def uncommitted_batch(addresses: list[str], created: list[int]) -> pa.RecordBatch:
    return pa.record_batch([pa.array(addresses, pa.string()), pa.array(created, pa.int64())], schema=UNCOMMITTED_SCHEMA)
