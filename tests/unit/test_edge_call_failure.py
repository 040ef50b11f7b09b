"""How the edge's core reads a failed graveler call (edge/core/client.py call_failure)."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from edge.core.client import SLOW_FAILURE_SECONDS, MaybeApplied, SlowlyUnavailable, call_failure
from edge.core.write_outcome import Attempts, NotApplied, certainly_not_applied


def _unavailable(cls: type[grpc.aio.AioRpcError] = grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    return cls(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "connection refused")


@pytest.mark.parametrize("seconds", [0.0, SLOW_FAILURE_SECONDS, 5.0])
def test_a_sent_write_answered_unavailable_may_have_been_applied_however_long_it_took(seconds: float) -> None:
    # A loaded machine makes a lost answer as slow as a frozen store's timeout: either way the
    # call went out, so its bytes must stay.
    attempts = Attempts()
    exc = _unavailable()
    attempts.failed(exc)
    error = call_failure(exc, attempts, seconds, changes=True)
    assert isinstance(error, MaybeApplied)
    assert isinstance(error, SlowlyUnavailable) == (seconds >= SLOW_FAILURE_SECONDS)
    assert not certainly_not_applied(error)


def test_a_write_that_never_left_the_edge_is_not_applied() -> None:
    attempts = Attempts()
    exc = _unavailable(NotApplied)
    attempts.failed(exc)
    error = call_failure(exc, attempts, 5.0, changes=True)
    assert not isinstance(error, MaybeApplied)
    assert certainly_not_applied(error)
