"""tests/support/leg_balance.py: whole files move from the longer leg to the other, up to half the
difference (files that need Spark and not Cassandra to the `rest` leg, end-to-end files that need
no JVM to the `jvm` leg); the legs then run each of their tests once, in the leg the choice says."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import leg_balance, legs, rotation


def test_only_files_without_cassandra_tests_can_move() -> None:
    marks = {
        "a.py::t1": ["spark"],
        "a.py::t2": [],
        "b.py::t1": ["spark"],
        "b.py::t2": ["cassandra"],
        "c.py::t1": ["spark", "cassandra_cluster"],
        "d.py::t1": ["e2e"],
        "e.py::t[x]": ["spark", "slow"],
    }
    assert leg_balance.movable_files(marks) == ["a.py", "e.py"]


def test_the_longest_files_move_within_half_the_excess() -> None:
    known = {"big.py": 100.0, "mid.py": 60.0, "small.py": 30.0, "tiny.py": 10.0}
    # Half of 250 s is 125: 100 fits, 60 no longer does, 10 still does (30 would pass 125).
    assert leg_balance.files_to_move(250.0, known, known) == ["big.py", "tiny.py"]
    assert leg_balance.files_to_move(400.0, known, known) == ["big.py", "mid.py", "small.py", "tiny.py"]
    # Too little to repay a second Spark JVM, or the other leg already the longer one.
    assert leg_balance.files_to_move(2 * leg_balance.MIN_MOVE_S - 1, known, known) == []
    assert leg_balance.files_to_move(-300.0, known, known) == []
    # A file the table does not name counts DEFAULT_FILE_S.
    enough = 2 * max(leg_balance.DEFAULT_FILE_S, leg_balance.MIN_MOVE_S)
    assert leg_balance.files_to_move(enough, ["new.py"], known) == ["new.py"]


def test_the_jvm_leg_takes_only_its_listed_files_and_none_that_needs_a_jvm() -> None:
    listed = sorted(leg_balance.JVM_LEG_FILES)
    marks = {
        f"{listed[0]}::t1": ["e2e"],
        f"{listed[0]}::t2": [],
        f"{listed[1]}::t1": ["e2e"],
        f"{listed[1]}::t2": ["cassandra"],  # a file that grew a Cassandra test stays where it is
        "tests/e2e/test_unlisted.py::t": ["e2e"],
    }
    assert leg_balance.jvm_leg_files(marks) == [listed[0]]


@dataclass
class _Mark:
    name: str


class _Item:
    """What _balance_legs reads of a pytest item, and the mark it adds."""

    def __init__(self, nodeid: str, *marks: str) -> None:
        self.nodeid = nodeid
        self.marks = [_Mark(name) for name in marks]

    def iter_markers(self) -> list[_Mark]:
        return self.marks

    def add_marker(self, name: str) -> None:
        self.marks.append(_Mark(name))


def test_the_shorter_leg_takes_files_from_the_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    spark = _Item("tests/e2e/test_gc.py::t", "spark")
    crash = _Item("tests/e2e/test_journal_crash.py::t", "e2e")
    nightly = _Item("tests/e2e/test_replicas.py::t[120]", "cassandra", "nightly")
    items: list[pytest.Item] = [spark, crash, nightly]  # type: ignore[list-item]
    # A slice that loads the jvm leg past the rest leg's base excess: the rest leg takes Spark.
    monkeypatch.setattr(leg_balance, "BASE_EXCESS_S", -100.0)
    assert rotation._balance_legs(items, {nightly.nodeid: 300.0}) == ("rest", ["tests/e2e/test_gc.py"])
    assert [m.name for m in spark.marks] == ["spark", leg_balance.MOVED_MARK]
    # A slice that leaves the rest leg the longer one: the jvm leg takes an end-to-end file.
    spark.marks, crash.marks = spark.marks[:1], crash.marks[:1]
    monkeypatch.setattr(leg_balance, "BASE_EXCESS_S", -330.0)
    assert rotation._balance_legs(items, {nightly.nodeid: 130.0}) == ("jvm", ["tests/e2e/test_journal_crash.py"])
    assert [m.name for m in crash.marks] == ["e2e", leg_balance.TO_JVM_MARK]
    assert [m.name for m in spark.marks] == ["spark"]


def test_a_file_that_moves_takes_its_slice_tests_along(monkeypatch: pytest.MonkeyPatch) -> None:
    crash = _Item("tests/e2e/test_journal_crash.py::t", "e2e")
    fuzz = _Item("tests/e2e/gateway/test_fuzz.py::t[make-test]", "e2e")
    fuzz_nightly = _Item("tests/e2e/gateway/test_fuzz.py::t[nightly]", "e2e", "nightly")
    items: list[pytest.Item] = [crash, fuzz, fuzz_nightly]  # type: ignore[list-item]
    # The rest leg has 300 s more with the slice (120 s of it the fuzzer's nightly case): the
    # jvm leg takes up to 150 s. The fuzzer's file is 61 s, and 181 s with its slice test, which
    # it would take along: too much; the crash test's file alone moves.
    monkeypatch.setattr(leg_balance, "BASE_EXCESS_S", -180.0)
    taker, moved = rotation._balance_legs(items, {fuzz_nightly.nodeid: 120.0})
    assert (taker, moved) == ("jvm", ["tests/e2e/test_journal_crash.py"])


def test_a_test_runs_in_the_jvm_leg_when_it_needs_a_jvm() -> None:
    assert [leg_balance.leg_of(m) for m in (["spark"], ["cassandra", "e2e"], ["e2e"], [])] == [
        "jvm",
        "jvm",
        "rest",
        "rest",
    ]


FILES = {
    "test_heavy.py": """
import pytest


@pytest.mark.nightly
@pytest.mark.cassandra
@pytest.mark.parametrize("n", range(8))
def test_nightly_on_cassandra(n):
    pass
""",
    "test_sparky.py": """
import pytest


@pytest.mark.spark
def test_needs_spark_only():
    pass


def test_needs_nothing():
    pass
""",
    "test_mixed.py": """
import pytest


@pytest.mark.spark
def test_spark_here():
    pass


@pytest.mark.cassandra
def test_cassandra_here():
    pass
""",
}


def _legs_of_tests(tmp_path: Path, ordinal: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv(rotation.ORDINAL_ENV, ordinal)
    marks = "not podman and (not nightly or nightly_slice)"
    logs = tmp_path / f"logs-{ordinal}"
    assert legs.main(["--nightly-slice", "-p", "no:cacheprovider", "-m", marks, str(tmp_path / "suite")], logs) == 0
    with (logs.parent / "test-times.tsv").open() as table:
        return {row["test"].split("::")[-1]: row["leg"] for row in csv.DictReader(table, delimiter="\t")}


def test_the_legs_move_a_file_by_what_the_slice_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = tmp_path / "suite"
    (suite / "tests" / "e2e").mkdir(parents=True)
    names = ("cassandra", "cassandra_cluster", "spark", "nightly", "podman", "rest_leg", "jvm_leg")
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n" + "".join(f"    {m}: x\n" for m in names))
    for name, text in FILES.items():
        (suite / name).write_text(text)
    # Every file the jvm leg may take (leg_balance.JVM_LEG_FILES), at the paths it has there.
    files = {path: f"test_{Path(path).stem.removeprefix('test_')}_file" for path in leg_balance.JVM_LEG_FILES}
    for path, test in files.items():
        (suite / path).parent.mkdir(parents=True, exist_ok=True)
        (suite / path).write_text(f"def {test}():\n    pass\n")
    monkeypatch.delenv("SILT_JEPSEN_RUNS", raising=False)
    monkeypatch.delenv("SILT_JEPSEN_FIRST_RUN", raising=False)
    # Eight nightly tests of the default estimate, in the jvm leg, in seven slices: one of two,
    # six of one. The jvm leg takes, longest first, the files within half of what the rest leg
    # has more: a slice of one leaves it more than a slice of two, so it takes more then.
    plan = rotation.slices(
        dict.fromkeys((f"test_heavy.py::test_nightly_on_cassandra[{n}]" for n in range(8)), rotation.DEFAULT_ESTIMATE_S)
    )
    assert [len(tests) for tests in plan] == [2, 1, 1, 1, 1, 1, 1]
    moved = {
        count: leg_balance.files_to_move(
            -(count * rotation.DEFAULT_ESTIMATE_S + leg_balance.BASE_EXCESS_S), files, leg_balance.JVM_LEG_FILES
        )
        for count in (1, 2)
    }
    seconds = {count: sum(leg_balance.JVM_LEG_FILES[path] for path in paths) for count, paths in moved.items()}
    assert moved[2] and seconds[2] < seconds[1]
    common = {
        "test_needs_spark_only": "jvm",
        "test_needs_nothing": "rest",
        "test_spark_here": "jvm",
        "test_cassandra_here": "jvm",
    }
    for ordinal, slice_, count in (("8", plan[1], 1), ("7", plan[0], 2)):
        assert _legs_of_tests(tmp_path, ordinal, monkeypatch) == {
            **common,
            **{test.split("::")[-1]: "jvm" for test in slice_},
            **{test: "jvm" if path in moved[count] else "rest" for path, test in files.items()},
        }
