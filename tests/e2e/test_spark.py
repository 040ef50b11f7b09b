"""Real Spark (PySpark, local mode) reading and writing through the gateway with Hadoop's S3A.

One stack and the run's one SparkSession serve every test; each test takes a repository of
its own and routes it to the stack with S3A's per-bucket settings.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from silt.graveler.v1 import graveler_pb2 as api
from silt.spark import S3AEndpoint, use_endpoint_for_bucket
from tests.e2e.conftest import SHORT_JVM_ENV
from tests.support.gateway_stack import GatewayStack, gateway_stack

SPARK_PAGE = Path(__file__).resolve().parents[2] / "docs" / "clients" / "spark.md"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with gateway_stack(tmp_path_factory.mktemp("spark-stack")) as gw:
        yield gw


def _endpoint(gw: GatewayStack, reader: bool = False) -> S3AEndpoint:
    creds = gw.reader if reader else gw.admin
    return S3AEndpoint(gw.endpoint, creds.access_key_id, creds.secret_access_key.get_secret_value())


@pytest.fixture
def repo(stack: GatewayStack, spark: Any) -> str:
    name = f"spark-{secrets.token_hex(4)}"
    stack.client().create_bucket(Bucket=name)
    use_endpoint_for_bucket(spark, name, _endpoint(stack))
    return name


def test_parquet_write_read_and_overwrite(spark: Any, stack: GatewayStack, repo: str) -> None:
    path = f"s3a://{repo}/main/data/t1"
    spark.range(1000).write.parquet(path)
    assert spark.read.parquet(path).count() == 1000
    spark.range(10).write.mode("overwrite").parquet(path)
    back = spark.read.parquet(path)
    assert sorted(r.id for r in back.collect()) == list(range(10))
    # The job's temporary directory and markers are gone; the data files and _SUCCESS remain.
    keys = [o["Key"] for o in stack.client().list_objects_v2(Bucket=repo, Prefix="main/")["Contents"]]
    assert not [k for k in keys if "_temporary" in k]
    assert "main/data/t1/_SUCCESS" in keys


def test_partitioned_append_twice_and_csv(spark: Any, repo: str) -> None:
    path = f"s3a://{repo}/main/events"
    frame = spark.range(100).selectExpr("id", "id % 4 as day")
    frame.write.partitionBy("day").mode("append").parquet(path)
    frame.write.partitionBy("day").mode("append").parquet(path)
    back = spark.read.parquet(path)
    assert back.count() == 200
    assert back.where("day = 3").count() == 50
    csv = f"s3a://{repo}/main/csv"
    frame.write.option("header", "true").csv(csv)
    assert spark.read.option("header", "true").csv(csv).count() == 100


def test_an_old_version_reads_through_a_commit_id_and_a_tag(spark: Any, stack: GatewayStack, repo: str) -> None:
    spark.range(5).write.parquet(f"s3a://{repo}/main/v")
    first = stack.graveler.Commit(api.CommitRequest(repository=repo, branch="main", message="v1"))
    stack.graveler.CreateTag(api.CreateTagRequest(repository=repo, id="v1", ref=first.id))
    spark.range(50).write.mode("overwrite").parquet(f"s3a://{repo}/main/v")
    stack.graveler.Commit(api.CommitRequest(repository=repo, branch="main", message="v2"))
    assert spark.read.parquet(f"s3a://{repo}/main/v").count() == 50
    assert spark.read.parquet(f"s3a://{repo}/{first.id}/v").count() == 5
    assert spark.read.parquet(f"s3a://{repo}/v1/v").count() == 5


def test_a_job_on_a_branch_then_merge_then_read_on_main(spark: Any, stack: GatewayStack, repo: str) -> None:
    stack.graveler.Commit(api.CommitRequest(repository=repo, branch="main", message="base", allow_empty=True))
    stack.graveler.CreateBranch(api.CreateBranchRequest(repository=repo, name="etl", source_ref="main"))
    spark.range(42).write.parquet(f"s3a://{repo}/etl/out")
    stack.graveler.Commit(api.CommitRequest(repository=repo, branch="etl", message="etl run"))
    merged = stack.graveler.Merge(api.MergeRequest(repository=repo, source_ref="etl", destination_branch="main"))
    assert not merged.conflicts
    assert spark.read.parquet(f"s3a://{repo}/main/out").count() == 42


def test_a_read_only_key_cannot_write(spark: Any, stack: GatewayStack, repo: str) -> None:
    spark.range(3).write.parquet(f"s3a://{repo}/main/ro")
    use_endpoint_for_bucket(spark, repo, _endpoint(stack, reader=True))
    assert spark.read.parquet(f"s3a://{repo}/main/ro").count() == 3
    with pytest.raises(Exception) as exc:
        spark.range(3).write.mode("overwrite").parquet(f"s3a://{repo}/main/ro2")
    assert "AccessDenied" in str(exc.value) or "403" in str(exc.value)


def test_a_30_mb_file_goes_up_in_parts(spark: Any, stack: GatewayStack, repo: str) -> None:
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    # S3A switches to multipart uploads above these sizes (set for this bucket only).
    conf.set(f"fs.s3a.bucket.{repo}.multipart.size", str(8 * 1024 * 1024))
    conf.set(f"fs.s3a.bucket.{repo}.multipart.threshold", str(8 * 1024 * 1024))
    rows = spark.range(300_000).selectExpr("concat(uuid(), uuid(), uuid()) as line").coalesce(1)
    rows.write.text(f"s3a://{repo}/main/big")
    objects = stack.client().list_objects_v2(Bucket=repo, Prefix="main/big/part-")["Contents"]
    assert len(objects) == 1 and objects[0]["Size"] > 30_000_000
    assert "-" in objects[0]["ETag"]  # a multipart ETag: "<md5 of md5s>-<parts>"
    assert spark.read.text(f"s3a://{repo}/main/big").count() == 300_000


def test_save_as_table_with_an_external_location(spark: Any, repo: str) -> None:
    table = f"ext_{repo.replace('-', '_')}"
    location = f"s3a://{repo}/main/tables/{table}"
    spark.range(7).write.option("path", location).saveAsTable(table)
    try:
        assert spark.table(table).count() == 7
        assert spark.read.parquet(location).count() == 7
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def readme_spark_example() -> str:
    match = re.search(r"<!-- spark-example -->\n```python\n(.*?)\n```", SPARK_PAGE.read_text(), re.S)
    assert match, "docs/clients/spark.md lost its <!-- spark-example --> block"
    return match.group(1)


@pytest.mark.spark  # a Spark job in a JVM of its own
def test_the_readme_spark_example_runs_as_written(stack: GatewayStack, tmp_path: Path) -> None:
    # Its own process and JVM, as a reader would run it: the manual's code, the reader's env.
    stack.client().create_bucket(Bucket="example")
    script = tmp_path / "example.py"
    script.write_text(readme_spark_example())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env.update(
        AWS_ENDPOINT_URL=stack.endpoint,
        AWS_ACCESS_KEY_ID=stack.admin.access_key_id,
        AWS_SECRET_ACCESS_KEY=stack.admin.secret_access_key.get_secret_value(),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    # C1 alone and the serial collector for its JVM, as for the CLI's Spark jobs (tests/e2e/
    # conftest.py's SHORT_JVM_ENV): the same program, started and finished sooner.
    env.update(SHORT_JVM_ENV)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "1000"
