"""Cleaner: background deletion of staged values nothing refers to any more.

After a commit, merge, reset or branch deletion the old staging tokens are unreachable, and
after a prefix commit its sealed tokens hold copies of values it committed; deleting them runs
off the request path. Nothing reads what it deletes (a head move drops every token it checked,
branching.py), so a late clean-up is only storage held for longer, never a wrong read. A
clean-up that fails is still never dropped: it is logged, counted, and tried again after a
growing pause until it succeeds or the cleaner closes, so a KV outage delays it and no more.
A drop of tokens is recorded in KV until done, in the repository's partition and in the batch
of the branch update that made the tokens unreachable (drop_records.py), so that a graveler
killed before it is done leaves it to the next one to start, and to every graveler's periodic
look over the repositories (resume).
The deletion itself is the builder's job, so that with commit workers it runs in their
processes, away from the serving process's GIL.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from engine.core.builder import MetaRangeBuilder
from engine.core.drop_records import LEGACY_PARTITION, PENDING_PREFIX, record_key, token_of
from engine.core.model import StagingToken
from silt.kv.conditional import delete_current
from silt.kv.store import Store
from silt.telemetry import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPacing:
    """Pause before the n-th try of a failed clean-up: first * 2**(n-2), at most longest."""

    first: float = 0.5
    longest: float = 60.0

    def pause(self, tries: int) -> float:
        return min(self.longest, self.first * 2 ** max(0, tries - 2))


# Repositories, and records of one partition, read at a time when resuming: a resume never holds
# a whole listing, nor a scan open across the drops it runs.
RESUME_BATCH = 100
# How often a graveler looks for drops another one left (resume_if_due), besides at its start.
RESUME_INTERVAL_SECONDS = 600.0

# The repositories to look in for drop records: (name, partition) of those named after `after`,
# in name order.
Repositories = Callable[[str], Iterable[tuple[str, bytes]]]


class Cleaner:
    def __init__(
        self,
        builder: MetaRangeBuilder,
        workers: int = 1,
        pacing: RetryPacing | None = None,
        pending: Store | None = None,
        repositories: Repositories | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """pending: the (unjournaled) store holding drop records; None keeps drops in memory only.
        repositories: where resume looks for records (besides the legacy partition)."""
        self.builder = builder
        self._pending = pending
        self._repositories = repositories
        self.pacing = pacing or RetryPacing()
        self.resume_interval = RESUME_INTERVAL_SECONDS
        self._clock = clock
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="graveler-cleanup")
        self._lock = threading.Lock()
        self._waiting: set[threading.Timer] = set()
        self._closed = False
        self._resuming = False
        self._last_resume: float | None = None

    def drop_recorded(self, partition: bytes, tokens: Iterable[StagingToken]) -> None:
        """Delete the staged values of tokens, in the background, then their drop records in
        partition: written with the branch update that made them unreachable (drop_records.py),
        they survive this process."""
        for token in dict.fromkeys(tokens):
            self.submit(self._drop, token, partition)

    def resume(self) -> bool:
        """Drop, in the background, every token recorded as pending (by this process or a
        graveler that died before it was done), in every repository and in the partition earlier
        versions recorded them in; a KV outage delays it, as any clean-up. False (nothing
        started) when a resume is under way already or there is no store to resume from."""
        if self._pending is None:
            return False
        with self._lock:
            if self._resuming:
                return False
            self._resuming = True
            self._last_resume = self._clock()
        self.submit(self._resume)
        return True

    def resume_if_due(self) -> bool:
        """resume, if the last one started resume_interval seconds ago or more (the serving
        process's periodic tick: drops left by a graveler that died while others run on)."""
        with self._lock:
            due = self._last_resume is None or self._clock() - self._last_resume >= self.resume_interval
        return due and self.resume()

    def _resume(self) -> None:
        assert self._pending is not None
        for partition in self._partitions():
            for batch in self._recorded(partition):
                for token in batch:
                    # In this task (a failed one is retried on its own), so that flush waits for them.
                    self._run(self._drop, (token, partition), 1)
        with self._lock:
            self._resuming = False

    def _partitions(self) -> Iterator[bytes]:
        """The legacy partition, then every repository's, read RESUME_BATCH repositories at a time."""
        yield LEGACY_PARTITION
        if self._repositories is None:
            return
        after = ""
        while batch := list(itertools.islice(self._repositories(after), RESUME_BATCH)):
            for _, partition in batch:
                yield partition
            after = batch[-1][0]

    def _recorded(self, partition: bytes) -> Iterator[list[StagingToken]]:
        """The tokens recorded in partition, RESUME_BATCH at a time, each batch read anew after
        the previous one's drops ran (which delete their records)."""
        assert self._pending is not None
        start = PENDING_PREFIX
        while chunk := next(iter(self._pending.scan_chunks(partition, start, RESUME_BATCH)), None):
            keys = [key for key, _ in chunk if key.startswith(PENDING_PREFIX)]
            if keys:
                yield [token_of(key) for key in keys]
            if len(keys) < len(chunk):
                return  # past the records
            start = keys[-1] + b"\x00"

    def drop_now(self, token: StagingToken) -> None:
        """Delete the staged values of token before returning (errors propagate)."""
        self.builder.drop_token(token)

    def submit(self, task: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run task in the background, again after a pause whenever it raises. It must be
        idempotent, and return normally once there is nothing left to do."""
        return self._pool.submit(self._run, task, args, 1)

    def waiting(self) -> int:
        """How many failed clean-ups wait for their next try."""
        with self._lock:
            return len(self._waiting)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every task submitted so far has had its first try (one worker runs them in order)."""
        self._pool.submit(lambda: None).result(timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, set()
        for timer in waiting:
            timer.cancel()
        # A cancelled timer's thread still has to wake and end: wait for it, so that nothing of
        # the cleaner outlives close (it is only waking, so this takes moments).
        for timer in waiting:
            timer.join(5.0)
        metrics.CLEANUP_RETRIES_WAITING.dec(len(waiting))
        self._pool.shutdown(wait=True)

    def _drop(self, token: StagingToken, partition: bytes) -> None:
        self.builder.drop_token(token)
        if self._pending is None:
            return
        if partition == LEGACY_PARTITION:
            self._pending.delete(partition, record_key(token))  # written plainly, by earlier versions
        else:
            delete_current(self._pending, partition, record_key(token))

    def _run(self, task: Callable[..., Any], args: tuple[Any, ...], tries: int) -> None:
        try:
            task(*args)
        except Exception as exc:
            metrics.CLEANUP_FAILURES.inc()
            pause = self.pacing.pause(tries + 1)
            # The traceback once; a clean-up failing again (a KV outage) says one line each time.
            log.warning(
                "background clean-up %s failed (try %d), trying again in %.1f s: %s",
                getattr(task, "__name__", task),
                tries,
                pause,
                exc,
                exc_info=tries == 1,
            )
            self._again(task, args, tries + 1, pause)

    def _again(self, task: Callable[..., Any], args: tuple[Any, ...], tries: int, pause: float) -> None:
        def due() -> None:
            with self._lock:
                if timer not in self._waiting:
                    return  # closed meanwhile
                self._waiting.discard(timer)
                metrics.CLEANUP_RETRIES_WAITING.dec()
                try:
                    self._pool.submit(self._run, task, args, tries)
                except RuntimeError:  # the pool shut down between close's cancel and now
                    return

        timer = threading.Timer(pause, due)
        timer.name = "graveler-cleanup-retry"
        timer.daemon = True
        with self._lock:
            if self._closed:
                return
            self._waiting.add(timer)
            metrics.CLEANUP_RETRIES_WAITING.inc()
            # Started under the lock, so that close never finds a timer it cannot join.
            timer.start()
