"""CPU time of processes, read from /proc: what the benchmarks quote beside wall times, since
it holds still on a loaded machine where wall times do not."""

from __future__ import annotations

import contextlib
import os
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


def cpu_seconds(pid: int | None) -> float:
    """User and system CPU seconds a process has used (0 once it is gone, or without one)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
