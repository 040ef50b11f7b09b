"""The benchmarks' CPU figures of other processes: to the nanosecond, and 0 for a process gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.processes import cpu_seconds


def test_a_process_cpu_is_read_finer_than_clock_ticks() -> None:
    # /proc counts in ticks of 10 ms; the process's own count agrees with the reading to far less.
    burn_until = time.process_time() + 0.013
    while time.process_time() < burn_until:
        pass
    read, own = cpu_seconds(os.getpid()), time.process_time()
    assert abs(read - own) < 0.002, (read, own)


def test_another_process_cpu_counts_its_work_and_a_gone_one_reads_zero() -> None:
    code = (
        "import time\n"
        "end = time.process_time() + 0.2\n"
        "while time.process_time() < end: pass\n"
        "print(flush=True)\n"
        "input()"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        child.stdout.readline()  # its 0.2 s of work are done
        assert 0.2 <= cpu_seconds(child.pid) < 2.0
    finally:
        child.kill()
        child.wait()
    assert cpu_seconds(child.pid) == 0.0
    assert cpu_seconds(None) == 0.0
