"""The legs' shared files, drawn at run time by whichever leg is free (tests/support/leg_balance.py).

A pytest plugin the legs load (`-p tests.support.work_sharing`, tests/support/legs.py), active
when CLAIMS_ENV names the run's claims directory. In each leg it marks the tests of the shared
files `shared_file` (both legs select them: the legs' marker expressions), then runs the leg's
own tests first and the pool after, a whole file at a time: a leg takes a file by creating its
claim (O_CREAT | O_EXCL, which one of two processes wins), runs its tests if it won, and passes
over them if the other leg did. Every test therefore runs once, in one leg or the other, unless
a leg stops early (-x, --maxfail, an interrupt) after claiming a file it did not start: its log
then names the file.

A leg takes the next file just before the last test of the one it is running, because pytest
tears a test's fixtures down by the test that comes next (a module's fixtures survive to the
next test of that module; the session's to the end).

    python -m tests.support.work_sharing --write-estimates

writes the pool's order (tests/support/pool_estimates.tsv) from the last run's JUnit XMLs
(build/test-legs/*.xml), where each shared test carries a `shared_file` property; the files the
run did not measure keep their seconds.
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import leg_balance

CLAIMS_ENV = "SILT_LEG_CLAIMS"
LEG_ENV = "SILT_LEG"
PROPERTY = leg_balance.SHARED_MARK
REPO_ROOT = Path(__file__).resolve().parents[2]
LEGS_DIR = REPO_ROOT / "build" / "test-legs"
_WON = pytest.StashKey[tuple[list[str], int]]()
_STARTED = pytest.StashKey[set[str]]()


class Claims:
    """One run's claims on shared files: a directory with one file per file taken."""

    def __init__(self, directory: Path, leg: str) -> None:
        self.directory = directory
        self.leg = leg

    def _path(self, test_file: str) -> Path:
        return self.directory / test_file.replace("/", "__")

    def take(self, test_file: str) -> bool:
        """True for the one leg whose claim on test_file was first."""
        try:
            fd = os.open(self._path(test_file), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as out:
            out.write(self.leg)
        return True

    def taker(self, test_file: str) -> str | None:
        try:
            return self._path(test_file).read_text()
        except FileNotFoundError:
            return None


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    text = "a test either leg may run (tests/support/work_sharing.py)"
    config.addinivalue_line("markers", f"{leg_balance.SHARED_MARK}: {text}")


# A plain hook: after every `tryfirst` one, tests/conftest.py's that marks what needs a JVM among
# them, wherever this plugin is registered, and before pytest's own, which deselects by `-m`.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not os.environ.get(CLAIMS_ENV):
        return
    for item in items:
        if leg_balance.shared(_file_of(item), (mark.name for mark in item.iter_markers())):
            item.add_marker(leg_balance.SHARED_MARK)
            item.user_properties.append((PROPERTY, "1"))


def _own_then_pool(items: list[pytest.Item], claims: Claims, won: list[str] | None = None) -> Iterator[pytest.Item]:
    """The leg's own tests in pytest's order, then each pool file this leg wins (listed in won),
    in the pool's order, its tests in pytest's order."""
    pool: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker(leg_balance.SHARED_MARK):
            pool.setdefault(_file_of(item), []).append(item)
        else:
            yield item
    for test_file in leg_balance.pool_order(pool, leg_balance.read_estimates()):
        if claims.take(test_file):
            if won is not None:
                won.append(test_file)
            yield from pool[test_file]


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    directory = os.environ.get(CLAIMS_ENV)
    if not directory:
        return None  # pytest's own loop
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        errors = session.testsfailed
        raise session.Interrupted(f"{errors} error{'s' if errors != 1 else ''} during collection")
    if session.config.option.collectonly:
        return True
    won: list[str] = []
    pool = {_file_of(i) for i in session.items if i.get_closest_marker(leg_balance.SHARED_MARK)}
    session.config.stash[_WON] = (won, len(pool))
    started = session.config.stash[_STARTED] = set()
    stream = _own_then_pool(session.items, Claims(Path(directory), os.environ.get(LEG_ENV, str(os.getpid()))), won)
    item = next(stream, None)
    while item is not None:
        nextitem = next(stream, None)  # claims the next file before this one's last test
        started.add(_file_of(item))
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = nextitem
    return True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _WON not in config.stash:
        return
    won, pool = config.stash[_WON]
    terminalreporter.write_sep("-", "the shared files")
    terminalreporter.write_line(
        f"this leg ran {len(won)} of the pool's {pool} files; the other leg ran the rest"
        " (so this leg's progress stops short of 100 %)"
    )
    # A leg that stops early (-x, --maxfail, an interrupt) may have claimed a file it never
    # started: no leg runs it, so it is named here.
    dropped = [f for f in won if f not in config.stash.get(_STARTED, set())]
    if dropped:
        terminalreporter.write_line(f"claimed and not run, as this leg stopped early: {', '.join(dropped)}", red=True)


def measured(legs_dir: Path = LEGS_DIR) -> dict[str, float]:
    """Each shared file's seconds in the legs' JUnit XMLs (its shared tests, in either leg)."""
    from tests.support import times

    seconds: dict[str, float] = {}
    for xml in sorted(legs_dir.glob("*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            if not any(p.get("name") == PROPERTY for p in case.iter("property")):
                continue
            test_file = times.node_id(case.get("classname", ""), case.get("name", "")).split("::", 1)[0]
            seconds[test_file] = seconds.get(test_file, 0.0) + float(case.get("time") or 0.0)
    return seconds


def main(argv: list[str]) -> int:
    if argv != ["--write-estimates"]:
        print("usage: python -m tests.support.work_sharing --write-estimates", file=sys.stderr)
        return 2
    seconds = measured()
    if not seconds:
        print(f"no shared test in {LEGS_DIR}/*.xml: run `make test` first", file=sys.stderr)
        return 1
    # A narrowed run measures some files: the others keep their seconds, unless gone or no
    # longer shared.
    kept = {
        f: s
        for f, s in leg_balance.read_estimates().items()
        if leg_balance.shared_file(f) and (REPO_ROOT / f).is_file()
    }
    table = {**kept, **seconds}
    leg_balance.write_estimates(table)
    print(f"{leg_balance.ESTIMATES_FILE}: {len(seconds)} files measured, {len(table)} in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
