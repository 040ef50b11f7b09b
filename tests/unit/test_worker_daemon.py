"""Which archives the jobs' Spark worker daemon takes off its path (jobs/worker_daemon.py)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from jobs.worker_daemon import without_spark_archives


def _archive(path: Path, *names: str) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "")
    return str(path)


def _site_packages() -> list[str]:
    return [entry for entry in sys.path if entry.endswith("site-packages")]


def test_jars_without_python_and_zips_of_installed_packages_are_dropped(tmp_path: Path) -> None:
    core = _archive(tmp_path / "spark-core_2.13-4.1.1.jar", "org/apache/spark/SparkContext.class")
    pyspark = _archive(tmp_path / "pyspark.zip", "pyspark/__init__.py")
    py4j = _archive(tmp_path / "py4j-0.10.9.9-src.zip", "py4j/__init__.py")
    path = [pyspark, py4j, core, *_site_packages()]
    assert without_spark_archives(path) == _site_packages()


def test_an_archive_is_kept_where_it_is_the_only_source(tmp_path: Path) -> None:
    # A Spark distribution without pip's package: pyspark and py4j only in the zips.
    pyspark = _archive(tmp_path / "pyspark.zip", "pyspark/__init__.py")
    py4j = _archive(tmp_path / "py4j-0.10.9.9-src.zip", "py4j/__init__.py")
    # A jar that carries Python modules, and an entry that is no readable zip.
    with_python = _archive(tmp_path / "with-python.jar", "lib/module.py")
    unreadable = str(tmp_path / "missing.jar")
    other = _archive(tmp_path / "pyspark-extras.zip", "pyspark_extras/__init__.py")
    path = [pyspark, py4j, with_python, unreadable, other, str(tmp_path)]
    assert without_spark_archives(path) == path
