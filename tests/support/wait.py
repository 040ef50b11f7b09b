"""Waiting for a condition another process brings about, with a deadline: for what no event
can signal (a server's socket, /proc). Threads of the test itself signal with events instead.

The one way tests wait: a bare sleep guesses how long something takes, too short on a loaded
machine and too long everywhere else; a loop of its own forgets the deadline or the message."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    message: str,
    interval: float = 0.05,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """Call predicate every `interval` seconds until it returns something truthy, and return that
    (a predicate may answer None for "not yet").

    An exception of a type in `ignoring` counts as "not yet". After `timeout` seconds, fails
    with AssertionError naming `message` (and the last exception ignored, as its cause)."""
    deadline = time.monotonic() + timeout
    while True:
        last: Exception | None = None
        try:
            value = predicate()
        except ignoring as exc:
            last = exc
        else:
            if value:
                return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message}: not within {timeout:g} s") from last
        time.sleep(interval)
