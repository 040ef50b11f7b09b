"""The compactor leaves the disk to request serving: its threads run in the idle I/O class."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import os, threading, time
from services.compactor.priority import yield_disk
print(yield_disk(), flush=True)
started = threading.Event()
def worker():
    print(threading.get_native_id(), flush=True)
    started.set()
    time.sleep(30)
threading.Thread(target=worker, daemon=True).start()
started.wait(10)
time.sleep(30)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="I/O classes are Linux's")
def test_the_compactor_and_the_threads_it_starts_are_idle_for_the_disk() -> None:
    root = Path(__file__).resolve().parents[3]
    probe = subprocess.Popen([sys.executable, "-c", _PROBE], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert probe.stdout is not None
        assert probe.stdout.readline().strip() == "True"
        thread = probe.stdout.readline().strip()
        for task in (str(probe.pid), thread):
            # util-linux's ionice reads the class back with ioprio_get(2).
            shown = subprocess.run(["ionice", "-p", task], capture_output=True, text=True, timeout=10, check=True)
            assert shown.stdout.strip().endswith("idle"), (task, shown.stdout)
    finally:
        probe.kill()
        probe.wait(timeout=10)
