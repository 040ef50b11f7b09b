"""Cleaner: background deletion of staged values nothing refers to any more.

After a commit, merge, reset or branch deletion the old staging tokens are unreachable, and
after a prefix commit its sealed tokens hold copies of values it committed; deleting them runs
off the request path. Nothing reads what it deletes (a head move drops every token it checked,
branching.py), so a late clean-up is only storage held for longer, never a wrong read. A
clean-up that fails is still never dropped: it is logged, counted, and tried again after a
growing pause until it succeeds or the cleaner closes, so a KV outage delays it and no more;
a drop of tokens is recorded in KV until done, so that a graveler killed before it is done
leaves it to the next one to start (resume).
The deletion itself is the builder's job, so that with commit workers it runs in their
processes, away from the serving process's GIL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from services.graveler.builder import MetaRangeBuilder
from services.graveler.model import StagingToken
from silt.kv.store import Store, scan_prefix
from silt.telemetry import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPacing:
    """Pause before the n-th try of a failed clean-up: first * 2**(n-2), at most longest."""

    first: float = 0.5
    longest: float = 60.0

    def pause(self, tries: int) -> float:
        return min(self.longest, self.first * 2 ** max(0, tries - 2))


# In graveler's shared partition: `cleanup/<token>` for each token to drop, from when the drop is
# asked for until it is done, so that a graveler killed meanwhile does not leave it behind: every
# graveler finishes the pending ones when it starts (Cleaner.resume).
PENDING_PARTITION = b"graveler"
PENDING_PREFIX = b"cleanup/"


class Cleaner:
    def __init__(
        self,
        builder: MetaRangeBuilder,
        workers: int = 1,
        pacing: RetryPacing | None = None,
        pending: Store | None = None,
    ) -> None:
        """pending: where drops asked for are recorded until done (unjournaled); None keeps
        them in memory only."""
        self.builder = builder
        self._pending = pending
        self.pacing = pacing or RetryPacing()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="graveler-cleanup")
        self._lock = threading.Lock()
        self._waiting: set[threading.Timer] = set()
        self._closed = False

    def drop_tokens(self, tokens: Iterable[StagingToken]) -> None:
        """Delete the staged values of tokens, in the background; recorded first, so that it
        survives this process (the tokens are unreachable already: nothing reads them again)."""
        tokens = list(tokens)
        if self._pending is not None and tokens:
            try:
                self._pending.apply(PENDING_PARTITION, [(PENDING_PREFIX + token.encode(), b"") for token in tokens])
            except Exception as exc:
                # The change that made them unreachable is done and must be reported as done:
                # the drop still runs from memory, and only a kill before it ends loses it.
                metrics.CLEANUP_FAILURES.inc()
                log.warning(
                    "could not record the drop of %d staging tokens, dropping them anyway: %s", len(tokens), exc
                )
        for token in tokens:
            self.submit(self._drop, token)

    def resume(self) -> None:
        """Drop, in the background, every token recorded as pending (by this process or a
        graveler that died before it was done); a KV outage delays it, as any clean-up."""
        if self._pending is not None:
            self.submit(self._resume)

    def _resume(self) -> None:
        assert self._pending is not None
        tokens = [
            StagingToken(entry.key[len(PENDING_PREFIX) :].decode())
            for entry in scan_prefix(self._pending, PENDING_PARTITION, PENDING_PREFIX)
        ]
        for token in tokens:
            # In this task (a failed one is retried on its own), so that flush waits for them.
            self._run(self._drop, (token,), 1)

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

    def _drop(self, token: StagingToken) -> None:
        self.builder.drop_token(token)
        if self._pending is not None:
            self._pending.delete(PENDING_PARTITION, PENDING_PREFIX + token.encode())

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
