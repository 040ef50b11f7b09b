"""The cleaner tries a failed clean-up again until it succeeds, and says so."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from prometheus_client import REGISTRY

from engine.core.cleanup import Cleaner, RetryPacing
from engine.core.model import StagingToken


class FlakyBuilder:
    """Fails the first `failures` drops of every token, then drops it."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.tries: dict[str, int] = {}
        self.dropped = threading.Event()

    def drop_token(self, token: StagingToken) -> None:
        self.tries[token] = self.tries.get(token, 0) + 1
        if self.tries[token] <= self.failures:
            raise ConnectionError("the KV is down")
        self.dropped.set()


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_a_failed_drop_is_tried_again_until_it_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    builder = FlakyBuilder(failures=3)
    cleaner = Cleaner(builder, pacing=RetryPacing(first=0.01, longest=0.02))  # type: ignore[arg-type]
    failures_before = counter("silt_graveler_cleanup_failures_total")
    try:
        with caplog.at_level(logging.WARNING, logger="engine.core.cleanup"):
            cleaner.drop_recorded(b"repo", [StagingToken("t1")])
            assert builder.dropped.wait(10)
        assert builder.tries == {"t1": 4}
        assert counter("silt_graveler_cleanup_failures_total") - failures_before == 3
        warnings = [r for r in caplog.records if "background clean-up" in r.getMessage()]
        assert [bool(r.exc_info) for r in warnings] == [True, False, False]  # one traceback
        assert cleaner.waiting() == 0
    finally:
        cleaner.close()


def test_pauses_grow_up_to_the_longest() -> None:
    pacing = RetryPacing(first=0.5, longest=4.0)
    assert [pacing.pause(n) for n in range(2, 8)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_close_cancels_the_retries_that_wait() -> None:
    builder = FlakyBuilder(failures=1_000)
    cleaner = Cleaner(builder, pacing=RetryPacing(first=30.0, longest=30.0))  # type: ignore[arg-type]
    cleaner.drop_recorded(b"repo", [StagingToken("t1"), StagingToken("t2")])
    cleaner.flush(10)
    assert cleaner.waiting() == 2
    cleaner.close()
    assert cleaner.waiting() == 0
    assert not [t for t in threading.enumerate() if t.name == "graveler-cleanup-retry" and t.is_alive()]


def test_a_task_is_tried_again_with_its_arguments() -> None:
    calls: list[tuple[Any, ...]] = []
    done = threading.Event()

    def task(*args: Any) -> None:
        calls.append(args)
        if len(calls) < 2:
            raise RuntimeError("not yet")
        done.set()

    cleaner = Cleaner(FlakyBuilder(0), pacing=RetryPacing(first=0.01, longest=0.01))  # type: ignore[arg-type]
    try:
        cleaner.submit(task, "repo", "main")
        assert done.wait(10)
        assert calls == [("repo", "main"), ("repo", "main")]
    finally:
        cleaner.close()
