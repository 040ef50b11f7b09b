"""The hybrid logical clock that stamps journal records and the values they write.

Microseconds of wall time, never going backwards and always past every timestamp this
process has observed (read from a stored value): ``now() = max(wall, last + 1, observed + 1)``.
A compare-and-set therefore gets a timestamp after the value it replaces, whatever the
clocks of the processes that wrote it. The writer id is random per process start, so
(timestamp, writer id, sequence) is unique without any coordination.

A stamp observed further than MAX_FORWARD_US ahead of this process's wall clock is still
observed (refusing it would let a later write be stamped before the value it read, and lose to
it), but counted (silt_journal_clock_far_ahead) and logged: the writer whose clock ran ahead has
dragged every clock that reads its values forward, and their stamps stay ahead of wall time
until wall time catches up.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable

from silt.errors import ConfigError
from silt.telemetry.metrics import CLOCK_FAR_AHEAD

_log = logging.getLogger(__name__)

# How far ahead of this process's wall clock an observed stamp may be before it is reported: far
# more than the clock skew NTP leaves between machines, far less than anyone would miss.
MAX_FORWARD_US = 60 * 1_000_000
# At most one log line per this many seconds (the counter counts every one).
_REPORT_EVERY_S = 10.0

# A fault-injection knob for tests (docs/operations): this process's wall clock runs this many
# seconds ahead (negative: behind) of the machine's, as another machine's clock might.
CLOCK_OFFSET_ENV = "SILT_CLOCK_OFFSET_SECONDS"


def _offset_micros() -> int:
    text = os.environ.get(CLOCK_OFFSET_ENV, "").strip()
    if not text:
        return 0
    try:
        return round(float(text) * 1_000_000)
    except ValueError:
        raise ConfigError(f"{CLOCK_OFFSET_ENV} must be a number of seconds, not {text!r}") from None


_OFFSET_US = _offset_micros()


def wall_micros() -> int:
    """Microseconds of wall time, shifted by SILT_CLOCK_OFFSET_SECONDS."""
    return time.time_ns() // 1000 + _OFFSET_US


class HybridLogicalClock:
    def __init__(self, wall: Callable[[], int] = wall_micros, writer_id: str | None = None) -> None:
        self._wall = wall
        self._lock = threading.Lock()
        self._last = 0
        self._sequence = itertools.count()
        self.writer_id = writer_id or uuid.uuid4().hex
        self._reported_at = -_REPORT_EVERY_S

    def now(self) -> int:
        """A timestamp greater than every one handed out or observed before."""
        wall = self._wall()
        with self._lock:
            self._last = max(wall, self._last + 1)
            return self._last

    def observe(self, timestamp: int) -> None:
        """Make every later now() exceed timestamp (read from a stored value), however far
        ahead it is; one further than MAX_FORWARD_US ahead of the wall clock is reported."""
        if timestamp <= self._last:  # the common case, without the lock
            return
        ahead = timestamp - self._wall()
        with self._lock:
            self._last = max(self._last, timestamp)
        if ahead > MAX_FORWARD_US:
            self._report_far_ahead(ahead)

    def _report_far_ahead(self, ahead: int) -> None:
        CLOCK_FAR_AHEAD.inc()
        now = time.monotonic()
        if now - self._reported_at < _REPORT_EVERY_S:
            return
        self._reported_at = now
        _log.error(
            "journal clock: observed a logical timestamp %.1f s ahead of this process's wall clock; a writer's "
            "clock runs ahead and every writer's stamps now follow it (check its NTP, and %s)",
            ahead / 1_000_000,
            CLOCK_OFFSET_ENV,
        )

    def next_sequence(self) -> int:
        # itertools.count's __next__ is atomic under the GIL (it is implemented in C).
        return next(self._sequence)


_process_clock: HybridLogicalClock | None = None
_process_clock_lock = threading.Lock()


def process_clock() -> HybridLogicalClock:
    """The clock every journaled store of this process shares."""
    global _process_clock
    with _process_clock_lock:
        if _process_clock is None:
            _process_clock = HybridLogicalClock()
        return _process_clock


def _forget_after_fork() -> None:
    # A forked child is another writer: sharing the parent's id could repeat its row keys.
    global _process_clock
    _process_clock = None


os.register_at_fork(after_in_child=_forget_after_fork)
