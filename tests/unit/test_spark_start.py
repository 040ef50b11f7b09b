"""tests/support/spark.py starts Spark's JVM at a run's start when the run's selection holds a
Spark test, and not otherwise: `make test`'s `rest` leg, whose selection has none, starts none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import legs

# A stand-in for the plugin's `spark` fixture (a conftest's fixture of the same name wins), so
# that what is checked is whether the plugin asks for it, not a real JVM's start.
CONFTEST = """
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark():
    Path(os.environ["SPARK_STARTED"]).write_text("started")
"""

# The first test asks for no fixture: the JVM is started before it only if the plugin starts it
# at the run's start, as it must before any gRPC channel opens.
TESTS = """
import os
from pathlib import Path

import pytest


@pytest.mark.spark
def test_started_before_the_first_test():
    assert Path(os.environ["SPARK_STARTED"]).exists()


@pytest.mark.spark
def test_with_spark(spark):
    pass


def test_without_spark():
    assert not Path(os.environ["SPARK_STARTED"]).exists()
"""


@pytest.mark.parametrize(
    ("selection", "started", "counts"),
    [("spark", True, "2 passed, 1 deselected"), ("not spark", False, "1 passed, 2 deselected")],
)
def test_the_jvm_starts_only_for_a_selection_with_a_spark_test(
    tmp_path: Path, selection: str, started: bool, counts: str
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    spark: x\n")
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_it.py").write_text(TESTS)
    flag = tmp_path / "started"
    command = [sys.executable, "-m", "pytest", "-p", "tests.support.spark", "-p", "no:cacheprovider", "-q"]
    done = subprocess.run(
        [*command, "-m", selection, str(suite)],
        cwd=legs.REPO_ROOT,
        env={**os.environ, "SPARK_STARTED": str(flag)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert counts in done.stdout
    assert flag.exists() is started
