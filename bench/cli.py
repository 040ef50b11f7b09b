"""`make bench-cli`: what one `silt` invocation costs, one JSON object per line.

Scripts and shell completion run the CLI thousands of times, so what counts is the CPU a
fresh interpreter spends before it answers: user + sys seconds of the whole process
(os.wait4), the median of --runs runs, for

- `cli.version_cpu_s`: `python -m cli.main --version`. Target: 0.15 s.
- `cli.help_cpu_s`: `python -m cli.main --help` (every command's name and help).
- `cli.repo_list_cpu_s`: `python -m cli.main repo list` against a stack this benchmark
  starts itself (silt.launcher.Stack on 127.0.0.1, free ports, a temporary data directory):
  configuration (cached: cli/config_cache.py, filled by the warm-up run), credentials,
  one REST API call (cli/rest.py). Target: 0.15 s.

Wall time is printed as a note on stderr; it includes waiting for the stack's answer. Bytecode
is compiled once, by a warm-up run, as an installed package has it (PYTHONPYCACHEPREFIX in the
temporary directory, whatever PYTHONDONTWRITEBYTECODE says).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.report import emit

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU_S = 0.15


def cpu_seconds(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(user + sys, wall) seconds of one `python -m cli.main ARGS`; it must succeed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", *args], env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here, for its own rusage
        wall = time.perf_counter() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            out.seek(0)
            err.seek(0)
            raise RuntimeError(f"silt {' '.join(args)} -> {code}: {err.read().decode()}{out.read().decode()}")
    return usage.ru_utime + usage.ru_stime, wall


def measure(name: str, args: list[str], env: dict[str, str], cwd: Path, runs: int, target: float | None) -> None:
    cpu_seconds(args, env, cwd)  # warm-up: the page cache, .pyc files
    samples = [cpu_seconds(args, env, cwd) for _ in range(runs)]
    cpus = [cpu for cpu, _ in samples]
    walls = [wall for _, wall in samples]
    emit(name, statistics.median(cpus), "s", target)
    print(
        f"# {name}: cpu min {min(cpus):.3f} max {max(cpus):.3f}, wall median {statistics.median(walls):.3f} s",
        file=sys.stderr,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    opts = parser.parse_args()

    # Nothing from the developer's environment may point the CLI elsewhere.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    base["PYTHONPATH"] = str(REPO_ROOT)
    with tempfile.TemporaryDirectory(prefix="silt-bench-cli-") as tmp:
        # As installed: bytecode compiled once (by the warm-up run), not on every run, even
        # where the environment says PYTHONDONTWRITEBYTECODE; kept out of the checkout.
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        base["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        # The CLI's configuration cache (cli/config_cache.py) starts empty: the warm-up run
        # validates and fills it, as a user's first command after a change does.
        base["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        cwd = Path(tmp) / "cwd"
        cwd.mkdir()
        measure("cli.version_cpu_s", ["--version"], base, cwd, opts.runs, TARGET_CPU_S)
        measure("cli.help_cpu_s", ["--help"], base, cwd, opts.runs, None)

        from silt.launcher import Stack, available_services

        ports = dict.fromkeys(available_services(), 0)
        with Stack(Path(tmp) / "data", ports=ports, on_event=lambda _: None, log_level="WARN") as stack:
            env = {**base, **stack.env_for_clients()}
            measure("cli.repo_list_cpu_s", ["repo", "list"], env, cwd, opts.runs, TARGET_CPU_S)


if __name__ == "__main__":
    main()
