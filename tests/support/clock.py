"""A clock that tests move by hand, for anything that takes `clock=` (caches, TTLs): a test
passes time with advance() instead of sleeping through it."""

from __future__ import annotations

import threading


class ManualClock:
    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
