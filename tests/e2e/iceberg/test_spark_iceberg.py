"""Spark 3.5 with Iceberg's Spark runtime (1.10) against the Iceberg REST catalog, on the e2e suite's session
stack: the catalog configured as lakeFS's documentation configures Spark for lakeFS (silt/iceberg_spark.py),
data files through the gateway's S3 with Hadoop's S3A. Spark runs in `.venv-iceberg-spark` (`make
iceberg-spark`: PyPI's Spark 3.5 beside the test venv's Spark 4), one process per test (tests/e2e/iceberg/
spark_sql.py); a JVM start is most of each test's time, so each test says much in one session.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from silt.iceberg_spark import catalog_settings
from silt.launcher import Stack
from silt.spark import S3AEndpoint
from tests.e2e.iceberg.conftest import CatalogFactory, api_call
from tests.e2e.iceberg.test_merges import appended_on_two_branches, ok
from tests.support.gateway_stack import stack_s3_client

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
SPARK_PYTHON = ROOT / ".venv-iceberg-spark" / "bin" / "python"
DRIVER = Path(__file__).with_name("spark_sql.py")
CATALOG = "lakefs"
# Under a minute on an idle 2-core machine; minutes where other JVMs share the cores (the Spark leg's).
SESSION_TIMEOUT_S = 540


def run_sql(stack: Stack, statements: list[str]) -> list[dict[str, Any]]:
    """Each statement's result from one Spark session: {"rows": [...]} or, for the last, {"error": [classes]}."""
    assert SPARK_PYTHON.is_file(), f"{SPARK_PYTHON} is missing: make iceberg-spark (make test installs it)"
    assert stack.admin is not None
    target = S3AEndpoint(
        stack.endpoints["gateway"], stack.admin.access_key_id, stack.admin.secret_access_key.get_secret_value()
    )
    request = {"conf": catalog_settings(CATALOG, target), "statements": statements}
    done = subprocess.run(
        [str(SPARK_PYTHON), str(DRIVER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert results, done.stderr[-4000:]
    return results


def rows(result: dict[str, Any]) -> list[list[Any]]:
    assert "rows" in result, result
    return [list(row) for row in result["rows"]]


def staged_keys(stack: Stack, repo: str, branch: str, prefix: str) -> list[str]:
    listed = api_call(stack, "GET", f"/repositories/{repo}/refs/{branch}/objects/ls?prefix={prefix}&amount=1000")
    assert listed.status == 200, listed.data
    return [entry["path"] for entry in listed.json()["results"]]


def test_create_insert_and_read_back(stack: Stack, repo: str) -> None:
    table = f"`{repo}`.main.db.events"
    results = run_sql(
        stack,
        [
            f"CREATE NAMESPACE `{repo}`.main.db",
            f"CREATE TABLE {table} (id BIGINT, name STRING) USING iceberg",
            f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            f"SELECT id, name FROM {table} ORDER BY id",
            f"SELECT count(*) FROM {table}.snapshots",
            f"SELECT file_path FROM {table}.files",
        ],
    )
    assert [r.get("error") for r in results] == [None] * 6, results[-1]
    assert rows(results[3]) == [[1, "a"], [2, "b"], [3, "c"]]
    assert rows(results[4]) == [[1]]
    # S3A wrote the files by their ref-neutral addresses (the catalog serves the table's location
    # so), and each is recorded: read by the key alone, through a branch name that never was.
    paths = [row[0] for row in rows(results[5])]
    assert paths and all(path.startswith(f"s3://{repo}/@main/db/events/data/") for path in paths), paths
    key = paths[0].removeprefix(f"s3://{repo}/@main/")
    assert stack_s3_client(stack).head_object(Bucket=repo, Key=f"@never-a-branch/{key}")["ContentLength"] > 0
    # Spark wrote the data and manifests on the branch through the gateway; the catalog staged the
    # pointer and the metadata beside them.
    keys = staged_keys(stack, repo, "main", "db/events/")
    assert "db/events/_iceberg_table.json" in keys
    assert any(k.startswith("db/events/data/") and k.endswith(".parquet") for k in keys), keys
    assert any(k.startswith("db/events/metadata/") and k.endswith(".avro") for k in keys), keys


@pytest.mark.nightly
@pytest.mark.timeout(2 * SESSION_TIMEOUT_S + 60)
def test_branch_isolation_merge_into_and_a_read_only_tag(stack: Stack, repo: str) -> None:
    first = run_sql(
        stack,
        [
            f"CREATE NAMESPACE `{repo}`.main.inventory",
            f"USE `{repo}`.main.inventory",
            "CREATE TABLE books (id BIGINT, title STRING, copies INT) USING iceberg",
            "INSERT INTO books VALUES (1, 'Dune', 3), (2, 'Emma', 1)",
        ],
    )
    assert [r.get("error") for r in first] == [None] * 4, first[-1]
    committed = api_call(stack, "POST", f"/repositories/{repo}/branches/main/commits", {"message": "books"})
    assert committed.status == 201, committed.data
    branched = api_call(stack, "POST", f"/repositories/{repo}/branches", {"name": "dev", "source": "main"})
    assert branched.status == 201, branched.data
    tagged = api_call(stack, "POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": "main"})
    assert tagged.status == 201, tagged.data

    second = run_sql(
        stack,
        [
            # lakeFS's form: USE <repository>.<branch>.<namespace>, then plain table names.
            f"USE `{repo}`.dev.inventory",
            "MERGE INTO books t USING (SELECT 2 AS id, 'Emma' AS title, 5 AS copies"
            " UNION ALL SELECT 3, 'Ulysses', 2) s ON t.id = s.id"
            " WHEN MATCHED THEN UPDATE SET t.copies = s.copies WHEN NOT MATCHED THEN INSERT *",
            "SELECT id, title, copies FROM books ORDER BY id",
            # main, by its full name from the same session, is as it was committed.
            f"SELECT id, copies FROM {CATALOG}.`{repo}`.main.inventory.books ORDER BY id",
            f"SELECT count(*) FROM `{repo}`.v1.inventory.books",
            # A tag is read-only (the catalog answers a commit there 403; test_catalog.py).
            f"INSERT INTO `{repo}`.v1.inventory.books VALUES (9, 'x', 1)",
        ],
    )
    assert rows(second[2]) == [[1, "Dune", 3], [2, "Emma", 5], [3, "Ulysses", 2]]
    assert rows(second[3]) == [[1, 3], [2, 1]]
    assert rows(second[4]) == [[2]]
    # Spark writes the data files before it asks the catalog to commit: the gateway refuses the first one.
    assert "com.amazonaws.services.s3.model.AmazonS3Exception" in second[5].get("error", []), second[5]


@pytest.mark.nightly
@pytest.mark.timeout(SESSION_TIMEOUT_S + 120)
def test_spark_reads_a_table_combined_by_merges(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    # pyiceberg appends on two branches; the second merge into main combines the table (docs/iceberg.md).
    appended_on_two_branches(stack, repo, catalog_for)
    ok(stack, "POST", f"/repositories/{repo}/refs/b1/merge/main", {}, 200)
    ok(stack, "POST", f"/repositories/{repo}/refs/b2/merge/main", {}, 200)

    table = f"`{repo}`.main.db.t"
    results = run_sql(
        stack,
        [
            f"SELECT count(*), sum(id) FROM {table}",
            f"SELECT count(*) FROM {table} WHERE id >= 2000",
            f"SELECT count(*) FROM {table}.snapshots",
        ],
    )
    # The base's 10 rows, b1's 100 and b2's 50, read through the manifests each branch wrote.
    expected_sum = sum(range(10)) + sum(range(1000, 1100)) + sum(range(2000, 2050))
    assert rows(results[0]) == [[160, expected_sum]]
    assert rows(results[1]) == [[50]]
    assert rows(results[2]) == [[3]]
