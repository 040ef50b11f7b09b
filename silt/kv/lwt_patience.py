"""How long the Cassandra driver waits for the first send of a lightweight transaction before it
reads the key back at SERIAL through another node (silt/kv/cassandra.py, docs/design/kv.md,
"An LWT whose outcome is unknown").

A Paxos round whose coordinator froze in the instant it was sent waits until the driver's
heartbeat finds the node frozen, about 2 s; its request is then several times slower than any
healthy one. A fixed, shorter bound does not fit every load: on a busy cluster healthy rounds run
past it, and each one given up costs a read-back and a resend that contend with the round still
running. So the bound follows the rounds as they run: a multiple of the p99 of this store's recent
sends, never under a floor, never over the configured ceiling.

A send given up counts as having taken the bound (it took at least that). When more than 1 % of
recent sends run out, the p99 is the bound itself and the next bound is the multiple of it: the
bound grows until healthy rounds fit under it again, and no burst of load can hold it too low.
"""

from __future__ import annotations

import math
import threading
from collections import deque

# Recent sends kept, and how many of them are needed before the bound moves off the ceiling.
WINDOW = 512
MIN_SAMPLES = 100
# The bound is recomputed every this many sends (a sort of WINDOW floats).
RECOMPUTE_EVERY = 32
QUANTILE = 0.99


class LwtPatience:
    """The bound for one LWT send: factor times the p99 of recent sends, within [floor_s, ceiling_s].
    Thread-safe; factor 0 keeps the bound at the ceiling."""

    def __init__(self, ceiling_s: float, factor: float, floor_s: float) -> None:
        self._ceiling_s = ceiling_s
        self._factor = factor
        self._floor_s = min(floor_s, ceiling_s)
        self._samples: deque[float] = deque(maxlen=WINDOW)
        self._since_recompute = 0
        self._bound_s = ceiling_s
        self._lock = threading.Lock()

    def bound_s(self) -> float | None:
        """Seconds to wait for a send before reading it back through another node; None while the
        bound is the ceiling (too few sends seen, or factor 0): then the send's own timeout rules."""
        bound = self._bound_s
        return None if bound >= self._ceiling_s else bound

    def answered(self, seconds: float) -> None:
        """A send was answered (applied or not) after seconds."""
        self._observe(seconds)

    def gave_up(self, bound_s: float) -> None:
        """A send was given up after bound_s: it took at least that."""
        self._observe(bound_s)

    def _observe(self, seconds: float) -> None:
        if self._factor <= 0:
            return
        with self._lock:
            self._samples.append(seconds)
            self._since_recompute += 1
            if self._since_recompute < RECOMPUTE_EVERY or len(self._samples) < MIN_SAMPLES:
                return
            self._since_recompute = 0
            ordered = sorted(self._samples)
        p99 = ordered[max(0, math.ceil(QUANTILE * len(ordered)) - 1)]
        self._bound_s = min(self._ceiling_s, max(self._floor_s, self._factor * p99))
