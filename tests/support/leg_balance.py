"""Which test files needing Spark but not Cassandra the `rest` leg takes from the `jvm` leg,
for a commit whose nightly slice loads the `jvm` leg more.

The legs split by what their tests start (tests/support/legs.py): every test that needs
Cassandra, the 3-node cluster or Spark runs in the `jvm` leg, and without the nightly slice the
two legs take about the same time. The slice's tests are mostly the JVM leg's (the replicas
torture test, the Jepsen-style runs on the cluster, the model test's longer searches on
Cassandra), so a slice alone would add up to 4.5 minutes to that leg while the other waits.
A file whose tests need Spark and not Cassandra can run in either leg (the `rest` leg then
starts a Spark JVM of its own): the `rest` leg takes such files, longest first, up to half of
what the `jvm` leg has more. Both legs collect every test and run this same choice on the same
items, so each test still runs in exactly one leg: the rotation's plugin marks the chosen
files' tests MOVED_MARK, which the legs' marker expressions send to `rest`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CASSANDRA_MARKS = ("cassandra", "cassandra_cluster")
JVM_MARKS = (*CASSANDRA_MARKS, "spark")
MOVED_MARK = "rest_leg"
# Seconds each file's tests take in `make test` on the cold container (scripts/ci-cold.sh of
# 2026-11-27, the tests' JVMs at C1); DEFAULT_FILE_S for a file not named here.
FILE_ESTIMATES: dict[str, float] = {
    "tests/e2e/test_blockstores.py": 107.0,
    "tests/e2e/test_gc.py": 85.0,
    "tests/e2e/test_spark.py": 49.0,
    "tests/integration/gc/test_gc_adapter.py": 44.0,
    "tests/e2e/test_last_access.py": 35.0,
    "tests/integration/gc/test_gc_s3.py": 30.0,
    "tests/integration/gc/test_gc_run.py": 26.0,
    "tests/integration/gc/test_gc_model.py": 20.0,
    "tests/integration/gc/test_gc_concurrency.py": 20.0,
    "tests/integration/journal/test_compact_job.py": 11.0,
    "tests/integration/gc/test_gc_imported.py": 8.0,
    "tests/integration/gc/test_last_access.py": 8.0,
}
DEFAULT_FILE_S = 20.0
# What the `jvm` leg takes more than the `rest` leg without a slice (negative: less): about
# -25 s on this machine (2026-11-27) and -230 s in the cold container the same day, whose
# `rest` leg ran slower; between the two.
BASE_EXCESS_S = -150.0
# A second Spark JVM's start and its share of the files' setup: moving less gains nothing.
MIN_MOVE_S = 30.0


def leg_of(marks: Iterable[str]) -> str:
    """The leg a test with these marks runs in, before any move."""
    return "jvm" if set(marks) & set(JVM_MARKS) else "rest"


def movable_files(marks_by_test: Mapping[str, Iterable[str]]) -> list[str]:
    """The files with a test that needs Spark and none that needs Cassandra (test ids to marks)."""
    spark: set[str] = set()
    cassandra: set[str] = set()
    for test, marks in marks_by_test.items():
        path, found = test.split("::")[0], set(marks)
        if found & set(CASSANDRA_MARKS):
            cassandra.add(path)
        elif "spark" in found:
            spark.add(path)
    return sorted(spark - cassandra)


def files_to_move(jvm_excess_s: float, files: Iterable[str], known: Mapping[str, float] = FILE_ESTIMATES) -> list[str]:
    """The files the `rest` leg takes when the `jvm` leg has jvm_excess_s seconds more: longest
    first, each that keeps the moved time within half the excess; none if that is too little."""
    budget = jvm_excess_s / 2
    if budget < MIN_MOVE_S:
        return []
    seconds = {f: known.get(f, DEFAULT_FILE_S) for f in files}
    moved: list[str] = []
    total = 0.0
    for path in sorted(seconds, key=lambda f: (-seconds[f], f)):
        if total + seconds[path] <= budget:
            moved.append(path)
            total += seconds[path]
    return sorted(moved)
