"""`make test` in legs run side by side: one pytest per leg, at the same time, then one report.

Most of the suite waits on other processes (servers starting, clients and services talking over
loopback, a JVM warming up), so two pytest processes on two cores finish well before one does.
Two, not more: with two legs the cores are already busy about 96 % of the run (scripts/ci-cold.sh's
CPU trace), and a third leg (tried: Cassandra's tests, Spark's with the browser's and the API's,
the rest) made each leg about 1.6 times as slow, which gained nothing.
The legs split by what their session fixtures start: the JVM leg holds every test that needs
Cassandra, the 3-node cluster or Spark, so each of those servers is started once, in one
process; the other leg holds the rest. The tests that need no JVM and start nothing only the
other leg has are a pool both legs draw whole files from at run time, once each has run its own
(tests/support/leg_balance.py, work_sharing.py), so the legs end together. Each leg is a
whole pytest run of its own: its own session fixtures, its own leak check
(tests/support/leaks.py marks each run's processes), its own slowest-tests list.

    python -m tests.support.legs [--nightly-slice] [PYTEST ARGS...]

A `-m EXPR` among the arguments narrows every leg (`(EXPR) and (LEG)`); paths and other options
go to each leg unchanged. A leg that collects nothing is not a failure unless none collects
anything. `--nightly-slice` has every leg mark the commit's slice of the nightly tests
`nightly_slice` (tests/support/rotation.py), for `make test`'s `-m "... (not nightly or
nightly_slice)"`. The logs go to build/test-legs/<leg>.log (every test's time to <leg>.xml, merged at
the end into build/test-times.tsv: tests/support/times.py); they are
printed whole when every leg has ended, the failing leg first, then each leg's time and
result with its failed and erroring tests named again (what CI keeps of a long log may be its
end only), and last one closing line that adds the legs up.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from ctypes import CDLL
from dataclasses import dataclass
from pathlib import Path

from tests.support import leg_balance, rotation, running_test, times, work_sharing

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_DIR = REPO_ROOT / "build" / "test-legs"
JVM_MARKS = " or ".join(leg_balance.JVM_MARKS)
SHARED = leg_balance.SHARED_MARK
# (name, marker expression): each test that needs a JVM in the first, every other in the second,
# and both select the shared files' tests, each of which only the leg that claims its file runs
# (tests/support/work_sharing.py).
LEGS = (
    ("jvm", f"({JVM_MARKS}) or {SHARED}"),
    ("rest", f"not ({JVM_MARKS})"),
)
# Far above the suite's budget and under CI's limit: a run that hangs is ended and reported.
RUN_TIMEOUT_S = 80 * 60.0
NO_TESTS_COLLECTED = 5
_PR_SET_PDEATHSIG = 1
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")
# pytest's closing line, bare under -q or between rules of '=': "3 passed, 1 skipped in 2.01s".
_SUMMARY = re.compile(r"^(no tests ran|\d+ [a-z]+(, \d+ [a-z]+)*) in [\d.]+s\b")
# pytest's short test summary names each failed or erroring test on a line of its own.
_NOT_PASSED = ("FAILED ", "ERROR ")
MAX_NAMED = 20
MAX_FAULT_LINES = 16
# The signals of a fault in the process itself, after which Python's fault handler has dumped
# the threads; SIGTERM and SIGKILL come from outside (the run's timeout) and leave no dump.
FAULT_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT})
NIGHTLY_SLICE = "--nightly-slice"


@dataclass
class Leg:
    name: str
    marks: str
    log: Path
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None

    @property
    def running_file(self) -> Path:
        return self.log.with_suffix(".running")

    def counts(self) -> dict[str, int]:
        """The leg's closing pytest line, as counts by outcome ('error' for errors)."""
        summary = ""
        for line in self.log.read_text(errors="replace").splitlines():
            if _SUMMARY.match(line.strip("= ")):
                summary = line
        counts: dict[str, int] = {}
        for number, word in _COUNT.findall(summary):
            key = {"errors": "error", "warnings": "warning"}.get(word, word)
            counts[key] = counts.get(key, 0) + int(number)
        return counts

    def not_passed(self) -> list[str]:
        """The leg's failed and erroring tests, as pytest's short summary names them (cut short)."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [line[:300] for line in lines if line.startswith(_NOT_PASSED)]

    @property
    def ok(self) -> bool:
        return self.returncode in (0, NO_TESTS_COLLECTED)


def split_marks(args: list[str]) -> tuple[str | None, list[str]]:
    """The last `-m EXPR` (pytest keeps the last one) and the other arguments."""
    marks: str | None = None
    rest: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "-m":
            marks = next(it, "")
        elif arg.startswith("-m") and len(arg) > 2 and not arg.startswith("-m="):
            marks = arg[2:]
        else:
            rest.append(arg)
    return marks, rest


def leg_marks(user: str | None, leg: str) -> str:
    return f"({user}) and ({leg})" if user else leg


def _die_with_parent() -> None:
    """The kernel ends a leg whose runner dies without ending it (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(leg: Leg, args: list[str], claims: Path, env: dict[str, str] | None = None) -> None:
    leg.log.parent.mkdir(parents=True, exist_ok=True)
    leg.running_file.unlink(missing_ok=True)
    with leg.log.open("wb") as out:
        # A session of its own, so that a timeout or an interrupt ends the leg with everything
        # it started; the leak check of each leg still fails it if a process outlives its tests.
        leg.process = subprocess.Popen(
            # Every test's time, beside the log, for balancing the legs.
            [
                sys.executable,
                "-m",
                "pytest",
                f"--junitxml={leg.log.with_suffix('.xml')}",
                "-p",
                "tests.support.running_test",
                "-p",
                "tests.support.work_sharing",
                "-m",
                leg.marks,
                *args,
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={
                **(os.environ if env is None else env),
                running_test.ENV: str(leg.running_file),
                work_sharing.CLAIMS_ENV: str(claims),
                work_sharing.LEG_ENV: leg.name,
            },
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    leg.started = time.monotonic()


def _stop(legs: list[Leg], sig: int) -> None:
    for leg in legs:
        if leg.process is not None and leg.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leg.process.pid, sig)


def _wait(legs: list[Leg], timeout_s: float) -> bool:
    """Wait for every leg, each timed to its own end; False if the time ran out first (the legs
    are then ended)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for leg in legs:
            assert leg.process is not None
            if leg.returncode is None and (code := leg.process.poll()) is not None:
                leg.returncode = code
                leg.seconds = time.monotonic() - leg.started
        if all(leg.returncode is not None for leg in legs):
            return True
        if time.monotonic() > deadline:
            _stop(legs, signal.SIGTERM)
            time.sleep(10)
            _stop(legs, signal.SIGKILL)
            for leg in legs:
                assert leg.process is not None
                leg.returncode = leg.process.wait()
                leg.seconds = leg.seconds or time.monotonic() - leg.started
            return False
        time.sleep(0.5)


def killed(leg: Leg) -> list[str]:
    """For a leg a signal ended: the signal, the test it was in, and the fault handler's dump of
    the thread that faulted (the log's own copy is printed above it, and may be cut short)."""
    if leg.returncode is None or leg.returncode >= 0:
        return []
    try:
        name = signal.Signals(-leg.returncode).name
    except ValueError:
        name = f"signal {-leg.returncode}"
    try:
        running = leg.running_file.read_text(errors="replace").strip() or "(before the first test)"
    except OSError:
        running = "(before the first test)"
    lines = [f"ended by {name} in {running}"]
    if -leg.returncode not in FAULT_SIGNALS:
        return lines  # ended from outside (the run's timeout, an interrupt): no dump to show
    log = leg.log.read_text(errors="replace").splitlines()
    # The last dump: a child's output or an earlier dump may be in the log too.
    fatal = next((i for i in reversed(range(len(log))) if "Fatal Python error" in log[i]), None)
    if fatal is None:
        return lines
    lines.append(log[fatal][log[fatal].index("Fatal Python error") :])
    current = next((i for i in range(fatal, len(log)) if log[i].startswith("Current thread")), None)
    if current is None:
        lines.append(
            "no 'Current thread' in the dump: the fault was in a thread without Python's state (one a C"
            " extension started), or past the fault handler's 100 threads"
        )
        return lines
    end = next((i for i in range(current, len(log)) if not log[i].strip()), len(log))
    lines.extend(log[current : min(end, current + MAX_FAULT_LINES)])
    return lines


def _report(legs: list[Leg], timed_out: bool) -> int:
    for leg in sorted(legs, key=lambda leg: leg.ok):  # a failing leg first: its lines are kept
        print(f"\n######## leg {leg.name}: pytest -m {leg.marks!r} ########", flush=True)
        sys.stdout.write(leg.log.read_text(errors="replace"))
    print("\n######## legs ########")
    total: dict[str, int] = {}
    for leg in legs:
        counts = leg.counts()
        for key, value in counts.items():
            total[key] = total.get(key, 0) + value
        shown = ", ".join(f"{v} {k}" for k, v in counts.items()) or "no tests"
        print(f"{leg.name}: {leg.seconds / 60:.1f} min, exit {leg.returncode}, {shown}")
        for line in killed(leg):
            print(f"  {line}")
        named = leg.not_passed()
        for line in named[:MAX_NAMED]:
            print(f"  {line}")
        if len(named) > MAX_NAMED:
            print(f"  ... and {len(named) - MAX_NAMED} more (build/test-legs/{leg.name}.log)")
    if timed_out:
        print(f"the legs were ended after {RUN_TIMEOUT_S / 60:.0f} min")
    failed = total.get("failed", 0) + total.get("error", 0)
    skipped = total.get("skipped", 0)
    print(f"total: {total.get('passed', 0)} passed, {failed} failed, {skipped} skipped", flush=True)
    if timed_out:
        return 1
    failing = [leg.returncode for leg in legs if not leg.ok]
    if failing:
        return failing[0] or 1
    if all(leg.returncode == NO_TESTS_COLLECTED for leg in legs):
        return NO_TESTS_COLLECTED
    return 0


def nightly_slice(args: list[str]) -> tuple[list[str], dict[str, str] | None]:
    """With `--nightly-slice` among the arguments: the legs' pytest arguments with the rotation's
    plugin (tests/support/rotation.py, which marks this commit's nightly tests `nightly_slice`)
    and their environment (the commit's ordinal, found once here for every leg, and the sizes the
    rotation runs the nightly tests at). Without it, the arguments as they are."""
    if NIGHTLY_SLICE not in args:
        return args, None
    ordinal, source = rotation.commit_ordinal()
    print(f"nightly slice: commit ordinal {ordinal} (from {source})", flush=True)
    env = {**rotation.rotation_env(ordinal), **os.environ, rotation.ORDINAL_ENV: str(ordinal)}
    return ["-p", "tests.support.rotation", *(a for a in args if a != NIGHTLY_SLICE)], env


def main(argv: list[str], log_dir: Path = LOG_DIR) -> int:
    argv, env = nightly_slice(argv)
    user_marks, args = split_marks(argv)
    legs = [Leg(name, leg_marks(user_marks, marks), log_dir / f"{name}.log") for name, marks in LEGS]

    def interrupted(signum: int, _frame: object) -> None:
        _stop(legs, signal.SIGTERM)
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGTERM, signal.SIGINT)}
    # A runner whose make (or shell) is killed gets SIGTERM too, and so stops its legs, instead
    # of running them on with no one to report to; one whose parent is already gone stops now.
    parent = os.getppid()
    _die_with_parent()
    try:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
        # The shared files' claims, empty at every run's start (tests/support/work_sharing.py).
        claims = log_dir / "claims"
        shutil.rmtree(claims, ignore_errors=True)
        claims.mkdir(parents=True)
        for leg in legs:
            _start(leg, args, claims, env)
            print(f"leg {leg.name} started: pytest -m {leg.marks!r} (log: {leg.log})", flush=True)
        timed_out = not _wait(legs, RUN_TIMEOUT_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _write_times(log_dir)
    return _report(legs, timed_out)


def _write_times(log_dir: Path) -> None:
    """The legs' JUnit XMLs merged into one table beside log_dir (build/test-times.tsv)."""
    try:
        rows = times.merge_legs(log_dir)
        # A run that ran nothing (--collect-only) keeps the last run's table.
        path = times.write_times(rows, log_dir.parent / times.TIMES_FILE.name) if rows else None
    except (OSError, ET.ParseError) as exc:  # a leg ended before writing its XML whole
        print(f"every test's time: not written ({exc})", flush=True)
    else:
        if path is not None:
            print(f"every test's time: {path} (python -m tests.support.times prints the slowest)", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
