"""A pytest plugin that runs the 3-node Cassandra cluster's tests last, in their own order, and
stops the cluster as soon as the last of them is done.

The cluster starts on first use (tests/support/cassandra_cluster.py). Its tests are spread over
the suite (the replicas test under tests/e2e, the model test and the fault tests under
tests/integration, the Jepsen-style runs), so it was up for most of the `jvm` leg; three idle
nodes take about 6 % of a core (7.8 CPU-seconds in 120 s, measured on this machine), which over
a 24-minute leg is a minute and a half of CPU the legs share. After its last test the `jvm`
leg still runs files of the legs' shared pool (tests/support/work_sharing.py), none of which
needs the cluster: it is stopped then rather than at the session's end.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.support.cassandra_cluster import release_cluster

CLUSTER_MARK = "cassandra_cluster"
_LAST = pytest.StashKey[str]()
_DONE = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)  # after pytest's own ordering by higher-scoped fixtures, and `-m`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_cluster = [item for item in items if item.get_closest_marker(CLUSTER_MARK)]
    if on_cluster:
        others = [item for item in items if not item.get_closest_marker(CLUSTER_MARK)]
        items[:] = others + on_cluster
        config.stash[_LAST] = on_cluster[-1].nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Once the last cluster test is done and the next test is another file's (so that the
    module fixtures that ran stacks on the cluster are torn down), stop the cluster."""
    result = yield
    config = item.config
    if item.nodeid == config.stash.get(_LAST, None):
        config.stash[_DONE] = True
    if config.stash.get(_DONE, False) and (nextitem is None or nextitem.path != item.path):
        config.stash[_DONE] = False
        release_cluster()
    return result
