"""The end-of-run check finds what this run started, orphans included, and nothing of other runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.support.leaks import RUN_MARKER_ENV, leftovers
from tests.support.wait import wait_until

# The sleep must not hold our pipes open, or run() would wait for it.
ORPHAN = (
    "import subprocess; "
    "print(subprocess.Popen(['sleep', '30'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
)


def _orphan(marker: str) -> int:
    """A sleep whose parent has exited: re-parented away from us, carrying marker."""
    env = {**os.environ, RUN_MARKER_ENV: marker}
    done = subprocess.run([sys.executable, "-c", ORPHAN], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_finds_orphans_of_this_run_only() -> None:
    ours, theirs = _orphan("run-a"), _orphan("run-b")
    try:
        found = {p.pid for p in leftovers(os.getpid(), "run-a")}
        assert ours in found
        assert theirs not in found
    finally:
        os.kill(ours, signal.SIGKILL)
        os.kill(theirs, signal.SIGKILL)


def test_finds_live_descendants() -> None:
    child = subprocess.Popen(["sleep", "30"], env={k: v for k, v in os.environ.items() if k != RUN_MARKER_ENV})
    try:
        assert child.pid in {p.pid for p in leftovers(os.getpid(), "unrelated")}
    finally:
        child.kill()
        child.wait()
    wait_until(
        lambda: child.pid not in {p.pid for p in leftovers(os.getpid(), "unrelated")}, 5, "the reaped child gone"
    )
