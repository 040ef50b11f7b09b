"""Runs Spark SQL statements in Spark 3.5 with Iceberg's Spark runtime: the driver program of the Spark leg.

Run by `.venv-iceberg-spark/bin/python` (Spark 3.5 cannot share the test venv's Spark 4), it reads one JSON
object on stdin, `{"conf": {spark setting: value}, "statements": [sql, ...]}`, runs the statements in one
local SparkSession in order and writes one JSON line per statement: `{"rows": [[value, ...], ...]}`, or
`{"error": [Java exception class, its causes' classes...], ...}` for the first statement that fails, after
which it stops. The jars come from this interpreter's own packages.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

ICEBERG_VERSION = "1.10.2"
S3A_JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
SHADED_DEPS = "iceberg-shaded-deps.jar"


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{name} is not installed in {sys.prefix}: make iceberg-spark")
    return Path(next(iter(spec.submodule_search_locations)))


def scala_version() -> str:
    """The Scala version pyspark's own jars are built for (PyPI's Spark 3.5 is 2.12)."""
    library = sorted((package_dir("pyspark") / "jars").glob("scala-library-2.*.jar"))
    if not library:
        raise SystemExit("pyspark has no scala-library jar")
    return ".".join(library[0].name.removeprefix("scala-library-").split(".")[:2])


def jars() -> list[str]:
    runtime = f"iceberg-spark-runtime-3.5_{scala_version()}-{ICEBERG_VERSION}.jar"
    found = [package_dir("snowpark_connect_deps_iceberg") / "jars" / runtime]
    found += [package_dir("sagemaker_pyspark") / "jars" / name for name in S3A_JARS]
    # What that runtime jar lacks (HttpClient 5 and Jackson, relocated): `make iceberg-spark` builds it.
    found.append(Path(sys.prefix) / "jars" / SHADED_DEPS)
    missing = [str(jar) for jar in found if not jar.is_file()]
    if missing:
        raise SystemExit(f"jars not found: {', '.join(missing)}")
    return [str(jar) for jar in found]


def java_classes(error: BaseException) -> list[str]:
    """The Java exception behind a Spark error, then each of its causes, by class name."""
    origin: Any = getattr(error, "_origin", None) or getattr(error, "java_exception", None)
    names: list[str] = []
    while origin is not None and len(names) < 20:
        names.append(str(origin.getClass().getName()))
        origin = origin.getCause()
    return names or [type(error).__name__]


def value(item: Any) -> Any:
    return item if item is None or isinstance(item, bool | int | float | str) else str(item)


def main() -> None:
    request = json.load(sys.stdin)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("silt-iceberg")
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        # C1 alone and the serial collector, as for the suite's own SparkSession (tests/support/spark.py):
        # a JVM that lives a minute over a few rows.
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.jars": ",".join(jars()),
        **request["conf"],
    }
    for key, setting in settings.items():
        builder = builder.config(key, setting)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for statement in request["statements"]:
            try:
                rows = spark.sql(statement).collect()
            except Exception as error:
                failed = {"error": java_classes(error), "statement": statement, "message": str(error)[:2000]}
                print(json.dumps(failed), flush=True)
                return
            print(json.dumps({"rows": [[value(item) for item in row] for row in rows]}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
