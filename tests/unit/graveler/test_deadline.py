"""Deadlines: the value object, and bounded waits on a commit worker."""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest

from engine.core.builder import _wait
from engine.core.deadline import NO_DEADLINE, Deadline
from silt.errors import DeadlineExceeded, Unavailable


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_remaining_and_expiry_follow_the_clock() -> None:
    clock = FakeClock()
    deadline = Deadline.after(2.0, clock)
    assert deadline.remaining() == 2.0 and not deadline.expired()
    deadline.check("work")
    clock.now += 2.5
    assert deadline.remaining() == 0.0 and deadline.expired()
    with pytest.raises(DeadlineExceeded, match="work: deadline exceeded"):
        deadline.check("work")


def test_no_deadline_never_expires_but_a_cancelled_call_does() -> None:
    assert NO_DEADLINE.remaining() is None and not NO_DEADLINE.expired()
    cancelled = Deadline.after(None, is_active=lambda: False)
    assert cancelled.expired()
    with pytest.raises(DeadlineExceeded, match="cancelled"):
        cancelled.check("work")


def test_a_worker_wait_ends_at_the_deadline() -> None:
    stuck: Future[int] = Future()  # a build that never finishes
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        _wait(stuck, Deadline.after(0.3), "building", limit=30)
    assert 0.25 <= time.monotonic() - started < 5
    assert stuck.cancelled()


def test_a_worker_wait_ends_when_the_caller_goes_away() -> None:
    stuck: Future[int] = Future()
    gone = {"now": False}
    deadline = Deadline.after(None, is_active=lambda: not gone["now"])
    gone["now"] = True
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        _wait(stuck, deadline, "building", limit=30)
    assert time.monotonic() - started < 5


def test_a_worker_wait_without_deadline_is_still_bounded() -> None:
    stuck: Future[int] = Future()
    with pytest.raises(Unavailable, match="no commit worker answered"):
        _wait(stuck, NO_DEADLINE, "building", limit=0.2)


def test_a_finished_worker_answers() -> None:
    done: Future[int] = Future()
    done.set_result(7)
    assert _wait(done, Deadline.after(1.0), "building", limit=30) == 7
