"""Every test's time from the last `make test` (or `make test-all`), and a report over them.

The legs (tests/support/legs.py) write pytest's JUnit XML per leg, build/test-legs/<leg>.xml;
at their end the legs' XMLs are merged into one stable table, build/test-times.tsv: a header,
then one line per test, sorted by test id: the pytest node id, the leg, the seconds (setup, call
and teardown together, as the JUnit XML counts them), the outcome (passed, failed, error,
skipped) and the CPU seconds (tests/support/cpu_times.py; empty where a leg did not record
them). This command prints the slowest tests and the total per directory, by wall time or, with
`--cpu`, by CPU time, which is what a test costs a run whose two legs keep both cores busy:

    python -m tests.support.times [--slowest N] [--by-dir] [--cpu] [--file build/test-times.tsv]

(`make test-times TIMES_ARGS="--slowest 50 --by-dir"`). With no table yet, it merges the legs'
XMLs first.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tests.support.cpu_times import PROPERTY as CPU_PROPERTY

REPO_ROOT = Path(__file__).resolve().parents[2]
LEGS_DIR = REPO_ROOT / "build" / "test-legs"
TIMES_FILE = REPO_ROOT / "build" / "test-times.tsv"
HEADER = ("test", "leg", "seconds", "outcome", "cpu_seconds")
# Tables written before the CPU column; read with no CPU.
_OLD_HEADER = HEADER[:4]
# A JUnit testcase's child element that says it did not pass, in the order that decides.
_OUTCOMES = (("failure", "failed"), ("error", "error"), ("skipped", "skipped"))


@dataclass(frozen=True, order=True)
class Timing:
    test: str  # pytest's node id: tests/unit/test_x.py::TestY::test_z[param]
    leg: str
    seconds: float
    outcome: str
    cpu: float | None = field(default=None, compare=False)

    @property
    def directory(self) -> str:
        return str(PurePosixPath(self.test.split("::", 1)[0]).parent)


def node_id(classname: str, name: str, root: Path = REPO_ROOT) -> str:
    """pytest's node id back from JUnit's dotted classname: the longest dotted prefix that is a
    module under root is the file, the rest are classes."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (root / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return "::".join(["/".join(parts) + ".py", name])


def read_junit(xml: Path, leg: str, root: Path = REPO_ROOT) -> list[Timing]:
    """The tests of one leg's JUnit XML."""
    rows = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome = next((word for tag, word in _OUTCOMES if case.find(tag) is not None), "passed")
        test = node_id(case.get("classname", ""), case.get("name", ""), root)
        cpu = next((p.get("value") for p in case.iter("property") if p.get("name") == CPU_PROPERTY), None)
        rows.append(Timing(test, leg, float(case.get("time") or 0.0), outcome, float(cpu) if cpu else None))
    return rows


def merge_legs(legs_dir: Path = LEGS_DIR, root: Path = REPO_ROOT) -> list[Timing]:
    """Every leg's tests (build/test-legs/<leg>.xml), sorted by test id."""
    rows = [row for xml in sorted(legs_dir.glob("*.xml")) for row in read_junit(xml, xml.stem, root)]
    return sorted(rows)


def write_times(rows: Iterable[Timing], path: Path = TIMES_FILE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(HEADER)]
    lines += [
        f"{r.test}\t{r.leg}\t{r.seconds:.3f}\t{r.outcome}\t{'' if r.cpu is None else f'{r.cpu:.3f}'}"
        for r in sorted(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def read_times(path: Path = TIMES_FILE) -> list[Timing]:
    lines = path.read_text().splitlines()
    header = tuple(lines[0].split("\t")) if lines else ()
    if header not in (HEADER, _OLD_HEADER):
        raise ValueError(f"{path}: not a test-times table (its first line is not {' '.join(HEADER)!r})")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != len(header):
            raise ValueError(f"{path}:{number}: {len(fields)} fields, not {len(header)}")
        cpu = float(fields[4]) if len(fields) > 4 and fields[4] else None
        rows.append(Timing(fields[0], fields[1], float(fields[2]), fields[3], cpu))
    return rows


def _cost(row: Timing, cpu: bool) -> float:
    return (row.cpu or 0.0) if cpu else row.seconds


def slowest(rows: Iterable[Timing], count: int, cpu: bool = False) -> list[Timing]:
    return sorted(rows, key=lambda r: (-_cost(r, cpu), r.test))[:count]


def by_directory(rows: Iterable[Timing], cpu: bool = False) -> list[tuple[str, int, float]]:
    """(directory, tests, seconds) per directory of test files, the most expensive first."""
    totals: dict[str, tuple[int, float]] = {}
    for row in rows:
        count, seconds = totals.get(row.directory, (0, 0.0))
        totals[row.directory] = (count + 1, seconds + _cost(row, cpu))
    return sorted(((d, c, s) for d, (c, s) in totals.items()), key=lambda t: (-t[2], t[0]))


def report(rows: list[Timing], count: int, by_dir: bool, cpu: bool = False) -> str:
    total = sum(r.seconds for r in rows)
    out = [f"{len(rows)} tests, {total / 60:.1f} min of test time (the legs run side by side)"]
    if cpu:
        counted = [r for r in rows if r.cpu is not None]
        out.append(
            f"{sum(r.cpu or 0.0 for r in counted) / 60:.1f} min of CPU counted in {len(counted)} tests "
            "(processes outside the legs' trees in none)"
        )
    out.append(f"\nthe {min(count, len(rows))} {'most CPU' if cpu else 'slowest'}:")
    out += [
        f"{_cost(r, cpu):9.1f} s  {r.leg:5} {r.outcome:8} {r.test}"
        + ("" if cpu or r.cpu is None else f"  (CPU {r.cpu:.1f} s)")
        for r in slowest(rows, count, cpu)
    ]
    if by_dir:
        out.append(f"\nper directory{' (CPU)' if cpu else ''}:")
        out += [f"{s:9.1f} s  {c:5} tests  {d}" for d, c, s in by_directory(rows, cpu)]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.times", description=__doc__.split("\n\n")[0])
    parser.add_argument("--slowest", type=int, default=30, metavar="N", help="how many of the slowest tests (30)")
    parser.add_argument("--by-dir", action="store_true", help="also the total per directory")
    parser.add_argument("--cpu", action="store_true", help="rank by CPU seconds rather than wall time")
    parser.add_argument("--file", type=Path, default=TIMES_FILE, help="the table (build/test-times.tsv)")
    args = parser.parse_args(argv)
    if not args.file.exists():
        rows = merge_legs(LEGS_DIR, REPO_ROOT)
        if not rows:
            print(f"no {args.file} and no JUnit XML in {LEGS_DIR}: run `make test` first", file=sys.stderr)
            return 1
        write_times(rows, args.file)
    print(report(read_times(args.file), args.slowest, args.by_dir, args.cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
