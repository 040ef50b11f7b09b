"""Fixtures of the auth suites: a whole stack per module and KV driver, and a log watch.

The log watch records every log line of the package at DEBUG (whatever the run's log
level) and fails the run if any secret issued during it shows up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.kv import open_store
from tests.integration.auth.support import ISSUED_SECRETS, Stack, start_stack

# Time passes only when a test says so (Stack.pass_cache_ttl): every call within a test hits
# the cache, however slow the machine.
CACHE_TTL = 60.0
STACK_DRIVERS = ["mem", "local"]


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="package", autouse=True)
def log_watch() -> Iterator[_Recorder]:
    recorder = _Recorder()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(recorder)
    root.setLevel(logging.DEBUG)
    try:
        yield recorder
    finally:
        root.removeHandler(recorder)
        root.setLevel(old_level)
    text = "\n".join(recorder.lines)
    leaked = [s[:4] + "..." for s in ISSUED_SECRETS if s in text]
    assert not leaked, f"{len(leaked)} secrets appear in the log output"


@pytest.fixture(scope="module", params=STACK_DRIVERS)
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("stack")
    store = open_store(DatabaseConfig(type=request.param, local=LocalDatabaseConfig(path=str(root / "kv.db"))))
    running = start_stack(store, root / "data", CACHE_TTL)
    try:
        yield running
    finally:
        running.close()
        store.close()
