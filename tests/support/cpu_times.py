"""Each test's CPU seconds, beside its wall time in the legs' JUnit XML (a `cpu_seconds` property).

The suite runs two legs side by side on two cores and keeps both busy, so what a test costs the
run is its CPU, not its wall time: a test that sleeps costs little, one that starts a stack of
services costs its processes' start-up. A test's CPU here is this pytest process's own plus that
of every child it reaped (services started and stopped by the test or its fixtures, and their
own reaped children), from the start of its setup to the end of its teardown. A child's CPU
counts only once it is reaped, so it all lands on the test in which it is reaped: a module's
stack, stopped in its last test's teardown, counts whole in that test, and processes that
outlive every test (the session's Cassandra nodes and Spark JVM) count in none. Rank files and
directories by it; a single test's figure may carry its module's services.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

PROPERTY = "cpu_seconds"
_STARTED = pytest.StashKey[float]()


def process_cpu_seconds() -> float:
    """This process's CPU and its reaped children's, user and system."""
    spent = os.times()
    return spent.user + spent.system + spent.children_user + spent.children_system


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_STARTED] = process_cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    # Before the teardown's report is made: the JUnit writer takes a test's properties from it.
    started = item.stash.get(_STARTED, None)
    if started is not None:
        item.user_properties.append((PROPERTY, f"{process_cpu_seconds() - started:.3f}"))
