"""A pytest plugin that runs the 3-node Cassandra cluster's tests last, in their own order.

The cluster starts on first use (tests/support/cassandra_cluster.py) and stays up to the end of
the run. Its tests are spread over the suite (the replicas test under tests/e2e, the model test
and the fault tests under tests/integration, the Jepsen-style runs), so it was up for most of
the `jvm` leg; three idle nodes take about 6 % of a core (7.8 CPU-seconds in 120 s, measured
on this machine), which over a 24-minute leg is a minute and a half of CPU the legs share.
"""

from __future__ import annotations

import pytest

CLUSTER_MARK = "cassandra_cluster"


@pytest.hookimpl(trylast=True)  # after pytest's own ordering by higher-scoped fixtures, and `-m`
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    on_cluster = [item for item in items if item.get_closest_marker(CLUSTER_MARK)]
    if on_cluster:
        others = [item for item in items if not item.get_closest_marker(CLUSTER_MARK)]
        items[:] = others + on_cluster
