"""How the edge's core reads a failed graveler call (edge/core/client.py call_failure)."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from edge.core.client import MaybeApplied, call_failure
from edge.core.write_outcome import Attempts, NotApplied, certainly_not_applied
from edge.gateway.backend import s3_error
from silt.errors import ResourceExhausted


def _failed(
    cls: type[grpc.aio.AioRpcError] = grpc.aio.AioRpcError, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
) -> grpc.aio.AioRpcError:
    return cls(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "connection refused")


def _unavailable(cls: type[grpc.aio.AioRpcError] = grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    return _failed(cls)


def test_a_sent_write_answered_unavailable_may_have_been_applied() -> None:
    # A loaded machine makes a lost answer as slow as a frozen store's timeout: either way the
    # call went out, so its bytes must stay; and either way it is no request to slow down.
    attempts = Attempts()
    exc = _unavailable()
    attempts.failed(exc)
    error = call_failure(exc, attempts, changes=True)
    assert isinstance(error, MaybeApplied)
    assert s3_error(error).code == "ServiceUnavailable"
    assert not certainly_not_applied(error)


@pytest.mark.parametrize("changes", [False, True])
def test_graveler_shedding_load_is_slow_down(changes: bool) -> None:
    attempts = Attempts()
    exc = _failed(code=grpc.StatusCode.RESOURCE_EXHAUSTED)
    attempts.failed(exc)
    error = call_failure(exc, attempts, changes=changes)
    assert isinstance(error, ResourceExhausted)
    assert s3_error(error).code == "SlowDown"


def test_a_write_that_never_left_the_edge_is_not_applied() -> None:
    attempts = Attempts()
    exc = _unavailable(NotApplied)
    attempts.failed(exc)
    error = call_failure(exc, attempts, changes=True)
    assert not isinstance(error, MaybeApplied)
    assert certainly_not_applied(error)
