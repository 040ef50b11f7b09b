"""No process outlives its parent: kill -9 graveler after it spawned its commit workers, and
every process it started (workers, multiprocessing's resource tracker) exits within seconds;
kill -9 the launcher, and every service it started stops; kill -9 a test run, and its
moto_server goes too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from silt.graveler.v1 import graveler_pb2 as api
from silt.launcher import Stack
from tests.e2e.conftest import entry, graveler_stub
from tests.support.gateway_stack import gateway_stack
from tests.support.leaks import leftovers
from tests.support.wait import wait_until

GONE_WITHIN_SECONDS = 5.0


def _descendants(pid: int) -> list[int]:
    # leftovers() with a marker nobody carries: exactly pid's live descendants.
    return [p.pid for p in leftovers(pid, "no-such-run")]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _all_gone(pids: list[int], within: float, what: str) -> None:
    """Wait for every pid to exit; else kill the survivors (so one failure leaks nothing) and
    fail naming them."""
    try:
        wait_until(lambda: not any(_alive(p) for p in pids), within, what, interval=0.1)
    except AssertionError:
        survivors = [p for p in pids if _alive(p)]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"{what}: {survivors}") from None


def test_commit_workers_die_with_killed_graveler(tmp_path: Path) -> None:
    ports = {"auth": 0, "graveler": 0}
    with Stack(tmp_path, ports=ports, services=["auth", "graveler"], restart=False, on_event=lambda _: None) as stack:
        stub = graveler_stub(stack)
        stub.CreateRepository(
            api.CreateRepositoryRequest(name="hygiene", storage_namespace="local://hygiene"), timeout=30
        )
        stub.StageEntry(
            api.StageEntryRequest(repository="hygiene", branch="main", key="a", entry=entry("a")), timeout=30
        )
        stub.Commit(api.CommitRequest(repository="hygiene", branch="main", message="spawn workers"), timeout=60)
        graveler = stack.pid("graveler")
        assert graveler is not None
        children = _descendants(graveler)
        assert children, "graveler started no commit workers"
        os.kill(graveler, signal.SIGKILL)
        _all_gone(children, GONE_WITHIN_SECONDS, "graveler's children outlived it")


LAUNCHER = """
import sys, time
from silt.launcher import Stack
stack = Stack(sys.argv[1], ports={"auth": 0, "graveler": 0, "gateway": 0},
              services=["auth", "graveler", "gateway"], on_event=lambda _: None)
stack.start()
print("ready", flush=True)
time.sleep(600)
"""


def test_services_die_with_killed_launcher(tmp_path: Path) -> None:
    """A kill -9 of `silt run` (here: a process running the same launcher) stops every service."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        text=True,
    )
    try:
        assert launcher.stdout is not None and launcher.stdout.readline().strip() == "ready"
        services = _descendants(launcher.pid)
        assert len(services) >= 4  # auth, graveler (and its workers), gateway
        launcher.kill()
        launcher.wait()
        _all_gone(services, 15, "services outlived their launcher")  # each service stops in order first
    finally:
        if launcher.poll() is None:
            launcher.kill()


MOTO_PARENT = """
import sys, time
from pathlib import Path
from tests.support.moto import start_moto_server
process, _ = start_moto_server(Path(sys.argv[1]))
print(process.pid, flush=True)
time.sleep(600)
"""


def test_moto_server_dies_with_a_killed_test_run(tmp_path: Path) -> None:
    """A test run killed with -9 (here: a process starting moto_server as the fixture does)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", MOTO_PARENT, str(tmp_path / "moto.log")],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
        text=True,
    )
    assert parent.stdout is not None
    moto = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    _all_gone([moto], GONE_WITHIN_SECONDS, "moto_server outlived the test run that started it")


def test_gateway_workers_die_with_killed_gateway(tmp_path: Path) -> None:
    with gateway_stack(tmp_path / "data", workers=2) as stack:
        gateway = stack.stack.pid("gateway")
        assert gateway is not None
        # The port opens before uvicorn has started its workers.
        wait_until(lambda: len(_descendants(gateway)) >= 2, 30.0, "the gateway's two workers started", interval=0.1)
        workers = _descendants(gateway)
        os.kill(gateway, signal.SIGKILL)
        # A worker gets 5 s to stop in order.
        _all_gone(workers, GONE_WITHIN_SECONDS + 5, "gateway workers outlived it")
