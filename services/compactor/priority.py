"""The compactor's claim on the CPU: compactions are batch work on a machine that also
answers requests (graveler's staging writes above all).

A lower priority alone is not enough: measured on a 2-vCPU VM (engine/core/builder.py,
worker_cpus), an unpinned CPU-bound process even at the lowest priority raised the p99 of
staging writes several times over, the same process pinned to one CPU left it as it was. So the
compactor runs niced and on the CPUs graveler's commit workers use
(`graveler.commit_worker_cpus`, by default the upper half), still taking any idle cycle there.

The disk is shared the same way: the compactor's range files are written and fsynced on the
device graveler's SQLite commits to, and a staging write waits for its commit's fsync. So
the compactor also asks for the idle I/O class (ioprio_set(2)), which the kernel's I/O
schedulers that know priorities (mq-deadline, BFQ) serve only when no one else waits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import sys

from engine.core.builder import worker_cpus

# Compactions share the CPU with request serving: let the scheduler prefer the latter.
NICENESS = 10

# ioprio_set(2) has no wrapper in the os module: its syscall number per architecture.
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}
_IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3
_IOPRIO_CLASS_SHIFT = 13


def yield_cpu(cpu_spec: str) -> set[int] | None:
    """Lower this process's priority and pin it to cpu_spec's CPUs; the CPUs, or None if unpinned."""
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = worker_cpus(cpu_spec, os.sched_getaffinity(0))
    if cpus is None:
        return None
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        return None
    return cpus


def yield_disk() -> bool:
    """Put this thread, and every thread it starts from now on, in the idle I/O class.

    False where the system has no I/O classes (not Linux, an unknown architecture) or refuses;
    the compactor then runs at the normal I/O priority, as before.
    """
    number = _IOPRIO_SET.get(platform.machine())
    if number is None or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    idle = IOPRIO_CLASS_IDLE << _IOPRIO_CLASS_SHIFT
    return int(libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, idle)) == 0
