"""The Spark JVMs' class-data-sharing archive: which file belongs to which jars, and the options."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import spark_cds


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site-packages with pyspark's jars, and an archive directory of the test's own."""
    jars = tmp_path / "site" / "pyspark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"a JVM")
    monkeypatch.setattr(spark_cds, "_java", lambda: java)
    monkeypatch.setattr(spark_cds, "_site_packages", lambda: tmp_path / "site")
    monkeypatch.setattr(spark_cds, "ARCHIVE_DIR", tmp_path / "jvm")
    return tmp_path / "site"


def test_no_archive_means_the_plain_options(site: Path) -> None:
    assert spark_cds.archive_path() is not None
    assert spark_cds.options() == spark_cds.BASE_OPTIONS


def test_no_java_or_no_pyspark_means_no_archive(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_cds, "_java", lambda: None)
    assert spark_cds.archive_path() is None and spark_cds.options() == spark_cds.BASE_OPTIONS


def test_an_archive_on_a_path_with_a_space_is_not_used(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_cds, "ARCHIVE_DIR", tmp_path / "my venv" / "jvm")
    archive = spark_cds.archive_path()
    assert archive is not None
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"made")
    # The options are split on white space where they are passed: the path would be two options.
    assert spark_cds.options() == spark_cds.BASE_OPTIONS


def test_an_archive_made_for_these_jars_is_used_quietly(site: Path) -> None:
    archive = spark_cds.archive_path()
    assert archive is not None and archive.parent == spark_cds.ARCHIVE_DIR
    archive.parent.mkdir()
    archive.write_bytes(b"made")
    assert spark_cds.options() == f"{spark_cds.BASE_OPTIONS} -XX:SharedArchiveFile={archive} -Xlog:cds*=off"


def test_changed_or_added_jars_or_another_jdk_look_for_another_archive(site: Path, tmp_path: Path) -> None:
    first = spark_cds.archive_path()
    server = tmp_path / "jdk" / "lib" / "server"
    server.mkdir(parents=True)
    (server / "classes.jsa").write_bytes(b"the JDK's base archive")
    with_base = spark_cds.archive_path()
    (site / "pyspark" / "jars" / "spark-core.jar").write_bytes(b"core, rebuilt")
    second = spark_cds.archive_path()
    (site / "sagemaker_pyspark" / "jars").mkdir(parents=True)
    (site / "sagemaker_pyspark" / "jars" / "hadoop-aws.jar").write_bytes(b"s3a")
    third = spark_cds.archive_path()
    assert len({first, with_base, second, third}) == 4


def test_a_jvm_still_writing_the_archive_is_waited_for(tmp_path: Path) -> None:
    dumped = tmp_path / "dump.jsa"
    assert not spark_cds._dumping(dumped)
    # Any process whose command line names the file stands in for the JVM told to write it.
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    writer = subprocess.Popen([*sleeper, f"-XX:ArchiveClassesAtExit={dumped}"])
    try:
        # Popen returns once the child's exec has begun, and the kernel shows its new command
        # line only once exec has laid out its arguments: under load, a read between the two
        # found an empty one (5 times in 150 with both cores busy).
        deadline = time.monotonic() + 10
        while not spark_cds._dumping(dumped) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert spark_cds._dumping(dumped)
    finally:
        writer.kill()
        writer.wait()
    assert not spark_cds._dumping(dumped)
