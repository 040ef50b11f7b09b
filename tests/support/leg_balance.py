"""Which leg a test runs in, and which files either leg may take (tests/support/work_sharing.py).

The legs split by what their tests start (tests/support/legs.py): every test that needs
Cassandra, the 3-node cluster or Spark runs in the `jvm` leg, where each of those servers is
started once. The other tests are the `rest` leg's, but most of them start nothing either leg
lacks: those of a shared file go into a pool that both legs draw from at run time, a whole file
at a time, once each has run its own tests. So the legs end together however long each one's
own tests take on a given machine, with a given nightly slice, without a table of estimates
kept true by hand.

A file is shared when its tests start only what either leg starts anyway (SHARED_DIRECTORIES,
SHARED_FILES) and are not the `jvm` leg's; the browser's, the REST API's and the gateway's
suites and the block stores' tests stay in the `rest` leg, whose session fixtures start their
stacks (Chromium, a session's services, the storage emulators) once for all of them.

The pool is drawn longest file first (ESTIMATES_FILE, each file's seconds from a whole run,
written by `python -m tests.support.work_sharing --write-estimates`), so that what is left at
the end is many short files and the legs end within a few seconds of each other.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

CASSANDRA_MARKS = ("cassandra", "cassandra_cluster")
JVM_MARKS = (*CASSANDRA_MARKS, "spark")
SHARED_MARK = "shared_file"
# Directories whose files either leg may take (their subdirectories too, but for the ones
# NOT_SHARED names): unit tests, the engine's integration tests on the embedded stores, the
# Jepsen-style runs and the end-to-end files that start their own stacks or the end-to-end
# session's, which the `jvm` leg starts for its own end-to-end tests anyway.
SHARED_DIRECTORIES = ("tests/unit", "tests/integration", "tests/jepsen")
NOT_SHARED = ("tests/integration/block",)
# Files outside those directories that either leg may take: the top-level end-to-end files, and
# two of the gateway's and the REST API's suites whose cost is their own (the fuzzer's search,
# the migration's lakeFS history), measured worth a second start of their session's stack.
SHARED_FILES = ("tests/e2e/gateway/test_fuzz.py", "tests/e2e/api/test_migrate_lakefs.py")
ESTIMATES_FILE = Path(__file__).with_name("pool_estimates.tsv")
# A file the table does not name yet: drawn among the short ones.
DEFAULT_ESTIMATE_S = 2.0


def leg_of(marks: Iterable[str]) -> str:
    """The leg whose own test this is: `jvm` if it needs a JVM, else `rest`."""
    return "jvm" if set(marks) & set(JVM_MARKS) else "rest"


def shared_file(path: str) -> bool:
    """Whether either leg may take the `rest` leg's tests of this file (a path relative to the
    suite's root, with forward slashes)."""
    parts = PurePosixPath(path).parts

    def under(directory: str) -> bool:
        prefix = PurePosixPath(directory).parts
        return parts[: len(prefix)] == prefix

    if path in SHARED_FILES:
        return True
    if any(under(d) for d in NOT_SHARED):
        return False
    return any(under(d) for d in SHARED_DIRECTORIES) or (len(parts) == 3 and parts[:2] == ("tests", "e2e"))


def shared(path: str, marks: Iterable[str]) -> bool:
    """Whether a test with these marks in this file goes to the pool. Not the `podman` tests
    (`make test-all`): each file builds the same images into the same podman storage, which
    they must do one after the other, in the `rest` leg."""
    found = set(marks)
    return leg_of(found) == "rest" and "podman" not in found and shared_file(path)


def read_estimates(path: Path = ESTIMATES_FILE) -> dict[str, float]:
    """The pool's files and their seconds (a header, then `file<TAB>seconds` lines)."""
    try:
        with path.open(newline="") as table:
            return {row["file"]: float(row["seconds"]) for row in csv.DictReader(table, delimiter="\t")}
    except FileNotFoundError:
        return {}


def write_estimates(seconds: Mapping[str, float], path: Path = ESTIMATES_FILE) -> None:
    lines = ["file\tseconds", *(f"{f}\t{s:.1f}" for f, s in sorted(seconds.items()))]
    path.write_text("\n".join(lines) + "\n")


def pool_order(files: Iterable[str], known: Mapping[str, float]) -> list[str]:
    """The order the pool is drawn in: longest first (equal ones by path)."""
    return sorted(set(files), key=lambda f: (-known.get(f, DEFAULT_ESTIMATE_S), f))
