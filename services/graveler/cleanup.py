"""Cleaner: background deletion of staged values nothing refers to any more.

After a commit, reset or branch deletion the old staging tokens are unreachable; deleting
their values is best effort and off the request path (leftovers are harmless and the
garbage collector reports them). The deletion itself is the builder's job, so that with
commit workers it runs in their processes, away from the serving process's GIL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from services.graveler.builder import MetaRangeBuilder
from services.graveler.model import StagingToken

log = logging.getLogger(__name__)


class Cleaner:
    def __init__(self, builder: MetaRangeBuilder, workers: int = 1) -> None:
        self.builder = builder
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="graveler-cleanup")

    def drop_tokens(self, tokens: Iterable[StagingToken]) -> None:
        """Delete the staged values of tokens, in the background."""
        for token in tokens:
            self._pool.submit(self._drop, token)

    def drop_now(self, token: StagingToken) -> None:
        """Delete the staged values of token before returning (errors propagate)."""
        self.builder.drop_token(token)

    def submit(self, task: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run task in the background; task handles its own errors."""
        return self._pool.submit(task, *args)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every task submitted so far has run (one worker runs them in order)."""
        self._pool.submit(lambda: None).result(timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _drop(self, token: StagingToken) -> None:
        try:
            self.builder.drop_token(token)
        except Exception:  # best effort: leftovers are unreachable and collected later
            log.warning("could not clean staging token %s", token, exc_info=True)
