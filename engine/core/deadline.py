"""How long an engine call may still run: the caller's gRPC deadline, and whether it is still waiting.

Every public Graveler method takes one. The engine checks it before each attempt of a
lock-free retry loop, between the steps of a commit and while waiting on a commit worker,
so a call whose client gave up (deadline passed or call cancelled) stops instead of
finishing work nobody will see.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from silt.errors import DeadlineExceeded


class Clock(Protocol):
    """Seconds on a monotonic scale; tests pass a clock they move by hand."""

    def __call__(self) -> float: ...


def _always_active() -> bool:
    return True


@dataclass(frozen=True)
class Deadline:
    expires_at: float | None = None  # on clock's scale; None: no deadline
    clock: Clock = time.monotonic
    is_active: Callable[[], bool] = _always_active  # False once the client cancelled the call

    @classmethod
    def after(
        cls, seconds: float | None, clock: Clock = time.monotonic, is_active: Callable[[], bool] = _always_active
    ) -> Deadline:
        """A deadline seconds from now (None: none, but still cancelled when is_active turns False)."""
        return cls(None if seconds is None else clock() + seconds, clock, is_active)

    def less(self, seconds: float) -> Deadline:
        """This deadline moved seconds earlier (without a deadline: none, as before)."""
        if self.expires_at is None or not seconds:
            return self
        return Deadline(self.expires_at - seconds, self.clock, self.is_active)

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None without a deadline."""
        if self.expires_at is None:
            return None
        return max(0.0, self.expires_at - self.clock())

    def expired(self) -> bool:
        return not self.is_active() or (self.expires_at is not None and self.clock() >= self.expires_at)

    def check(self, what: str) -> None:
        """Raise DeadlineExceeded if the caller no longer waits for what."""
        if not self.is_active():
            raise DeadlineExceeded(f"{what}: the call was cancelled")
        if self.expires_at is not None and self.clock() >= self.expires_at:
            raise DeadlineExceeded(f"{what}: deadline exceeded")


NO_DEADLINE = Deadline()
