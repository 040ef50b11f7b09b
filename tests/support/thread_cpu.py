"""CPU time of the calling thread over a block, with Python's cyclic collector off.

For bounds on how much work an algorithm does (a pattern matched in linear time): wall time
also counts the waits for a core on a loaded machine and a collection over a long run's whole
heap, each of which has taken a leg's process away for seconds, and neither of which is the
algorithm's.
"""

from __future__ import annotations

import gc
import time
from types import TracebackType


class ThreadCpu:
    """with ThreadCpu() as cpu: ...; then cpu.seconds."""

    seconds: float = 0.0

    def __enter__(self) -> ThreadCpu:
        self._collecting = gc.isenabled()
        gc.disable()
        self._started = time.thread_time()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.seconds = time.thread_time() - self._started
        if self._collecting:
            gc.enable()
