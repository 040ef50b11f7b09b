"""Waiting for a condition another process brings about, with a deadline: for what no event
can signal (a server's socket, /proc). Threads of the test itself signal with events instead."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], bool], within: float, what: str, interval: float = 0.05) -> float:
    """Poll check until it holds; fail with `what` after `within` seconds. Returns the wait."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < within, f"{what} not within {within:.0f} s"
        time.sleep(interval)
    return time.monotonic() - started
