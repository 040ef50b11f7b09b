"""Each test's CPU seconds, beside its wall time in the legs' JUnit XML (a `cpu_seconds` property).

The suite runs two legs side by side on two cores and keeps both busy, so what a test costs the
run is its CPU, not its wall time: a test that sleeps costs little, one that starts a stack of
services costs its processes' start-up. A test's CPU here is what this pytest process and every
process below it spent from the start of its setup to the end of its teardown: this process's
own, its reaped children's (os.times), and the CPU, reaped children's included, of every live
descendant (read from /proc). So the session's servers (the Cassandra nodes, the Spark JVM, a
module's stack) count in the tests they served, not in the one that stops them. A process
orphaned during a test (its parent gone, adopted by init) leaves the count with what it had
spent, so a test's figure is clamped at zero.

A /proc walk costs a few milliseconds with the suite's hundred-odd processes, so it is made at
most once a second, and whenever a child was reaped since the last one: the live descendants'
CPU of a burst of short tests lands on the first test read after it, a second at most later.
Without /proc (not Linux), live descendants are not counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

PROPERTY = "cpu_seconds"
_STARTED = pytest.StashKey[float]()
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _descendants_ticks(root: int) -> int:
    """utime + stime + cutime + cstime of every live process below root, in clock ticks.

    One pass over /proc/*/stat, parents from each process's ppid, rather than bench/processes.py's
    walk of every thread's `children` file: the JVMs below a leg have hundreds of threads each,
    a file apiece, where the whole machine has a hundred-odd processes. And cutime + cstime
    too, which bench's `cpu_seconds` leaves out: a live service's reaped workers count."""
    parents: dict[int, int] = {}
    spent: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:  # gone since the listing
            continue
        # After the command's closing parenthesis: state, ppid, ... utime is the 14th field.
        fields = data[data.rindex(b")") + 2 :].split()
        pid = int(name)
        parents[pid] = int(fields[1])
        spent[pid] = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, below = 0, list(children.get(root, ()))
    while below:
        pid = below.pop()
        total += spent[pid]
        below.extend(children.get(pid, ()))
    return total


def process_tree_cpu_seconds() -> float:
    """This process's CPU, its reaped children's, and its live descendants'."""
    own = os.times()
    reaped = own.user + own.system + own.children_user + own.children_system
    return reaped + _descendants_ticks(os.getpid()) / _TICKS


# The live descendants' ticks, walked at most every _WALK_EVERY_S, and again whenever a child
# was reaped since (its CPU then moved from the walk's sum into os.times'): (elapsed, reaped
# children's CPU, ticks) at the last walk.
_walked: tuple[float, float, int] | None = None
_WALK_EVERY_S = 1.0


def _reading() -> float:
    global _walked
    own = os.times()
    reaped_children = own.children_user + own.children_system
    if _walked is None or own.elapsed - _walked[0] >= _WALK_EVERY_S or reaped_children != _walked[1]:
        _walked = (own.elapsed, reaped_children, _descendants_ticks(os.getpid()))
    return own.user + own.system + reaped_children + _walked[2] / _TICKS


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_STARTED] = _reading()
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    # Before the teardown's report is made: the JUnit writer takes a test's properties from it.
    started = item.stash.get(_STARTED, None)
    if started is not None:
        item.user_properties.append((PROPERTY, f"{max(0.0, _reading() - started):.3f}"))
