"""CPU time of processes, read from their CPU-time clocks: what the benchmarks quote beside wall
times, since it holds still on a loaded machine where wall times do not."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path


def process_tree(pid: int) -> list[int]:
    """pid and every process descended from it."""
    # Every thread's children: a child is listed under the thread that started it (a span
    # export process under the span processor's thread, not the main one).
    pids = [pid]
    with contextlib.suppress(OSError):
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                for child in children.read_text().split():
                    pids += process_tree(int(child))
    return pids


def _process_cpu_clock(pid: int) -> int:
    """Linux's CPU-time clock of another process (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) in
    the kernel's posix-cpu-timers): its threads' run time, those ended included, in nanoseconds."""
    return ((~pid) << 3) | 2


def cpu_seconds(pid: int | None) -> float:
    """User and system CPU seconds a process has used (0 once it is gone, or without one).

    Read from the process's CPU-time clock, to the nanosecond: /proc's figure counts in clock
    ticks (10 ms), and a figure per request over a few hundred requests of a few processes
    moved by a fifth from rounding alone. /proc where the clock cannot be read."""
    if pid is None:
        return 0.0
    with contextlib.suppress(OSError):
        return time.clock_gettime_ns(_process_cpu_clock(pid)) / 1e9
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
