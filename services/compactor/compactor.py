"""The compactor: runs staging compactions with graveler's engine, in its own process
(docs/design/compaction.md).

One compaction per branch at a time in this process; the sensor's triggers queue in the
background on a small pool, by hand (`silt branch compact`) the caller waits. Another
replica, or graveler's own commits, may still race a compaction: the engine makes the
loser fail without change (CompactionLost), and that is counted, not an error.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from engine.core.compaction import CompactionLost, CompactionResult
from engine.core.deadline import Deadline
from engine.core.validation import validate_ref_name
from engine.graveler import Graveler
from silt.errors import Aborted, InvalidArgument
from silt.graveler.v1 import model_pb2 as pb
from silt.telemetry import metrics

log = logging.getLogger(__name__)

# Triggered compactions waiting or running at once; more are refused (the sensor tries again later).
MAX_QUEUED = 1000


class Compactor:
    def __init__(self, graveler: Graveler, timeout: float, workers: int = 1) -> None:
        self.graveler = graveler
        self._timeout = timeout
        self._lock = threading.Lock()
        self._running: set[tuple[str, str]] = set()
        self._queued: set[tuple[str, str]] = set()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="compaction")

    def compact(self, repository: str, branch: str, deadline: Deadline) -> CompactionResult:
        key = _key(repository, branch)
        with self._lock:
            if key in self._running:
                raise Aborted(f"a compaction of branch {branch!r} already runs; try again when it is done")
            self._running.add(key)
        started = time.perf_counter()
        outcome = "failed"
        try:
            result = self.graveler.compact(repository, branch, deadline=deadline)
            outcome = "published"
            metrics.COMPACTION_SEALED_TOKENS.inc(result.tokens_compacted)
            return result
        except CompactionLost:
            outcome = "lost"
            raise
        finally:
            metrics.COMPACTION_DURATION.observe(time.perf_counter() - started)
            metrics.COMPACTIONS.labels(outcome).inc()
            with self._lock:
                self._running.discard(key)

    def trigger(self, repository: str, branch: str) -> bool:
        """Compact in the background; False if the branch is already queued or running here."""
        key = _key(repository, branch)
        with self._lock:
            accepted = key not in self._running and key not in self._queued and len(self._queued) < MAX_QUEUED
            if accepted:
                self._queued.add(key)
        metrics.COMPACTION_TRIGGERS.labels(str(accepted).lower()).inc()
        if accepted:
            self._pool.submit(self._background, key)
        return accepted

    def status(self, repository: str, branch: str) -> tuple[pb.Branch, bool]:
        key = _key(repository, branch)
        refs = self.graveler.refs
        record = refs.get_branch(refs.repository(repository), branch).branch
        with self._lock:
            running = key in self._running or key in self._queued
        return record, running

    def close(self) -> None:
        # A compaction still running is not waited for: cut short, it leaves its tokens
        # sealed and readable, and the next compaction or commit takes them.
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.graveler.close()

    def _background(self, key: tuple[str, str]) -> None:
        repository, branch = key
        with self._lock:
            self._queued.discard(key)
        try:
            result = self.compact(repository, branch, Deadline.after(self._timeout))
            log.info(
                "compacted %s/%s: %d sealed tokens, %d records changed",
                repository,
                branch,
                result.tokens_compacted,
                result.records_changed,
            )
        except CompactionLost as exc:
            log.info("%s", exc)
        except Exception:
            log.warning("compaction of %s/%s failed", repository, branch, exc_info=True)


def _key(repository: str, branch: str) -> tuple[str, str]:
    if not repository:
        raise InvalidArgument("repository name must not be empty")
    validate_ref_name(branch)
    return repository, branch
