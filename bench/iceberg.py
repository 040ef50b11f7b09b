"""`make bench-iceberg`: Silt's Iceberg REST catalog against pyiceberg's SQL catalog on SQLite, through
pyiceberg's public API, one JSON object per line.

Both catalogs take the same work: one table, then COMMITS commits to it, each followed by a
`load_table` of it. A commit changes a table property (a new value each time), so each one is a
catalog commit only, no data file: a new metadata file and the move of the table's pointer (Silt:
the metadata object and a conditional staging of the pointer on the branch, through the gateway's
process; SQLite: pyiceberg writes the metadata file to local disk and updates its row). The metadata
file stays the same size from the first commit to the last, so a `load_table` that slows down as
commits pile up is the catalog's doing (the branch's staging growing by a metadata object and a
pointer version per commit), not the table's (but for its metadata log, which grows to Iceberg's
default 100 entries over the first 100 commits, alike in both): the first and last 100 loads'
medians say whether it stays flat (target: the last 100 within 1.5 times the first 100), and
SQLite's same figure says how much of a change is the client's or the machine's. The two catalogs
take turns, commit by commit, so that a shared machine's load weighs on both alike.

Silt runs as processes on the local blockstore (tests/support/gateway_stack.py); the client signs in
with the admin's access key as an OAuth2 client credential, as the catalog's manual says.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from bench.report import emit
from tests.support.gateway_stack import GatewayStack, gateway_stack

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)
EDGE = 100
FLAT_TARGET = 1.5


def silt_catalog(gw: GatewayStack) -> tuple[Catalog, tuple[str, ...]]:
    repo = f"bench-iceberg-{secrets.token_hex(3)}"
    gw.client().create_bucket(Bucket=repo)
    key, secret = gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value()
    catalog = load_catalog(
        "silt",
        type="rest",
        uri=f"{gw.endpoint}/iceberg/api",
        credential=f"{key}:{secret}",
        **{"oauth2-server-uri": f"{gw.endpoint}/iceberg/api/v1/oauth/tokens", "warehouse": f"{repo}.main"},
    )
    return catalog, ("bench",)


def sqlite_catalog(workdir: Path) -> tuple[Catalog, tuple[str, ...]]:
    warehouse = workdir / "warehouse"
    warehouse.mkdir()
    catalog = load_catalog(
        "sqlite", type="sql", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=warehouse.as_uri()
    )
    return catalog, ("bench",)


class Timings:
    """One catalog's table and each of its commits' and loads' milliseconds, in order."""

    def __init__(self, catalog: Catalog, namespace: tuple[str, ...]) -> None:
        catalog.create_namespace(namespace)
        self.catalog = catalog
        self.name = (*namespace, "events")
        self.table = catalog.create_table(self.name, SCHEMA)
        self.commit_ms: list[float] = []
        self.load_ms: list[float] = []

    def step(self, i: int) -> None:
        start = time.perf_counter()
        self.table.transaction().set_properties(commit=str(i)).commit_transaction()
        self.commit_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        self.catalog.load_table(self.name)
        self.load_ms.append((time.perf_counter() - start) * 1000)

    def check(self, commits: int) -> None:
        loaded = self.catalog.load_table(self.name)
        assert loaded.properties.get("commit") == str(commits - 1), loaded.properties


def report(commits: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as tmp:
        workdir = Path(tmp)
        with gateway_stack(workdir / "silt") as gw:
            silt, sqlite = Timings(*silt_catalog(gw)), Timings(*sqlite_catalog(workdir))
            # The two take turns, so that a shared machine's load weighs on both alike.
            for i in range(commits):
                silt.step(i)
                sqlite.step(i)
            silt.check(commits)
            sqlite.check(commits)
    p50 = statistics.median
    emit("iceberg_load_table_p50_ms", p50(silt.load_ms), "ms", None)
    emit("iceberg_load_table_p50_ms_sqlite", p50(sqlite.load_ms), "ms", None)
    emit("iceberg_load_table_p50_ratio_to_sqlite", p50(silt.load_ms) / p50(sqlite.load_ms), "x", None, digits=2)
    emit("iceberg_commit_p50_ms", p50(silt.commit_ms), "ms", None)
    emit("iceberg_commit_p50_ms_sqlite", p50(sqlite.commit_ms), "ms", None)
    emit("iceberg_commit_p50_ratio_to_sqlite", p50(silt.commit_ms) / p50(sqlite.commit_ms), "x", None, digits=2)
    edge = min(EDGE, max(1, commits // 2))
    for label, loads in (("", silt.load_ms), ("_sqlite", sqlite.load_ms)):
        first, last = p50(loads[:edge]), p50(loads[-edge:])
        emit(f"iceberg_load_table_p50_ms_first_{edge}{label}", first, "ms", None)
        emit(f"iceberg_load_table_p50_ms_last_{edge}{label}", last, "ms", None)
        emit(
            f"iceberg_load_table_last_to_first_{edge}{label}",
            last / first,
            "x",
            FLAT_TARGET if not label else None,
            digits=2,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000, help="commits to the one table (default 1,000)")
    args = parser.parse_args()
    report(args.commits)


if __name__ == "__main__":
    main()
