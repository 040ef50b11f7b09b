"""The test a leg is in, kept in a file beside the leg's log (tests/support/legs.py).

A fault in a C extension (grpc's core, the Cassandra driver's event loop) ends pytest at once:
nothing reports the test it was in, and what CI keeps of a long log may cut the fault handler's
dump short. With this file the legs' report names the test the leg was running when it died.
"""

from __future__ import annotations

import os

import pytest

ENV = "SILT_RUNNING_TEST_FILE"


def _write(text: str) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    # Whole or not at all: a fault between a truncation and a write would leave it empty.
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(partial, path)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _write(nodeid)


# First at the session's end, before the other plugins' work there (the leak check, the reports).
# The session's fixtures (its servers) are torn down with the last test's teardown, which
# still names that test.
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    _write("(the session's end)")
