"""Attaches the recent warnings and errors of the services a failing test ran to its report.

A test that drives services as processes (silt/launcher.py: logs/<service>.log under the test's
temporary directory) often fails with nothing but a client-side timeout; the cause is in the
service's log, which is gone with the machine when CI fails. This adds, to each failing test's
report, the log lines at WARNING and above written while the test ran (a few per file).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from pathlib import Path

import pluggy
import pytest

LINES_PER_FILE = 12
MAX_FILES = 8
WORTH_SHOWING = ("WARNING", "ERROR", "CRITICAL", "Traceback", "Error:", "exited", "stopped")


def _recent_logs(base: Path, since: float) -> list[Path]:
    logs = [p for p in base.glob("**/logs/*.log") if p.stat().st_mtime >= since]
    return sorted(logs, key=lambda p: p.stat().st_mtime, reverse=True)[:MAX_FILES]


def _notable_tail(path: Path) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line[:400] for line in lines if any(word in line for word in WORTH_SHOWING)][-LINES_PER_FILE:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    started = time.time() - (call.duration or 0.0) - 1.0
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    try:
        base = item.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return
    sections = []
    for path in _recent_logs(base, started):
        tail = _notable_tail(path)
        if tail:
            sections.append(f"{path.relative_to(base)}:\n" + "\n".join(tail))
    if sections:
        report.sections.append(("services' recent warnings and errors", "\n\n".join(sections)))
