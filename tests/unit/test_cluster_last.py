"""tests/support/cluster_last.py: the 3-node cluster's tests run last among a leg's own tests, and
the cluster is stopped once the last of them is done, before the leg goes on to the shared pool's
files (tests/support/work_sharing.py), none of which needs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import cluster_last, legs


class _Config:
    stash = pytest.Stash()


class _Item:
    def __init__(self, name: str, *marks: str) -> None:
        self.name, self.nodeid, self.marks = name, f"test_x.py::{name}", set(marks)

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.marks else None


def test_the_clusters_tests_go_last_and_keep_their_order() -> None:
    items: list[Any] = [
        _Item("replicas[node]", "cassandra"),
        _Item("replicas[cluster]", "cassandra_cluster"),
        _Item("unit"),
        _Item("faults", "cassandra_cluster"),
        _Item("model[cassandra]", "cassandra"),
    ]
    cluster_last.pytest_collection_modifyitems(_Config(), items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["replicas[node]", "unit", "model[cassandra]", "replicas[cluster]", "faults"]


def test_a_run_without_the_cluster_is_left_as_it_is() -> None:
    items: list[Any] = [_Item("b"), _Item("a", "cassandra")]
    before = list(items)
    cluster_last.pytest_collection_modifyitems(_Config(), items)  # type: ignore[arg-type]
    assert items == before


def test_it_runs_after_the_hooks_that_order_and_deselect() -> None:
    # pytest's own reordering by higher-scoped fixtures, and `-m`, come first.
    assert cluster_last.pytest_collection_modifyitems.pytest_impl["trylast"]  # type: ignore[attr-defined]


# A stand-in for the cluster: a session fixture whose stop, like the real one's, is released
# early through cassandra_cluster.py's list, and that writes each event to a file.
CONFTEST = """
import os

import pytest

from tests.support import cassandra_cluster


def _event(text):
    with open(os.environ["EVENTS"], "a") as out:
        out.write(text + "\\n")


@pytest.fixture(scope="session")
def cluster():
    stop = cassandra_cluster._once(lambda: _event("cluster stopped"))
    cassandra_cluster._RELEASES.append(stop)
    _event("cluster started")
    yield
    stop()
"""

ON_CLUSTER = """
import pytest


@pytest.mark.cassandra_cluster
@pytest.mark.parametrize("n", range(2))
def test_on_the_cluster(cluster, n):
    pass


@pytest.mark.cassandra
def test_a_jvm_leg_test_that_comes_first():
    pass
"""

# Each pool file waits until both legs have claimed one (so that the jvm leg gets some), then
# says, in the jvm leg, whether the cluster was already stopped.
POOL = """
import os
import time
from pathlib import Path


def test_in_the_pool():
    claims = Path(os.environ["SILT_LEG_CLAIMS"])
    deadline = time.monotonic() + 60
    while {p.read_text() for p in claims.iterdir()} != {"jvm", "rest"}:
        assert time.monotonic() < deadline, "the other leg never claimed a file"
        time.sleep(0.05)
    if os.environ["SILT_LEG"] == "jvm":
        with open(os.environ["EVENTS"], "a") as out:
            out.write("a pool test in the jvm leg\\n")
"""


def test_the_cluster_stops_after_its_last_test_before_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = tmp_path / "suite"
    (suite / "tests" / "unit").mkdir(parents=True)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    cassandra: x\n    cassandra_cluster: x\n    spark: x\n")
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_on_cluster.py").write_text(ON_CLUSTER)
    for n in range(4):
        (suite / "tests" / "unit" / f"test_pool_{n}.py").write_text(POOL)
    events = tmp_path / "events"
    monkeypatch.setenv("EVENTS", str(events))
    args = ["-p", "no:cacheprovider", "-p", "tests.support.cluster_last", "-q", str(suite)]
    assert legs.main(args, tmp_path / "logs") == 0
    seen = events.read_text().splitlines()
    assert seen.count("cluster started") == 1 and seen.count("cluster stopped") == 1, seen
    in_pool = [i for i, event in enumerate(seen) if event == "a pool test in the jvm leg"]
    assert in_pool, seen
    assert seen.index("cluster stopped") < in_pool[0], seen
