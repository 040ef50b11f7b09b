"""tests/support/times.py: the legs' JUnit XMLs merged into build/test-times.tsv, and the report of
the slowest tests and the time per directory over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import legs, times

JVM_XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.integration.kv.test_driver" name="test_put[cassandra]" time="12.500">
  <properties><property name="cpu_seconds" value="7.125" /></properties></testcase>
<testcase classname="tests.integration.kv.test_driver.TestScan" name="test_large" time="40.25">
  <failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="tests.e2e.test_stack" name="test_up" time="3">
  <skipped type="pytest.skip" message="no podman">skip</skipped></testcase>
</testsuite></testsuites>
"""
REST_XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2">
<testcase classname="tests.unit.test_paths" name="test_join" time="0.010" />
<testcase classname="tests.unit.test_paths" name="test_split" time="0.500">
  <error message="fixture failed">trace</error></testcase>
</testsuite></testsuites>
"""


def _repo(tmp_path: Path) -> Path:
    """A tree where the classnames' modules exist, as in the repository."""
    root = tmp_path / "repo"
    for module in ("tests/integration/kv/test_driver.py", "tests/e2e/test_stack.py", "tests/unit/test_paths.py"):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text("")
    legs_dir = root / "build" / "test-legs"
    legs_dir.mkdir(parents=True)
    (legs_dir / "jvm.xml").write_text(JVM_XML)
    (legs_dir / "rest.xml").write_text(REST_XML)
    return root


def test_the_legs_xmls_merge_into_one_sorted_table_of_node_ids(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    rows = times.merge_legs(root / "build" / "test-legs", root)
    assert rows == [
        times.Timing("tests/e2e/test_stack.py::test_up", "jvm", 3.0, "skipped"),
        times.Timing("tests/integration/kv/test_driver.py::TestScan::test_large", "jvm", 40.25, "failed"),
        times.Timing("tests/integration/kv/test_driver.py::test_put[cassandra]", "jvm", 12.5, "passed"),
        times.Timing("tests/unit/test_paths.py::test_join", "rest", 0.01, "passed"),
        times.Timing("tests/unit/test_paths.py::test_split", "rest", 0.5, "error"),
    ]


def test_the_table_reads_back_what_was_written(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    rows = times.merge_legs(root / "build" / "test-legs", root)
    path = times.write_times(rows, tmp_path / "test-times.tsv")
    lines = path.read_text().splitlines()
    assert lines[0] == "test\tleg\tseconds\toutcome\tcpu_seconds"
    assert lines[2] == "tests/integration/kv/test_driver.py::TestScan::test_large\tjvm\t40.250\tfailed\t"
    assert lines[3] == "tests/integration/kv/test_driver.py::test_put[cassandra]\tjvm\t12.500\tpassed\t7.125"
    read = times.read_times(path)
    assert read == rows
    assert [r.cpu for r in read] == [None, None, 7.125, None, None]


def test_a_table_from_before_the_cpu_column_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.tsv"
    path.write_text("test\tleg\tseconds\toutcome\ntests/a.py::t\tjvm\t1.500\tpassed\n")
    assert [(r.test, r.seconds, r.cpu) for r in times.read_times(path)] == [("tests/a.py::t", 1.5, None)]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("not\ta\ttable\n", "first line"),
        ("test\tleg\tseconds\toutcome\tcpu_seconds\ntests/a.py::t\tjvm\t1.0\tpassed\n", ":2: 4 fields"),
    ],
)
def test_a_file_that_is_not_the_table_is_refused(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "t.tsv"
    path.write_text(text)
    with pytest.raises(ValueError, match=where):
        times.read_times(path)


def test_a_classname_with_no_module_on_disk_names_its_path_whole(tmp_path: Path) -> None:
    assert times.node_id("test_sample", "test_x", tmp_path) == "test_sample.py::test_x"


def test_the_slowest_and_the_total_per_directory(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    rows = times.merge_legs(root / "build" / "test-legs", root)
    assert [r.seconds for r in times.slowest(rows, 2)] == [40.25, 12.5]
    assert times.by_directory(rows) == [
        ("tests/integration/kv", 2, 52.75),
        ("tests/e2e", 1, 3.0),
        ("tests/unit", 2, 0.51),
    ]
    text = times.report(rows, 2, by_dir=True)
    assert "5 tests, 0.9 min" in text
    slow = text.splitlines()[3:5]
    assert "40.2 s" in slow[0] and slow[0].endswith("TestScan::test_large")
    assert text.splitlines()[-1].endswith("tests/unit")
    assert "(CPU 7.1 s)" in text  # beside test_put's wall time


def test_the_report_by_cpu_ranks_what_tests_cost_the_cores(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    rows = times.merge_legs(root / "build" / "test-legs", root)
    assert [r.test.rsplit("::", 1)[-1] for r in times.slowest(rows, 1, cpu=True)] == ["test_put[cassandra]"]
    assert times.by_directory(rows, cpu=True)[0] == ("tests/integration/kv", 2, 7.125)
    text = times.report(rows, 1, by_dir=True, cpu=True)
    assert "0.1 min of CPU counted in 1 tests" in text and "the 1 most CPU:" in text


def test_the_command_merges_the_xmls_when_there_is_no_table_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    monkeypatch.setattr(times, "LEGS_DIR", root / "build" / "test-legs")
    monkeypatch.setattr(times, "REPO_ROOT", root)
    table = root / "build" / "test-times.tsv"
    assert times.main(["--slowest", "1", "--file", str(table)]) == 0
    assert table.exists()
    out = capsys.readouterr().out
    assert "the 1 slowest:" in out and "per directory" not in out


def test_the_legs_write_every_tests_time_beside_their_logs(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    cassandra: x\n    cassandra_cluster: x\n    spark: x\n")
    (suite / "test_sample.py").write_text(
        "import pytest\n\n@pytest.mark.spark\ndef test_jvm():\n    pass\n\ndef test_rest():\n    pass\n"
    )
    (suite / "test_busy.py").write_text(
        "def test_busy():\n    import time\n    ends = time.process_time() + 0.3\n"
        "    while time.process_time() < ends:\n        pass\n"
    )
    args = ["-p", "no:cacheprovider", "-p", "tests.support.cpu_times", "-q", str(suite)]
    assert legs.main(args, tmp_path / "logs") == 0
    rows = times.read_times(tmp_path / "test-times.tsv")
    assert [(r.test.rsplit("::", 1)[-1], r.leg, r.outcome) for r in rows] == [
        ("test_busy", "rest", "passed"),
        ("test_jvm", "jvm", "passed"),
        ("test_rest", "rest", "passed"),
    ]
    cpu = {r.test.rsplit("::", 1)[-1]: r.cpu for r in rows}
    assert cpu["test_busy"] is not None and 0.3 <= cpu["test_busy"] < 5
    assert cpu["test_rest"] is not None and cpu["test_rest"] < 0.3
