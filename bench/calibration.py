"""How fast this machine is while a benchmark runs: one CPython loop and one fsync round, timed.

Benchmark figures are absolute times on whatever machine ran them, often shared and loaded. Each
`make bench-*` prints this calibration beside its figures (bench/report.py prints it before a
process's first figure), so a figure can be compared with one taken elsewhere, or on a busier
day, by the speed of the same fixed work:

* ``cpu_loop_s``: 10,000,000 additions in a CPython ``for`` loop (one core, interpreter-bound,
  as Silt's request handling is), wall time; ``cpu_loop_cpu_s`` the CPU time the loop got. On
  a loaded machine the first grows with the wait for a core, the second only with what sharing
  a core costs: compare wall figures with the first, CPU figures with the second;
* ``fsync_round_s``: 200 rounds of writing 4 KiB to a file and fsyncing it, in a temporary
  directory beside the benchmark's (the durable-write path of the KV store and the blockstore);
* ``wakeup_cpu_us``: the CPU time a thread is charged for waking from a 1 ms sleep, in
  microseconds (300 sleeps). The Python it runs between sleeps costs about a microsecond; on a
  bare machine a wake-up costs a few more, but on some virtual machines tens to hundreds (the
  virtual CPU's own wake-up, caches gone cold), and it grows with the time slept. A request
  that blocks and wakes k times (a thread hand-off, a call's reply, the GIL taken back) pays
  k of them in its CPU per request: compare such figures with this one.

One JSON object on one line, `{"name": "calibration", ...}`, the load average with it.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass

LOOP_ADDITIONS = 10_000_000
FSYNC_ROUNDS = 200
FSYNC_BYTES = 4096
WAKEUPS = 300
WAKEUP_SLEEP_S = 0.001


@dataclass(frozen=True)
class Calibration:
    cpu_loop_s: float
    cpu_loop_cpu_s: float
    fsync_round_s: float
    wakeup_cpu_us: float
    load_1m: float
    cpus: int
    python: str


def cpu_loop(additions: int = LOOP_ADDITIONS) -> tuple[float, float]:
    """Wall and CPU seconds for `additions` additions in a plain CPython loop."""
    started, cpu_started = time.perf_counter(), time.thread_time()
    total = 0
    for i in range(additions):
        total += i
    elapsed, cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    assert total == additions * (additions - 1) // 2  # the loop ran, whatever the optimizer
    return elapsed, cpu


def fsync_round(rounds: int = FSYNC_ROUNDS, size: int = FSYNC_BYTES, directory: str | None = None) -> float:
    """Seconds for `rounds` writes of `size` bytes, each followed by an fsync, in a temporary
    file under directory (the system's temporary directory by default)."""
    block = os.urandom(size)
    with tempfile.TemporaryDirectory(prefix="silt-calibration-", dir=directory) as tmp:
        fd = os.open(os.path.join(tmp, "fsync"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            started = time.perf_counter()
            for _ in range(rounds):
                os.pwrite(fd, block, 0)
                os.fsync(fd)
            return time.perf_counter() - started
        finally:
            os.close(fd)


def wakeup_cpu(wakeups: int = WAKEUPS, sleep_s: float = WAKEUP_SLEEP_S) -> float:
    """CPU microseconds this thread is charged per wake-up from a sleep of sleep_s."""
    started = time.thread_time()
    for _ in range(wakeups):
        time.sleep(sleep_s)
    return (time.thread_time() - started) / wakeups * 1e6


def calibrate() -> Calibration:
    wall, cpu = cpu_loop()
    return Calibration(
        cpu_loop_s=wall,
        cpu_loop_cpu_s=cpu,
        fsync_round_s=fsync_round(),
        wakeup_cpu_us=wakeup_cpu(),
        load_1m=os.getloadavg()[0],
        cpus=os.cpu_count() or 1,
        python=platform.python_version(),
    )


def calibration_line(calibration: Calibration) -> str:
    fields = asdict(calibration)
    for name in ("cpu_loop_s", "cpu_loop_cpu_s", "fsync_round_s", "load_1m"):
        fields[name] = round(fields[name], 3)
    fields["wakeup_cpu_us"] = round(fields["wakeup_cpu_us"], 1)
    return json.dumps({"name": "calibration", **fields})


def main() -> None:
    print(calibration_line(calibrate()), flush=True)


if __name__ == "__main__":
    main()
