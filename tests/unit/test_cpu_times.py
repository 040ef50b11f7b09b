"""tests/support/cpu_times.py: a test's CPU counts what live descendants spent, not only what
this process and its reaped children did."""

from __future__ import annotations

import subprocess
import sys

from tests.support.cpu_times import process_tree_cpu_seconds

BURN_THEN_WAIT = (
    "import sys, time\n"
    "ends = time.process_time() + 0.4\n"
    "while time.process_time() < ends:\n    pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_a_live_grandchilds_cpu_counts_before_anyone_reaps_it() -> None:
    before = process_tree_cpu_seconds()
    # A shell between us and the burner: the burner is a grandchild, still running when read.
    child = subprocess.Popen(
        ["/bin/sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, BURN_THEN_WAIT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        spent = process_tree_cpu_seconds() - before
        assert 0.35 <= spent < 5.0, spent
    finally:
        assert child.stdin is not None
        child.stdin.close()  # the burner reads its end, then both exit
        try:
            child.wait(timeout=30)
        finally:
            child.kill()
