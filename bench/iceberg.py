"""`make bench-iceberg`: Silt's Iceberg REST catalog against pyiceberg's SQL catalog on SQLite, through
pyiceberg's public API, one JSON object per line.

Both catalogs take the same work: one table, then COMMITS commits to it, each followed by a
`load_table` of it. A commit changes a table property (a new value each time), so each one is a
catalog commit only, no data file: a new metadata file and the move of the table's pointer (Silt:
the metadata object and a conditional staging of the pointer on the branch, through the gateway's
process; SQLite: pyiceberg writes the metadata file to local disk and updates its row). The metadata
file stays the same size from the first commit to the last, so a `load_table` that slows down as
commits pile up is the catalog's doing (the branch's staging growing by a metadata object and a
pointer version per commit), not the table's: the first and last 100 loads' medians say whether it
stays flat (target: the last 100 within 1.5 times the first 100).

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


def run(catalog: Catalog, namespace: tuple[str, ...], commits: int) -> tuple[list[float], list[float]]:
    """Each commit's and each load_table's milliseconds, in order."""
    catalog.create_namespace(namespace)
    name = (*namespace, "events")
    table = catalog.create_table(name, SCHEMA)
    commit_ms: list[float] = []
    load_ms: list[float] = []
    for i in range(commits):
        start = time.perf_counter()
        table.transaction().set_properties(commit=str(i)).commit_transaction()
        commit_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        catalog.load_table(name)
        load_ms.append((time.perf_counter() - start) * 1000)
    loaded = catalog.load_table(name)
    assert loaded.properties.get("commit") == str(commits - 1), loaded.properties
    return commit_ms, load_ms


def report(commits: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as tmp:
        workdir = Path(tmp)
        sql_commit, sql_load = run(*sqlite_catalog(workdir), commits=commits)
        with gateway_stack(workdir / "silt") as gw:
            silt_commit, silt_load = run(*silt_catalog(gw), commits=commits)
    p50 = statistics.median
    emit("iceberg_load_table_p50_ms", p50(silt_load), "ms", None)
    emit("iceberg_load_table_p50_ms_sqlite", p50(sql_load), "ms", None)
    emit("iceberg_load_table_p50_ratio_to_sqlite", p50(silt_load) / p50(sql_load), "x", None, digits=2)
    emit("iceberg_commit_p50_ms", p50(silt_commit), "ms", None)
    emit("iceberg_commit_p50_ms_sqlite", p50(sql_commit), "ms", None)
    emit("iceberg_commit_p50_ratio_to_sqlite", p50(silt_commit) / p50(sql_commit), "x", None, digits=2)
    edge = min(EDGE, max(1, commits // 2))
    first, last = p50(silt_load[:edge]), p50(silt_load[-edge:])
    emit(f"iceberg_load_table_p50_ms_first_{edge}", first, "ms", None)
    emit(f"iceberg_load_table_p50_ms_last_{edge}", last, "ms", None)
    emit(f"iceberg_load_table_last_to_first_{edge}", last / first, "x", FLAT_TARGET, digits=2)
    emit(
        f"iceberg_load_table_last_to_first_{edge}_sqlite",
        p50(sql_load[-edge:]) / p50(sql_load[:edge]),
        "x",
        None,
        digits=2,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000, help="commits to the one table (default 1,000)")
    args = parser.parse_args()
    report(args.commits)


if __name__ == "__main__":
    main()
