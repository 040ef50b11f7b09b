"""tests/support/leg_balance.py and work_sharing.py: the tests that need no JVM and start nothing
the other leg lacks go into a pool; each leg runs its own tests, then draws whole files from the
pool, longest first, claiming each; every test runs once, in the leg that claimed its file."""

from __future__ import annotations

import csv
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import leg_balance, legs, work_sharing


def test_a_test_runs_in_the_jvm_leg_when_it_needs_a_jvm() -> None:
    assert [leg_balance.leg_of(m) for m in (["spark"], ["cassandra", "e2e"], ["e2e"], [])] == [
        "jvm",
        "jvm",
        "rest",
        "rest",
    ]


@pytest.mark.parametrize(
    ("path", "marks", "expected"),
    [
        ("tests/unit/test_x.py", [], True),
        ("tests/unit/api/test_x.py", ["api"], True),
        ("tests/integration/graveler/test_x.py", [], True),
        ("tests/jepsen/test_jepsen.py", ["jepsen"], True),
        ("tests/e2e/test_gateway.py", ["e2e"], True),
        ("tests/e2e/gateway/test_fuzz.py", ["e2e"], True),
        ("tests/e2e/api/test_migrate_lakefs.py", ["e2e", "api"], True),
        # Their session fixtures start what only the rest leg starts, once for the whole suite.
        ("tests/e2e/gateway/test_clients.py", ["e2e"], False),
        ("tests/e2e/api/test_branches.py", ["e2e", "api"], False),
        ("tests/browser/test_browse.py", ["browser", "e2e"], False),
        ("tests/integration/block/test_conformance.py", [], False),
        # A test that needs a JVM is the jvm leg's own, wherever it lives.
        ("tests/integration/graveler/test_x.py", ["cassandra"], False),
        ("tests/e2e/test_spark.py", ["e2e", "spark"], False),
        ("tests/jepsen/test_jepsen.py", ["jepsen", "cassandra_cluster"], False),
        # The image builds of `make test-all` share podman's storage: one after the other.
        ("tests/e2e/test_images_podman.py", ["e2e", "podman"], False),
    ],
)
def test_what_goes_to_the_pool(path: str, marks: list[str], expected: bool) -> None:
    assert leg_balance.shared(path, marks) is expected


def test_the_pool_is_drawn_longest_first_and_an_unknown_file_among_the_short(tmp_path: Path) -> None:
    table = tmp_path / "estimates.tsv"
    leg_balance.write_estimates({"b.py": 30.0, "a.py": 30.0, "c.py": 90.0, "d.py": 0.5}, table)
    known = leg_balance.read_estimates(table)
    assert known == {"a.py": 30.0, "b.py": 30.0, "c.py": 90.0, "d.py": 0.5}
    assert leg_balance.pool_order(["d.py", "new.py", "a.py", "b.py", "c.py"], known) == [
        "c.py",
        "a.py",
        "b.py",
        "new.py",
        "d.py",
    ]
    assert leg_balance.read_estimates(tmp_path / "missing.tsv") == {}


def test_the_checked_in_estimates_name_only_shared_files() -> None:
    known = leg_balance.read_estimates()
    assert known, "tests/support/pool_estimates.tsv is empty"
    assert [f for f in known if not leg_balance.shared_file(f)] == []


def test_of_two_legs_claiming_a_file_at_once_exactly_one_wins(tmp_path: Path) -> None:
    claims = [work_sharing.Claims(tmp_path, leg) for leg in ("jvm", "rest")]
    files = [f"tests/unit/test_{n}.py" for n in range(200)]
    won: dict[str, list[str]] = {"jvm": [], "rest": []}
    start = threading.Barrier(2)

    def claim(mine: work_sharing.Claims) -> None:
        start.wait()
        won[mine.leg] = [f for f in files if mine.take(f)]

    threads = [threading.Thread(target=claim, args=(c,)) for c in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(won["jvm"] + won["rest"]) == sorted(files)
    assert all(claims[0].taker(f) == ("jvm" if f in won["jvm"] else "rest") for f in files)


@dataclass
class _Mark:
    name: str


class _Item:
    """What the pool's stream reads of a pytest item."""

    def __init__(self, nodeid: str, shared: bool = False) -> None:
        self.nodeid = nodeid
        self.shared = shared

    def get_closest_marker(self, name: str) -> _Mark | None:
        return _Mark(name) if self.shared and name == leg_balance.SHARED_MARK else None


def test_a_leg_runs_its_own_tests_then_the_pool_files_it_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leg_balance, "read_estimates", lambda: {"tests/unit/test_long.py": 50.0})
    items = [
        _Item("tests/unit/test_short.py::a", shared=True),
        _Item("test_own.py::a"),
        _Item("tests/unit/test_long.py::a", shared=True),
        _Item("tests/unit/test_long.py::b", shared=True),
        _Item("tests/unit/test_taken.py::a", shared=True),
        _Item("test_own.py::b"),
    ]
    assert work_sharing.Claims(tmp_path, "jvm").take("tests/unit/test_taken.py")
    stream = work_sharing._own_then_pool(items, work_sharing.Claims(tmp_path, "rest"))  # type: ignore[arg-type]
    assert [i.nodeid for i in stream] == [
        "test_own.py::a",
        "test_own.py::b",
        "tests/unit/test_long.py::a",
        "tests/unit/test_long.py::b",
        "tests/unit/test_short.py::a",
    ]


OWN = """
import pytest


@pytest.mark.cassandra
def test_the_jvm_legs_own():
    pass


def test_the_rest_legs_own():
    pass
"""

# Each shared test waits until both legs have claimed a file, so that neither leg can take the
# whole pool before the other starts (a leg that started late would otherwise find it empty),
# and counts its module fixture's set-ups in a file, to show a file's tests share one.
SHARED = """
import os
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def once():
    with open(os.environ["SETUPS"], "a") as out:
        out.write(__name__ + "\\n")


@pytest.mark.parametrize("n", range(3))
def test_shared(once, n):
    claims = Path(os.environ["SILT_LEG_CLAIMS"])
    deadline = time.monotonic() + 60
    while {p.read_text() for p in claims.iterdir()} != {"jvm", "rest"}:
        assert time.monotonic() < deadline, "the other leg never claimed a file"
        time.sleep(0.05)
"""


def _pool_suite(tmp_path: Path, own: str, pool_files: int) -> tuple[Path, list[str]]:
    """A suite of its own (its own ini and markers) with own tests and pool files of SHARED."""
    suite = tmp_path / "suite"
    (suite / "tests" / "unit").mkdir(parents=True)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    cassandra: x\n    cassandra_cluster: x\n    spark: x\n")
    (suite / "test_own.py").write_text(own)
    files = [f"tests/unit/test_pool_{n}.py" for n in range(pool_files)]
    for path in files:
        (suite / path).write_text(SHARED)
    return suite, files


def test_the_legs_share_the_pool_and_run_every_test_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite, files = _pool_suite(tmp_path, OWN, 6)
    setups = tmp_path / "setups"
    monkeypatch.setenv("SETUPS", str(setups))
    logs = tmp_path / "logs"
    assert legs.main(["-p", "no:cacheprovider", "-q", str(suite)], logs) == 0
    with (logs.parent / "test-times.tsv").open() as table:
        rows = list(csv.DictReader(table, delimiter="\t"))
    ran = [row["test"] for row in rows]
    legs_of = {row["test"].split("::")[-1]: row["leg"] for row in rows}
    assert len(ran) == len(set(ran)) == 2 + 3 * len(files), ran
    assert legs_of["test_the_jvm_legs_own"] == "jvm" and legs_of["test_the_rest_legs_own"] == "rest"
    shared_legs = {row["leg"] for row in rows if "test_pool_" in row["test"]}
    assert shared_legs == {"jvm", "rest"}
    # A file runs whole in one leg: its tests' leg is one, its module fixture set up once.
    by_file: dict[str, set[str]] = {}
    for row in rows:
        if "test_pool_" in row["test"]:
            by_file.setdefault(row["test"].split("::")[0], set()).add(row["leg"])
    assert len(by_file) == len(files) and all(len(found) == 1 for found in by_file.values())
    assert sorted(setups.read_text().split()) == sorted(f"test_pool_{n}" for n in range(6))
    # The claims name the leg that ran each file.
    claims = work_sharing.Claims(logs / "claims", "")
    assert {f: claims.taker(f) for f in files} == {path: next(iter(found)) for path, found in by_file.items()}


FAILING_OWN = """
import pytest


@pytest.mark.cassandra
def test_the_jvm_legs_own_fails():
    assert False, "on purpose"
"""


def test_a_file_claimed_by_a_leg_that_stops_early_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite, files = _pool_suite(tmp_path, FAILING_OWN, 3)
    monkeypatch.setenv("SETUPS", str(tmp_path / "setups"))
    logs = tmp_path / "logs"
    # -x: the jvm leg stops at its own failing test, after claiming the pool file it would have
    # run next (the claim comes before the test it follows).
    assert legs.main(["-p", "no:cacheprovider", "-x", str(suite)], logs) == 1
    claims = work_sharing.Claims(logs / "claims", "")
    taken = [f for f in files if claims.taker(f) == "jvm"]
    assert len(taken) == 1
    assert f"claimed and not run, as this leg stopped early: {taken[0]}" in (logs / "jvm.log").read_text()
    assert "claimed and not run" not in (logs / "rest.log").read_text()
