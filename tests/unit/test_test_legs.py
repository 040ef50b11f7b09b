"""tests/support/legs.py: `make test`'s legs run as real pytest processes side by side, and their
report adds them up, the failing leg first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import legs

SUITE = """
import pytest


@pytest.mark.cassandra
def test_in_the_jvm_leg():
    pass


@pytest.mark.spark
def test_also_in_the_jvm_leg():
    pass


def test_in_the_other_leg_and_failing():
    assert 1 == 2, "the other leg fails"


@pytest.mark.skip(reason="skipped on purpose")
def test_skipped():
    pass
"""


def _suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    root.mkdir()
    # An ini of its own, so that the repository's conftest and its strict markers stay out of it.
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    cassandra: x\n    cassandra_cluster: x\n    spark: x\n")
    (root / "test_sample.py").write_text(SUITE)
    return root


def test_the_legs_split_by_mark_run_at_once_and_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _suite(tmp_path)
    code = legs.main(["-p", "no:cacheprovider", "-q", str(root)], tmp_path / "logs")
    out = capsys.readouterr().out
    assert code == 1
    jvm = (tmp_path / "logs" / "jvm.log").read_text()
    rest = (tmp_path / "logs" / "rest.log").read_text()
    assert "2 passed" in jvm and "failed" not in jvm
    assert "1 failed" in rest and "1 skipped" in rest
    # The failing leg's log comes first, and the last line adds both legs up.
    assert out.index("the other leg fails") < out.index("######## leg jvm")
    assert out.strip().splitlines()[-1] == "total: 2 passed, 1 failed, 1 skipped"
    # Each leg's time and result, before the closing line.
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith(("jvm:", "rest:"))] == ["jvm", "rest"]
    # The failing test is named again at the end, under its leg.
    closing = out[out.index("######## legs ########") :].splitlines()
    named = [line for line in closing if line.startswith("  FAILED ")]
    assert len(named) == 1 and "test_in_the_other_leg_and_failing" in named[0]
    assert closing.index(named[0]) > next(i for i, line in enumerate(closing) if line.startswith("rest:"))


def test_a_selection_narrows_every_leg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _suite(tmp_path)
    code = legs.main(["-p", "no:cacheprovider", "-m", "spark", str(root)], tmp_path / "logs")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "pytest -m '(spark) and ((cassandra or cassandra_cluster or spark) or shared_file)'" in out
    assert out.strip().splitlines()[-1] == "total: 1 passed, 0 failed, 0 skipped"


def test_nothing_collected_anywhere_is_pytests_no_tests_code(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    assert legs.main(["-p", "no:cacheprovider", "-m", "nothing_has_this_mark", str(root)], tmp_path / "logs") == 5


@pytest.mark.parametrize(
    ("args", "marks", "rest"),
    [
        (["-m", "not nightly", "-x"], "not nightly", ["-x"]),
        (["-m", "a", "-mb", "tests"], "b", ["tests"]),
        (["--tb=short"], None, ["--tb=short"]),
    ],
)
def test_the_last_selection_is_the_users(args: list[str], marks: str | None, rest: list[str]) -> None:
    assert legs.split_marks(args) == (marks, rest)


def test_the_legs_together_select_every_test_once() -> None:
    # Every combination of the marks the legs name (and one they don't) is in exactly one leg,
    # but for a shared file's test (never one that needs a JVM: tests/support/leg_balance.py),
    # which both select and the leg that claims its file runs (tests/support/work_sharing.py).
    from itertools import chain, combinations

    from _pytest.mark.expression import Expression

    jvm_marks = {"cassandra", "cassandra_cluster", "spark"}
    names = [*sorted(jvm_marks), "browser", "e2e", "shared_file"]
    expressions = [(name, Expression.compile(marks)) for name, marks in legs.LEGS]
    for marks in chain.from_iterable(combinations(names, k) for k in range(len(names) + 1)):
        present = set(marks)
        if "shared_file" in present and present & jvm_marks:
            continue

        def has(mark: str, /, **_: object) -> bool:
            return mark in present  # noqa: B023 - called at once, inside this iteration

        chosen = [name for name, expression in expressions if expression.evaluate(has)]
        if "shared_file" in present:
            assert chosen == ["jvm", "rest"], marks
        else:
            assert chosen == (["jvm"] if present & jvm_marks else ["rest"]), marks


CRASHING = """
import ctypes
import resource

import pytest


def test_before():
    pass


@pytest.mark.cassandra
def test_faults_in_c():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left in the working directory
    ctypes.string_at(0)  # a read of address 0: SIGSEGV, as a fault in a C extension
"""


def test_a_leg_ended_by_a_signal_names_the_test_it_was_in_and_the_faulting_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _suite(tmp_path)
    (root / "test_sample.py").write_text(CRASHING)
    code = legs.main(["-p", "no:cacheprovider", "-q", str(root)], tmp_path / "logs")
    out = capsys.readouterr().out
    assert code == -11, out
    closing = out[out.index("######## legs ########") :].splitlines()
    jvm = next(i for i, line in enumerate(closing) if line.startswith("jvm:"))
    assert closing[jvm + 1] == "  ended by SIGSEGV in test_sample.py::test_faults_in_c"
    assert closing[jvm + 2] == "  Fatal Python error: Segmentation fault"
    assert closing[jvm + 3].startswith("  Current thread 0x")
    assert any("test_sample.py" in line and "test_faults_in_c" in line for line in closing[jvm + 4 :])
    # The other leg ran to its end.
    assert next(line for line in closing if line.startswith("rest:")).endswith("1 passed, 1 deselected")


SLEEPING = """
import os
import time

import pytest

OUT = {out!r}


def _sleep(name):
    with open(os.path.join(OUT, name), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)


@pytest.mark.cassandra
def test_sleeps_in_the_jvm_leg():
    _sleep("jvm")


def test_sleeps_in_the_other_leg():
    _sleep("rest")
"""

PARENT = """
import subprocess, sys, time
main = (
    "import sys; from pathlib import Path; from tests.support import legs; "
    "sys.exit(legs.main(sys.argv[2:], Path(sys.argv[1])))"
)
runner = subprocess.Popen([sys.executable, "-c", main, *sys.argv[1:]])
print(runner.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie no one has reaped yet has ended all the same


def test_the_runner_and_its_legs_end_when_the_process_that_started_them_is_killed(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    out = tmp_path / "pids"
    out.mkdir()
    (root / "test_sample.py").write_text(SLEEPING.format(out=str(out)))
    args = [str(tmp_path / "logs"), "-p", "no:cacheprovider", "-q", str(root)]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *args], stdout=subprocess.PIPE, text=True, cwd=legs.REPO_ROOT
    )
    runner = 0
    try:
        assert parent.stdout is not None
        runner = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while not ((out / "jvm").exists() and (out / "rest").exists()):
            assert time.monotonic() < deadline, "the legs did not start their tests"
            time.sleep(0.1)
        tests = [int((out / name).read_text()) for name in ("jvm", "rest")]
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 30
        while not all(_gone(pid) for pid in (runner, *tests)):
            assert time.monotonic() < deadline, "the runner or a leg outlived the process that started them"
            time.sleep(0.1)
    finally:
        parent.kill()
        parent.wait(10)
        if runner and not _gone(runner):  # the runner stops its legs on SIGTERM
            os.kill(runner, signal.SIGTERM)
