"""Graveler's own metrics and spans: commits (duration, entries, ranges written, the sealed
tokens they applied) and staging writes. Labels are fixed sets, never repository or branch
names: the sealed-token backlog per branch is a histogram over commits, not a series per branch."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from engine.core.builder import Build, MetaRangeBuilder
from engine.core.committed.model import ApplyResult
from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.model import StagingToken
from silt.telemetry import metrics
from silt.telemetry.tracing import span

_STAGED_PUT = metrics.STAGING_WRITES.labels("put")
_STAGED_DELETE = metrics.STAGING_WRITES.labels("delete")


def staged(kind: str) -> None:
    (_STAGED_PUT if kind == "put" else _STAGED_DELETE).inc()


@contextlib.contextmanager
def timed_commit() -> Iterator[None]:
    """Counts and times one commit that succeeds."""
    started = time.perf_counter()
    yield
    metrics.COMMIT_DURATION.observe(time.perf_counter() - started)
    metrics.COMMITS.inc()


class MeteredBuilder:
    """A MetaRangeBuilder whose builds are traced (the commit worker's build) and counted."""

    def __init__(self, inner: MetaRangeBuilder) -> None:
        self.inner = inner

    def apply_tokens(self, build: Build, deadline: Deadline = NO_DEADLINE) -> ApplyResult:
        metrics.COMMIT_SEALED_TOKENS.observe(len(build.tokens))
        with span("graveler.commit.build", {"silt.commit.tokens": len(build.tokens)}) as current:
            result = self.inner.apply_tokens(build, deadline)
            if current is not None:
                current.set_attribute("silt.commit.ranges_written", result.ranges_written)
                current.set_attribute("silt.commit.ranges_reused", result.ranges_reused)
                current.set_attribute(
                    "silt.commit.entries", result.records_added + result.records_removed + result.records_changed
                )
        metrics.COMMIT_ENTRIES.inc(result.records_added + result.records_removed + result.records_changed)
        metrics.COMMIT_RANGES_WRITTEN.inc(result.ranges_written)
        return result

    def drop_token(self, token: StagingToken) -> None:
        self.inner.drop_token(token)

    def close(self) -> None:
        self.inner.close()
