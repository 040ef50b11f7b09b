"""Contenders racing compare-and-sets on one key, for the KV suites: how each ended, and the
rule every driver must keep about it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from silt.errors import OutcomeUnknown, PredicateFailed


@dataclass
class Race:
    """How each contender of one round ended: won, lost (PredicateFailed), or unknown
    (OutcomeUnknown: a Cassandra Paxos round cut short by a timeout, after which another
    contender's value was read back, so whether this one applied first cannot be told)."""

    won: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)

    def check(self, threads: int, value: bytes, value_of: Callable[[int], bytes], replicated: bool) -> None:
        """Exactly one contender's write is in: the one acknowledged, or else one whose outcome
        was unknown; every other contender was refused. Only a replicated store may leave an
        outcome unknown."""
        assert replicated or not self.unknown, f"unknown outcomes on a single store: {self.unknown}"
        assert len(self.won) <= 1, f"winners {self.won}"
        assert len(self.won) + len(self.lost) + len(self.unknown) == threads
        if self.won:
            assert value == value_of(self.won[0])
        else:
            assert value in {value_of(w) for w in self.unknown}, f"{value!r}: no contender's write is in"


def race(threads: int, attempt: Callable[[int], None]) -> Race:
    """Start attempt(worker) on all threads at once; how each ended."""
    barrier = threading.Barrier(threads)
    outcome = Race()
    errors: list[BaseException] = []

    def run(worker: int) -> None:
        barrier.wait()
        try:
            attempt(worker)
            outcome.won.append(worker)
        except PredicateFailed:
            outcome.lost.append(worker)
        except OutcomeUnknown:
            outcome.unknown.append(worker)
        except BaseException as exc:  # surfaced below: a driver error is a test failure
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors, errors
    return outcome


def replicated(request: pytest.FixtureRequest) -> bool:
    """Whether the test runs on the 3-node cluster, the one store that may leave an outcome unknown."""
    return "cassandra_cluster" in request.node.callspec.id
