"""A pytest plugin: the run fails if anything it started is still running at its end.

"Started by this run" means either a descendant of the pytest process, or a process that
carries this run's marker in its environment (RUN_MARKER_ENV, set before any fixture starts
anything and inherited by every child, grandchild and daemon). The marker catches what a
descendant walk cannot: a process re-parented to PID 1 because its parent died, like the
commit workers of a kill -9'd graveler. Other concurrent pytest runs on the machine carry
another marker and are not our descendants, so they are never reported.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

RUN_MARKER_ENV = "SILT_TEST_RUN_ID"
GRACE_SECONDS = 10.0  # services and JVMs stopped in teardown may still be exiting
_PROC = Path("/proc")


@dataclass(frozen=True)
class Leftover:
    pid: int
    ppid: int
    command: str


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None if it is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may contain spaces and parens
    return fields[0], int(fields[1])


def _command(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _carries_marker(pid: int, marker: bytes) -> bool:
    try:
        return marker in (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def leftovers(root_pid: int, run_id: str) -> list[Leftover]:
    """Live processes started by this run: root_pid's descendants and carriers of the marker."""
    marker = f"{RUN_MARKER_ENV}={run_id}".encode()
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] not in ("Z", "X"):  # a zombie holds nothing but a pid
                parents[int(entry.name)] = stat[1]
    found: list[Leftover] = []
    for pid, ppid in parents.items():
        if pid == root_pid:
            continue
        ancestor, hops = ppid, 0
        while ancestor not in (0, 1, root_pid) and ancestor in parents and hops < 256:
            ancestor, hops = parents[ancestor], hops + 1
        if ancestor == root_pid or _carries_marker(pid, marker):
            found.append(Leftover(pid, ppid, _command(pid)[:300]))
    return found


def pytest_configure(config: pytest.Config) -> None:
    # Only the controlling pytest process sets the marker; a nested run keeps its parent's.
    os.environ.setdefault(RUN_MARKER_ENV, uuid.uuid4().hex)


def _stop_spark_jvm() -> None:
    """PySpark's JVM outlives SparkSession.stop() until this interpreter exits; end it now."""
    import sys

    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        proc.stdin.close()  # the JVM exits when its stdin closes
        try:
            proc.wait(GRACE_SECONDS)
        except Exception:
            proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None


def _stop_resource_tracker() -> None:
    """multiprocessing's resource tracker of this process (started by in-process pools in
    tests) exits when this interpreter does; stop it now rather than report it."""
    import sys

    if "multiprocessing.resource_tracker" not in sys.modules:
        return
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _PROC.is_dir():
        return
    _stop_spark_jvm()
    _stop_resource_tracker()
    run_id = os.environ[RUN_MARKER_ENV]
    deadline = time.monotonic() + GRACE_SECONDS
    found = leftovers(os.getpid(), run_id)
    while found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = leftovers(os.getpid(), run_id)
    if not found:
        return
    lines = "\n".join(f"  pid {p.pid} (ppid {p.ppid}): {p.command}" for p in found)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"{len(found)} process(es) started by this test run are still running:\n{lines}"
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(message, red=True)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
