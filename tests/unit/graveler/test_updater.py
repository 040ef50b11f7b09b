"""The branch updater's retry policy: bounded attempts, jittered exponential backoff, the caller's deadline."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine.core.deadline import Deadline
from engine.core.refs import RefManager
from engine.core.updater import BranchUpdater, Raced, RetryPolicy
from silt.errors import Aborted, DeadlineExceeded
from silt.kv.mem import MemStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def updater(clock: FakeClock, policy: RetryPolicy) -> BranchUpdater:
    return BranchUpdater(RefManager(MemStore()), policy, sleep=clock.sleep)


def always_raced(calls: list[int]) -> Callable[[int], None]:
    def attempt(number: int) -> None:
        calls.append(number)
        raise Raced

    return attempt


def test_gives_up_with_aborted_after_max_attempts_backing_off_within_bounds() -> None:
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=12, first_wait=0.001, max_wait=0.05)
    calls: list[int] = []
    with pytest.raises(Aborted):
        updater(clock, policy).retry(always_raced(calls), "test", Deadline(clock=clock))
    assert calls == list(range(1, 13))
    assert len(clock.slept) == 11
    # Full jitter: each wait is in [0, min(max_wait, first_wait * 2**(n-1))].
    for n, slept in enumerate(clock.slept, start=1):
        assert 0 <= slept <= min(policy.max_wait, policy.first_wait * 2 ** (n - 1)) + 1e-9
    assert len(set(clock.slept)) > 1  # jittered, not lockstep


def test_stops_at_the_deadline_before_max_attempts() -> None:
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=10_000, first_wait=0.01, max_wait=0.05)
    calls: list[int] = []
    deadline = Deadline.after(0.5, clock)
    with pytest.raises(DeadlineExceeded):
        updater(clock, policy).retry(always_raced(calls), "test", deadline)
    assert 1 < len(calls) < 10_000
    assert deadline.expires_at is not None and clock.now <= deadline.expires_at  # never slept past it


def test_a_cancelled_call_runs_no_attempt() -> None:
    clock = FakeClock()
    calls: list[int] = []
    cancelled = Deadline(clock=clock, is_active=lambda: False)
    with pytest.raises(DeadlineExceeded):
        updater(clock, RetryPolicy()).retry(always_raced(calls), "test", cancelled)
    assert calls == []


def test_returns_the_first_attempt_that_does_not_race() -> None:
    clock = FakeClock()

    def attempt(number: int) -> str:
        if number < 3:
            raise Raced
        return f"won at {number}"

    assert updater(clock, RetryPolicy()).retry(attempt, "test", Deadline(clock=clock)) == "won at 3"
    assert len(clock.slept) == 2
