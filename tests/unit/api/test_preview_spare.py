"""The preview sandbox's spare child: started ahead, taken by a later preview."""

from __future__ import annotations

import select
import time

from edge.api.preview.sandbox import START_SECONDS, _Child
from tests.support.wait import wait_until


def test_a_spare_started_long_ago_is_ready_not_timed_out() -> None:
    """A spare is started at one preview and taken at the next, which may come minutes later:
    its READY frame waits in the pipe past its start deadline and must still be read. It was
    refused as not started whenever previews were more than START_SECONDS apart."""
    child = _Child()
    try:
        # Ready once its READY frame is in the pipe; then its start deadline passes.
        wait_until(lambda: child.proc.poll() is not None or _readable(child), 30.0, "the child's READY frame")
        child.start_by = time.monotonic() - START_SECONDS
        child.wait_ready()
        assert child.ready
    finally:
        child.end()


def _readable(child: _Child) -> bool:
    assert child.proc.stdout is not None
    return bool(select.select([child.proc.stdout.fileno()], [], [], 0)[0])
