"""Background runs (post-event hooks, pull request checks), fair between repositories.

A few worker threads serve every repository; each repository runs at most `per_repository`
jobs at once and queues at most `max_queued`, so one repository whose hooks hang holds at
most `per_repository` workers and never delays another's runs behind its backlog. Repositories
with work wait in a round-robin line: a worker takes the next job of the next repository that
has room. A job refused because its repository's queue is full is handed to `on_dropped`
(which records it) instead of growing memory without bound.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

_log = logging.getLogger(__name__)

Job = Callable[[], object]


class FairScheduler:
    def __init__(self, workers: int = 4, per_repository: int = 1, max_queued: int = 100) -> None:
        self._per_repository = max(1, per_repository)
        self._max_queued = max(1, max_queued)
        self._cond = threading.Condition()
        self._queues: dict[str, deque[Job]] = {}
        self._running: dict[str, int] = {}
        self._ready: deque[str] = deque()  # repositories with queued jobs and room to run one
        self._closed = False
        self._busy = 0
        self._threads = [
            threading.Thread(target=self._work, name=f"actions-{n}", daemon=True) for n in range(max(1, workers))
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, repository: str, job: Job) -> bool:
        """Queue job for repository; False (nothing queued) when its queue is full or closed."""
        with self._cond:
            if self._closed:
                return False
            queue = self._queues.setdefault(repository, deque())
            if len(queue) >= self._max_queued:
                return False
            queue.append(job)
            if len(queue) == 1 and self._running.get(repository, 0) < self._per_repository:
                self._ready.append(repository)
            self._cond.notify()
            return True

    def _take(self) -> tuple[str, Job] | None:
        with self._cond:
            while not self._ready and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            repository = self._ready.popleft()
            queue = self._queues[repository]
            job = queue.popleft()
            running = self._running.get(repository, 0) + 1
            self._running[repository] = running
            if queue and running < self._per_repository:
                self._ready.append(repository)  # behind the others: round robin
            self._busy += 1
            return repository, job

    def _done(self, repository: str) -> None:
        with self._cond:
            self._busy -= 1
            running = self._running[repository] - 1
            queue = self._queues.get(repository)
            if running:
                self._running[repository] = running
            else:
                del self._running[repository]
            if queue and running < self._per_repository and repository not in self._ready:
                self._ready.append(repository)
            elif not queue and not running:
                self._queues.pop(repository, None)
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            repository, job = taken
            try:
                job()
            except Exception:  # a job records its own failures; this is a bug's last stop
                _log.exception("background action job of repository %r failed", repository)
            finally:
                self._done(repository)

    def wait_idle(self, timeout: float) -> bool:
        """Whether every queued job ran within timeout (for shutdown and tests)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy and not self._ready and not self._queues, timeout)

    def close(self, timeout: float = 5.0) -> None:
        self.wait_idle(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=0.1)
