"""The rotating slice of the `nightly` tests that `make test` (so `.ci/run`) runs on each commit.

`make test-all` runs every nightly test; `make test` leaves them out but for one slice, so that
none goes unrun for long. The slice is a pure function of the commit's ordinal and the nightly
tests' estimated times:

- The commit's ordinal is its position on the first-parent chain: `git rev-list --count
  --first-parent HEAD` (the first commit is 1, each commit on a branch one more than its first
  parent). "Consecutive commits" are consecutive ordinals: a commit and the ones that follow it
  on the branch, merges included (a merge is one commit on the chain, whatever it brings in).
  SILT_COMMIT_ORDINAL gives the ordinal where there is no git (a source tarball, a CI that
  exports the tree); a shallow clone's count is its depth, not the ordinal, so there the
  commit's hash (`git rev-parse HEAD`, or SILT_COMMIT) picks the slice instead: still the same
  slice for the same commit, but with no promise over consecutive commits.
- The nightly tests (every test marked `nightly`, the `podman`-marked ones excepted: only
  `make test-all` has podman) are packed into PERIOD slices by their estimated seconds
  (ESTIMATES; DEFAULT_ESTIMATE_S for a test it does not name yet), longest first, each into the
  slice with the least so far (ties to the lower slice; equal times by test id). Every test is in
  exactly one slice, and a commit runs slice `ordinal % PERIOD`: any PERIOD consecutive ordinals
  are PERIOD different remainders, so together they run every nightly test.
- The share: a slice may hold at most SHARE_S (4 min) of the budget, counted as the sum of its
  tests' estimates (the legs run side by side, so the wall time they add is at most that); the
  packing of PERIOD (7) slices keeps each near the average, about 2 minutes. A test that has
  runs to divide is split: in the rotation the Jepsen-style test's nightly variant runs
  ROTATION_ENV's SILT_JEPSEN_RUNS runs (not the 20 of `make test-all`), the next of those 20
  seeds at each turn (rotation_env), the replicas torture test's long case
  SILT_REPLICAS_ROUNDS rounds a committer (not 120), and the model test's longer searches 15
  sequences on the Cassandra node and 6 on the cluster (not 30 and 10). When the tests no
  longer fit PERIOD slices of the share, the period grows (period_of: the fewest slices, at
  least PERIOD, each within the share or holding a single test or TOGETHER unit, which no
  selection can divide);
  a commit then runs slice `ordinal % period`, and the promise becomes one run every `period`
  commits: tests/unit/test_rotation.py fails when the nightly tests no longer fit PERIOD slices,
  so that this is a decision (make a test smaller or splittable, or give the share more) and
  not a drift.

`python -m tests.support.rotation [ORDINAL]` prints the slices and the one a commit runs. Under
pytest, this module is a plugin (`-p tests.support.rotation`, which tests/support/legs.py's
`--nightly-slice` adds) that marks the commit's slice `nightly_slice`, so that
`-m "not nightly or nightly_slice"` selects it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PERIOD = 7
SHARE_S = 240.0
DEFAULT_ESTIMATE_S = 120.0
ORDINAL_ENV = "SILT_COMMIT_ORDINAL"
COMMIT_ENV = "SILT_COMMIT"
SLICE_MARK = "nightly_slice"
# Set for the legs when they run a slice (a value already in the environment is kept).
ROTATION_ENV = {
    "SILT_JEPSEN_RUNS": "1",
    "SILT_REPLICAS_ROUNDS": "40",
    "SILT_MODEL_NIGHTLY_CASSANDRA_EXAMPLES": "15",
    "SILT_MODEL_NIGHTLY_CLUSTER_EXAMPLES": "6",
}
JEPSEN_NIGHTLY_RUNS = 20  # `make test-all`'s runs of the Jepsen-style nightly variant (seed 1000 on)
_J = "tests/jepsen/test_jepsen.py::test_many_runs_with_every_nemesis_on"
_M = "tests/integration/graveler/test_model.py::test_graveler_matches_a_dictionary_model_in_a_longer_search"
_S = "tests/integration/journal/test_ship_crash.py::test_a_shipper_killed_at_any_step_strands_nothing"
_RF = "tests/e2e/test_replicas.py"
_R = f"{_RF}::test_writers_over_two_gateways_and_committers_over_two_gravelers_lose_nothing"
# Seconds each nightly test takes on the 2-core CI machine, cold, with the other leg running,
# at ROTATION_ENV's sizes. The replicas tests' long case at 40 rounds a committer (`make
# test-all`: 120): its time is the committers', about 2.3 s a round on one node under the
# writers (the 120-round case took 310 s there cold on 2026-11-27), a little more on the cluster.
# The Jepsen-style runs with every nemesis: about 60 s a run on SQLite and 90 s on the cluster
# (its node restarts), plus the module's stack, at ROTATION_ENV's 1 run. Replace them with the
# times of a `make test-all` (build/test-times.tsv, `python -m tests.support.times`), scaled to
# the sizes above.
ESTIMATES: dict[str, float] = {
    f"{_R}[cluster-many-rounds]": 130.0,
    f"{_R}[node-many-rounds]": 110.0,
    # The replicas tests on one node (the cluster's run at every commit), in the long case's
    # slice (TOGETHER). The short case runs first and so starts the module's stack: 58 s in
    # `make test` at fab68fe1, where the others took 1.4 s and 11.5 s.
    f"{_R}[node-3-rounds]": 58.0,
    f"{_RF}::test_what_one_graveler_did_the_other_sees_on_the_next_call[node]": 3.0,
    f"{_RF}::test_a_credential_deleted_through_one_auth_replica_stops_working_everywhere_in_bound[node]": 8.0,
    f"{_J}_the_cassandra_cluster": 105.0,
    f"{_J}_sqlite": 70.0,
    "tests/integration/graveler/test_history_events.py::test_unread_streams_are_bounded_and_released[cassandra]": 90.0,
    # The 1,000-example search, bounded at 45 s, and its module's stack.
    "tests/e2e/gateway/test_fuzz.py::test_fuzz_the_gateway[nightly]": 60.0,
    # The model test's longer searches at ROTATION_ENV's 15 and 6 sequences (`make test-all`:
    # 30 and 10). At 30 the node's took 359 s in a slow hour (2026-11-30, ordinal 695; its 5
    # sequences at every commit 36 s there), 107 s on a busy machine before; the cluster's 10
    # took 107 s in the cold run of 2026-11-28 (ordinal 537), its 6 here 112 s with the
    # cluster's start (2026-11-30, a quick hour).
    f"{_M}_on_cassandra": 150.0,
    f"{_M}_on_a_cluster": 110.0,
    # Spark 3.5 with Iceberg's runtime, in the module's Spark session: 20 and 10 s on a quiet
    # machine, 21 s cold beside the other leg (2026-11-28) for the second.
    "tests/e2e/iceberg/test_spark_iceberg.py::test_branch_isolation_merge_into_and_a_read_only_tag": 40.0,
    "tests/e2e/iceberg/test_spark_iceberg.py::test_spark_reads_a_table_combined_by_merges": 25.0,
    # The shipper killed at every step boundary: 28 scenarios against `make test`'s 18.
    **{
        f"{_S}[{kv}-{after}-every-boundary]": s
        for kv, s in (("cassandra", 50.0), ("local", 15.0), ("mem", 10.0))
        for after in ("after-the-lease", "after-the-token-grace")
    },
}

# Nightly tests that share a module's stack, so they go into one slice, where the stack starts
# once: each entry's tests are those whose ids hold every one of its strings.
TOGETHER: dict[str, tuple[str, ...]] = {
    "the replicas tests on one node": (f"{_RF}::", "[node"),
}


def estimates_for(tests: Iterable[str], known: Mapping[str, float] = ESTIMATES) -> dict[str, float]:
    return {test: known.get(test, DEFAULT_ESTIMATE_S) for test in tests}


def together(test: str) -> str:
    """The unit `test` is packed in: the name of its entry in TOGETHER, else the test itself."""
    return next((name for name, marks in TOGETHER.items() if all(mark in test for mark in marks)), test)


def slices(estimates: Mapping[str, float], count: int = PERIOD) -> list[list[str]]:
    """The tests packed into `count` slices by unit (together: the tests of one TOGETHER entry
    are one unit, their estimates summed): longest first, each into the slice with the least
    estimated time so far (the lower slice on a tie, equal times by name); each slice's tests
    sorted by id."""
    units: dict[str, list[str]] = {}
    for test in estimates:
        units.setdefault(together(test), []).append(test)
    weight = {unit: sum(estimates[t] for t in tests) for unit, tests in units.items()}
    packed: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for unit in sorted(units, key=lambda u: (-weight[u], u)):
        emptiest = min(range(count), key=lambda i: (loads[i], i))
        packed[emptiest].extend(units[unit])
        loads[emptiest] += weight[unit]
    return [sorted(tests) for tests in packed]


def fits(tests: list[str], estimates: Mapping[str, float], share_s: float = SHARE_S) -> bool:
    """Within the share, or a single unit (which no selection can divide)."""
    return len({together(t) for t in tests}) <= 1 or sum(estimates[t] for t in tests) <= share_s


def period_of(estimates: Mapping[str, float], share_s: float = SHARE_S) -> int:
    """The fewest slices (at least PERIOD) whose packing fits every slice in the share."""
    count = PERIOD
    while not all(fits(s, estimates, share_s) for s in slices(estimates, count)):
        count += 1
    return count


def selected(ordinal: int, estimates: Mapping[str, float], share_s: float = SHARE_S) -> list[str]:
    """The nightly tests the commit with this ordinal runs."""
    plan = slices(estimates, period_of(estimates, share_s))
    return plan[ordinal % len(plan)]


def rotation_env(ordinal: int) -> dict[str, str]:
    """The sizes the rotation runs the nightly tests at, for the commit with this ordinal: the
    Jepsen-style variant runs ROTATION_ENV's few runs, from the next of `make test-all`'s seeds at
    each turn of the rotation (every PERIOD commits), so that its turns go through all of them."""
    runs = int(ROTATION_ENV["SILT_JEPSEN_RUNS"])
    return {**ROTATION_ENV, "SILT_JEPSEN_FIRST_RUN": str(runs * (ordinal // PERIOD) % JEPSEN_NIGHTLY_RUNS)}


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_ordinal(env: Mapping[str, str] = os.environ) -> tuple[int, str]:
    """(ordinal, where it came from): SILT_COMMIT_ORDINAL, else the first-parent count, else (a
    shallow clone, or no git) the commit's hash as a number; 0 when there is nothing at all."""
    given = env.get(ORDINAL_ENV, "").strip()
    if given:
        return int(given), ORDINAL_ENV
    if _git("rev-parse", "--is-shallow-repository") == "false":
        count = _git("rev-list", "--count", "--first-parent", "HEAD")
        if count:
            return int(count), "git rev-list --count --first-parent HEAD"
    commit = _git("rev-parse", "HEAD") or env.get(COMMIT_ENV, "").strip()
    if commit:
        return int(commit[:12], 16), f"the commit's hash {commit[:12]} (no first-parent count here)"
    return 0, f"nothing (no git, no {ORDINAL_ENV} or {COMMIT_ENV})"


def describe(ordinal: int, estimates: Mapping[str, float], share_s: float = SHARE_S) -> str:
    plan = slices(estimates, period_of(estimates, share_s))
    lines = [f"{len(estimates)} nightly tests in {len(plan)} slices of {share_s:.0f} s (estimated):"]
    for index, tests in enumerate(plan):
        total = sum(estimates[t] for t in tests)
        mark = "->" if index == ordinal % len(plan) else "  "
        lines.append(f"{mark} slice {index}: {total:5.0f} s" + ("" if total <= share_s else " (over the share)"))
        lines += [f"       {estimates[t]:5.0f} s  {t}" for t in tests]
    return "\n".join(lines)


# --- the pytest plugin ---------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{SLICE_MARK}: the nightly tests this commit runs in `make test`")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    nightly = [i for i in items if i.get_closest_marker("nightly") and not i.get_closest_marker("podman")]
    estimates = estimates_for(item.nodeid for item in nightly)
    ordinal = int(os.environ.get(ORDINAL_ENV) or commit_ordinal()[0])
    chosen = set(selected(ordinal, estimates))
    for item in nightly:
        if item.nodeid in chosen:
            item.add_marker(SLICE_MARK)
    config.stash[_SUMMARY] = f"commit ordinal {ordinal}\n{describe(ordinal, estimates)}"


_SUMMARY = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _SUMMARY in config.stash:
        terminalreporter.write_sep("-", "the rotating nightly slice")
        terminalreporter.write_line(config.stash[_SUMMARY])


def main(argv: list[str]) -> int:
    ordinal, source = (int(argv[0]), "the argument") if argv else commit_ordinal()
    print(f"commit ordinal {ordinal} (from {source})")
    print(describe(ordinal, estimates_for(ESTIMATES)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
