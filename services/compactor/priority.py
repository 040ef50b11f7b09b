"""The compactor's claim on the CPU: compactions are batch work on a machine that also
answers requests (graveler's staging writes above all).

A lower priority alone is not enough: measured on a 2-vCPU VM (services/graveler/builder.py,
worker_cpus), an unpinned CPU-bound process even at SCHED_IDLE raised the p99 of staging
writes several times over, the same process pinned to one CPU left it as it was. So the
compactor runs niced and on the CPUs graveler's commit workers use
(`graveler.commit_worker_cpus`, by default the upper half), still taking any idle cycle there.
"""

from __future__ import annotations

import contextlib
import os

from services.graveler.builder import worker_cpus

# Compactions share the CPU with request serving: let the scheduler prefer the latter.
NICENESS = 10


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
