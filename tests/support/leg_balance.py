"""Which whole test files change legs for a commit, so that its two legs take about as long.

The legs split by what their tests start (tests/support/legs.py): every test that needs
Cassandra, the 3-node cluster or Spark runs in the `jvm` leg, everything else in the `rest`
leg, which without the nightly slice is the longer one by BASE_EXCESS_S. The slice's tests are
mostly the `jvm` leg's (the replicas torture test, the Jepsen-style runs on the cluster, the
model test's longer searches on Cassandra), and a slice adds 130 to 280 s to that leg. Files
move one way or the other, longest first, up to half of what one leg has more:

* when the `jvm` leg has more, the `rest` leg takes files whose tests need Spark and not
  Cassandra (it then starts a Spark JVM of its own): FILE_ESTIMATES, marked MOVED_MARK;
* when the `rest` leg has more, the `jvm` leg takes end-to-end files that start their own
  stacks and need no JVM: JVM_LEG_FILES, marked TO_JVM_MARK.

Both legs collect every test and make this same choice on the same items, so each test still
runs in exactly one leg: the rotation's plugin marks the chosen files' tests, and the legs'
marker expressions send them where the mark says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CASSANDRA_MARKS = ("cassandra", "cassandra_cluster")
JVM_MARKS = (*CASSANDRA_MARKS, "spark")
MOVED_MARK = "rest_leg"
TO_JVM_MARK = "jvm_leg"
# Seconds each file's tests take in `make test` (this machine, 2026-11-27, a6098c5: the shared
# Cassandra node's commit log synced periodically, the Spark workers off pyspark's archives);
# DEFAULT_FILE_S for a file not named here.
FILE_ESTIMATES: dict[str, float] = {
    "tests/e2e/test_blockstores.py": 62.0,
    "tests/e2e/test_gc.py": 60.0,  # 88 s cold (2026-11-28) with a refused run's Spark start, now gone
    "tests/e2e/test_spark.py": 50.0,
    "tests/e2e/test_last_access.py": 29.0,
    "tests/integration/gc/test_gc_adapter.py": 26.0,
    "tests/integration/gc/test_gc_s3.py": 21.0,
    "tests/integration/gc/test_gc_run.py": 19.0,
    "tests/integration/gc/test_gc_model.py": 12.0,
    "tests/integration/gc/test_gc_concurrency.py": 9.0,
    "tests/integration/journal/test_compact_job.py": 8.0,
    "tests/integration/gc/test_last_access.py": 8.0,
    "tests/integration/gc/test_gc_imported.py": 4.0,
}
DEFAULT_FILE_S = 20.0
# The `rest` leg's files the `jvm` leg may take: each starts the stacks it needs, and the jvm leg
# starts the e2e session stack anyway. Seconds as measured in the cold container (2026-11-29,
# 392d779c, ordinal 615): the 12 files moved there took 297 s against the 240 s estimated, and
# with every file the list then held moved, the rest leg was still 145 s longer. So the list
# grew by the fuzzer's file (its make-test cases; its nightly case adds 40 s in its slice) and
# the migration's (50 s, less the start of the moto-backed session stack it needs).
JVM_LEG_FILES: dict[str, float] = {
    "tests/e2e/gateway/test_fuzz.py": 61.0,
    "tests/e2e/api/test_migrate_lakefs.py": 40.0,
    "tests/e2e/test_journal_crash.py": 47.0,
    "tests/e2e/test_connection_limits.py": 41.0,
    "tests/e2e/test_hook_isolation.py": 33.0,
    "tests/e2e/test_observability.py": 26.0,
    "tests/e2e/test_compactor.py": 24.0,
    "tests/e2e/test_health_outage.py": 24.0,
    "tests/e2e/test_process_hygiene.py": 22.0,
    "tests/e2e/test_cli_rough_edges.py": 20.0,
    "tests/e2e/test_gateway.py": 19.0,
    "tests/e2e/test_restart_backoff.py": 17.0,
    "tests/e2e/test_rpc_exhaustion.py": 17.0,
    "tests/e2e/test_run.py": 16.0,
    "tests/e2e/test_tls.py": 15.0,
    "tests/e2e/test_kv_freeze.py": 15.0,
}
# What the `jvm` leg takes more than the `rest` leg without a slice (negative: less): -497 s in
# the cold run of 2026-11-28 (commit ordinal 537: the jvm leg's own tests 1,291 s, the rest
# leg's 1,788 s without its share of the slice), less about 150 s the jvm leg's cuts since saved
# there (the replicas torture test's 3 rounds, the model test's smaller Cassandra searches, the
# shipper crash test's boundaries on Cassandra, test_gc.py's refused run without Spark), plus
# about 135 s the rest leg's cuts saved there (shared stacks, batched bucket clean-ups, a
# shorter migration history, a configurable history stream timeout). Then (2026-11-29) the jvm
# leg's cluster fault tests lost 178 s of schema waits and its Spark JVMs about 40 s to a class
# archive, and the next run (ordinal 592, slice 4) left the rest leg 150 s longer: half of that
# is about 55 s more of the estimates below, so the excess grows by twice that. The cold run at
# ordinal 615 agrees: the jvm leg's own tests 1,124 s, the rest leg's 1,744 s (each without
# the files moved and the slice), -620 s; a warm run on this machine (ordinal 625) -697 s, and
# its legs ended 103 s apart; the cold container again (ordinal 629, a machine about 20 % slower
# that hour) -719 s. About their mean, -680 s; then (2026-11-29, evening) the rest leg's tests
# lost about 79 s: the 2,500-object listing's accessibility audits 13 s (no closed <details> per
# row), the block listing tests 46 s (pages of 10 keys, not 1,001 objects a store), the made-up
# key ids flood 20 s (5,000 ids, not 10,000), -600 s; and the jvm leg's replicas tests on one
# node, 71 s, went to the rotating slice (the cluster's run every commit):
BASE_EXCESS_S = -670.0
# A second Spark JVM's start and its share of the files' setup, or another leg's start of a
# stack: moving less gains nothing.
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


def jvm_leg_files(marks_by_test: Mapping[str, Iterable[str]]) -> list[str]:
    """The files of JVM_LEG_FILES collected, if none of their tests needs a JVM (test ids to marks)."""
    found: set[str] = set()
    needs_jvm: set[str] = set()
    for test, marks in marks_by_test.items():
        path = test.split("::")[0]
        if path in JVM_LEG_FILES:
            found.add(path)
            if leg_of(marks) == "jvm":
                needs_jvm.add(path)
    return sorted(found - needs_jvm)


def files_to_move(excess_s: float, files: Iterable[str], known: Mapping[str, float] = FILE_ESTIMATES) -> list[str]:
    """The files the shorter leg takes when the other has excess_s seconds more: longest first,
    each that keeps the moved time within half the excess; none if that is too little."""
    budget = excess_s / 2
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
