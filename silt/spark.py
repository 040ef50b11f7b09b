"""Spark settings for reaching Silt (or any S3 endpoint) through the Hadoop S3A connector.

One place knows the S3A settings, so the manual (docs/clients/spark.md), `silt auth env --spark`, the GC job and the
tests all say the same thing. The connector's jars (hadoop-aws 3.3.1 and the AWS SDK bundle
1.11.901) come from the `sagemaker-pyspark` wheel, installed by `make` with --no-deps.

hadoop-aws 3.3.1 cannot parse the duration defaults that Hadoop 3.4+ (inside pyspark 4.x)
ships, such as "60s", so those keys are set to plain numbers here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

S3A_JAR_NAMES = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")

# The jobs' Python workers are forked from a daemon that takes off their path the archives Spark
# puts there (the spark-core jar, pyspark's zip) and they need not import from: each cost a read
# of its directory at every task (jobs/worker_daemon.py).
WORKER_SETTINGS = {"spark.python.daemon.module": "jobs.worker_daemon"}


class SparkSetupError(RuntimeError):
    """The S3A jars or Spark itself are not installed where we look."""


def s3a_jars() -> list[str]:
    """Absolute paths of the two S3A jars, from the installed sagemaker_pyspark package."""
    spec = importlib.util.find_spec("sagemaker_pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkSetupError(
            "the S3A connector jars are missing: pip install --no-deps sagemaker-pyspark==1.4.5 (make does this)"
        )
    jar_dir = Path(next(iter(spec.submodule_search_locations))) / "jars"
    jars = [jar_dir / name for name in S3A_JAR_NAMES]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise SparkSetupError(f"S3A jars not found: {', '.join(missing)}")
    return [str(j) for j in jars]


@dataclass(frozen=True)
class S3AEndpoint:
    """Where S3A sends requests and with which key."""

    endpoint: str  # e.g. "http://127.0.0.1:8000"
    access_key_id: str
    secret_access_key: str

    @property
    def ssl(self) -> bool:
        return self.endpoint.startswith("https://")


def s3a_hadoop_settings(target: S3AEndpoint) -> dict[str, str]:
    """The `fs.s3a.*` Hadoop settings (without the `spark.hadoop.` prefix)."""
    return {
        "fs.s3a.endpoint": target.endpoint,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "true" if target.ssl else "false",
        "fs.s3a.access.key": target.access_key_id,
        "fs.s3a.secret.key": target.secret_access_key,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        # Plain numbers: hadoop-aws 3.3.1 cannot parse Hadoop 3.4+'s "60s"-style defaults.
        "fs.s3a.threads.keepalivetime": "60",
        "fs.s3a.connection.establish.timeout": "30000",
        "fs.s3a.connection.timeout": "200000",
        "fs.s3a.multipart.purge.age": "86400",
    }


def spark_settings(target: S3AEndpoint | None) -> dict[str, str]:
    """Every `spark.*` setting a SparkSession needs to read and write `s3a://` through `target`."""
    settings = {"spark.jars": ",".join(s3a_jars())}
    if target is not None:
        settings.update({f"spark.hadoop.{k}": v for k, v in s3a_hadoop_settings(target).items()})
    return settings


def spark_defaults_conf(target: S3AEndpoint) -> str:
    """The same settings as a `spark-defaults.conf` fragment for a cluster."""
    return "".join(f"{key} {value}\n" for key, value in spark_settings(target).items())


def builder_lines(target: S3AEndpoint) -> str:
    """The same settings as Python `SparkSession.builder` lines."""
    body = "".join(f'    .config("{k}", "{v}")\n' for k, v in spark_settings(target).items())
    head = 'from pyspark.sql import SparkSession\n\nspark = (\n    SparkSession.builder.appName("silt")\n'
    return f"{head}{body}    .getOrCreate()\n)\n"


def local_session(
    target: S3AEndpoint | None = None,
    master: str = "local[2]",
    app_name: str = "silt",
    extra: dict[str, str] | None = None,
) -> Any:
    """A SparkSession in local mode (or `master`) that can reach `target` over s3a://."""
    # Imported here: pyspark starts a JVM and most callers never need it.
    from pyspark.sql import SparkSession

    # Executors must run the same interpreter (and so the same packages) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # A local run talks to itself on loopback, never on whatever interface the host name maps to.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.memory": "1g",
        **WORKER_SETTINGS,
        **spark_settings(target),
        **(extra or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def use_endpoint_for_bucket(spark: Any, bucket: str, target: S3AEndpoint) -> None:
    """Route `s3a://<bucket>/…` in an existing session to `target` (S3A per-bucket settings).

    Lets one SparkSession talk to several endpoints (Silt and a plain S3 server, say), which
    a JVM-wide `fs.s3a.endpoint` cannot.
    """
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3a_hadoop_settings(target).items():
        conf.set(f"fs.s3a.bucket.{bucket}.{key.removeprefix('fs.s3a.')}", value)
