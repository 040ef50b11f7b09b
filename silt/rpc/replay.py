"""Refusing a signed gRPC call that was seen before (a captured call sent again).

A signature covers the call's date, a random nonce, the method and the request, and is valid
for ``auth.max_clock_skew_seconds`` either side of the server's clock. Within that window a
captured call could be sent again unchanged; ``ReplayCache`` remembers every (key id, nonce)
it admitted until the call's date leaves the window, and refuses one it has seen.

It checks every method, reads included: remembering a call costs a lock and a set insert,
and a table of which methods change something would be one more thing to keep right.

**Bounded memory.** Entries are 16-byte digests in one set per second of call date, dropped
as a whole once that second leaves the window. At most ``max_entries`` are kept: past that,
the oldest seconds are dropped and every call dated at or before the newest dropped second
is refused from then on (the *floor*), so a dropped entry can never let its call through
again. Honest callers sign each call at the moment they make it, so the floor reaches them
only if more than ``max_entries`` calls arrive within the last second or two: a flood that
the worker limits (silt/rpc/limits.py) refuse long before.

Each process keeps its own cache: a call captured on its way to one replica of a service
can still be sent to another replica within the window. TLS (``tls.enabled``) is what keeps
calls from being captured at all.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable

DEFAULT_MAX_ENTRIES = 200_000


class ReplayCache:
    def __init__(
        self, window_seconds: float, max_entries: int = DEFAULT_MAX_ENTRIES, clock: Callable[[], float] = time.time
    ) -> None:
        self._window = window_seconds
        self._max = max_entries
        self._clock = clock
        self._seconds: dict[int, set[bytes]] = {}
        self._count = 0
        self._floor = -1  # calls dated at or before this second are refused
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def admit(self, access_key_id: str, nonce: str, date: int) -> bool:
        """Record a call that passed its signature check; False if it was seen before (or may
        have been: dated at or before the floor). date: the call's signed date, in seconds."""
        digest = hashlib.blake2b(f"{access_key_id}\n{nonce}".encode(), digest_size=16).digest()
        with self._lock:
            if date <= self._floor:
                return False
            seen = self._seconds.get(date)
            if seen is not None and digest in seen:
                return False
            if seen is None:
                self._expire()
                seen = self._seconds[date] = set()
            seen.add(digest)
            self._count += 1
            if self._count > self._max:
                self._shrink()
        return True

    def _expire(self) -> None:
        """Drop the seconds that left the window: their calls are refused as too old anyway."""
        oldest = int(self._clock() - self._window) - 1
        for second in [s for s in self._seconds if s < oldest]:
            self._count -= len(self._seconds.pop(second))

    def _shrink(self) -> None:
        self._expire()
        # Whole seconds, oldest first, until a tenth of the room is free again.
        target = self._max - self._max // 10
        for second in sorted(self._seconds):
            if self._count <= target:
                break
            self._count -= len(self._seconds.pop(second))
            self._floor = max(self._floor, second)
