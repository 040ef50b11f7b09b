"""`make bench-startup`: the CPU each service's process spends to start, one JSON object per line.

Every `silt run`, every replica a Deployment adds and every restart after a crash pays it, and
so does every test that starts a stack (a few hundred per `make test`, whose CPU bounds the
suite's time). For --runs stacks of auth, graveler and the gateway (silt.launcher.Stack on
127.0.0.1, free ports, local KV and blockstore, a temporary data directory), the user + sys
seconds of each process from its start until the whole stack is up (so auth's and graveler's
include answering the later services' start), read from /proc:

- `startup.auth_cpu_s`, `startup.graveler_cpu_s`, `startup.gateway_cpu_s`: each service
  (the gateway: the edge process, with the REST API and the web UI);
- `startup.commit_worker_cpu_s`: the commit worker graveler spawns at start, once it is idle
  (its CPU unchanged for half a second): what one more worker costs;
- `startup.setup_cpu_s`: the auth setup run the stack starts with (its keys and the admin).

Medians of the runs; min and max on stderr. Bytecode is compiled once, by a warm-up stack, as
an installed package has it (PYTHONPYCACHEPREFIX in the temporary directory, whatever
PYTHONDONTWRITEBYTECODE says).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.processes import cpu_seconds, process_tree
from bench.report import emit

SERVICES = ("auth", "graveler", "gateway")
WORKER_IDLE_S = 0.5
WORKER_WAIT_S = 60.0


def spawned_workers(pid: int) -> list[int]:
    """pid's descendants that multiprocessing spawned to run work, not its resource tracker."""
    workers = []
    for child in process_tree(pid)[1:]:
        try:
            if b"multiprocessing.spawn" in Path(f"/proc/{child}/cmdline").read_bytes():
                workers.append(child)
        except OSError:
            continue  # the child ended
    return workers


def idle_cpu_s(pid: int) -> float:
    """pid's CPU once it has stopped using any for WORKER_IDLE_S."""
    deadline = time.monotonic() + WORKER_WAIT_S
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(WORKER_IDLE_S)
        now = cpu_seconds(pid)
        if now == last:
            return now
        last = now
    raise RuntimeError(f"process {pid} was still busy after {WORKER_WAIT_S:.0f} s")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_stack(data_dir: Path) -> dict[str, float]:
    from silt.launcher import Stack

    before = children_cpu_s()
    stack = Stack(data_dir, ports=dict.fromkeys(SERVICES, 0), services=list(SERVICES), restart=False, log_level="WARN")
    stack.prepare()
    setup = children_cpu_s() - before  # the setup run, reaped
    with stack:
        figures = {"setup": setup}
        for name in SERVICES:
            pid = stack.pid(name)
            assert pid is not None, f"{name} is not running"
            figures[name] = cpu_seconds(pid)
        graveler = stack.pid("graveler")
        assert graveler is not None
        deadline = time.monotonic() + WORKER_WAIT_S
        while not (workers := spawned_workers(graveler)):
            if time.monotonic() > deadline:
                raise RuntimeError("graveler spawned no commit worker")
            time.sleep(0.05)
        figures["commit_worker"] = idle_cpu_s(workers[0])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    for key in [k for k in os.environ if k.startswith("SILT_")]:
        del os.environ[key]
    with tempfile.TemporaryDirectory(prefix="silt-bench-startup-") as tmp:
        # As installed: bytecode compiled once, by the warm-up stack, and read by every run after.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        one_stack(Path(tmp) / "warm-up")
        runs = [one_stack(Path(tmp) / f"run-{run}") for run in range(opts.runs)]
    for name in ("setup", *SERVICES, "commit_worker"):
        samples = [run[name] for run in runs]
        emit(f"startup.{name}_cpu_s", statistics.median(samples), "s", None)
        print(f"# startup.{name}_cpu_s: min {min(samples):.2f} max {max(samples):.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
