"""A failed object write of the edge's core, as each front end answers it, by the phase it failed
in: a store's error while the bytes are written is the store's (never "may have staged"), a
staging error is answered as one, and the target's lookup as graveler's answer."""

from __future__ import annotations

import pytest

from edge.api.objects.write import write_error
from edge.core.object_writes import NoSuchBranch, NotABranch, ObjectWriteFailed, ShortBody, WritePhase
from edge.gateway.operations.common import core_write_error
from silt.errors import AlreadyExists, InvalidArgument, NotApplied, NotFound, SiltError, Unavailable
from silt.graveler.v1 import graveler_pb2 as api

BYTES, STAGING, TARGET = WritePhase.BYTES, WritePhase.STAGING, WritePhase.TARGET


def _request(conditional: bool = False) -> api.StageEntryRequest:
    return api.StageEntryRequest(repository="repo", branch="main", key="k", if_absent=conditional)


@pytest.mark.parametrize(
    ("phase", "error", "code"),
    [
        (BYTES, NotFound("s3 writing x: NoSuchBucket"), "NoSuchKey"),
        (BYTES, InvalidArgument("EntityTooLarge"), "InvalidArgument"),
        (BYTES, AlreadyExists("odd"), "InternalError"),
        (BYTES, Unavailable("the store is down"), "ServiceUnavailable"),
        (BYTES, ShortBody("the body ended after 3 of its 7 bytes"), "IncompleteBody"),
        (TARGET, NotABranch("'v1' is not a branch"), "MethodNotAllowed"),
        (TARGET, NoSuchBranch("no branch 'gone'"), "NoSuchBucket"),
        (TARGET, NotFound("repository 'repo' not found", what="repository"), "NoSuchBucket"),
        (STAGING, NotFound("repository 'repo' not found", what="repository"), "NoSuchBucket"),
        (STAGING, NotApplied("nothing was staged; retry"), "ServiceUnavailable"),
    ],
)
def test_the_gateway_answers_each_phase_in_its_terms(phase: WritePhase, error: SiltError, code: str) -> None:
    assert core_write_error(ObjectWriteFailed(phase, error), _request()).code == code


def test_a_conditional_write_refused_by_its_condition_is_precondition_failed() -> None:
    from silt.errors import FailedPrecondition

    failed = ObjectWriteFailed(STAGING, FailedPrecondition("the key exists"))
    assert core_write_error(failed, _request(conditional=True)).code == "PreconditionFailed"


@pytest.mark.parametrize(
    ("phase", "error", "status", "says"),
    [
        # The store failed while the bytes were written: nothing was staged, whatever the error.
        (BYTES, NotFound("s3 writing x: NoSuchBucket"), 404, "NoSuchBucket"),
        (BYTES, InvalidArgument("EntityTooLarge"), 400, "EntityTooLarge"),
        (BYTES, ShortBody("the body ended after 3 of its 7 bytes"), 400, "ended after 3"),
        (TARGET, NotFound("branch 'gone' not found", what="branch"), 404, "gone"),
        # A staging whose outcome is unknown may stand: 503, retry.
        (STAGING, Unavailable("timed out"), 503, "may have staged"),
        (STAGING, NotApplied("nothing was staged; retry"), 503, "nothing was staged"),
    ],
)
def test_the_api_answers_each_phase_in_its_terms(phase: WritePhase, error: SiltError, status: int, says: str) -> None:
    answer = write_error(ObjectWriteFailed(phase, error), _request())
    assert answer.status == status and says in answer.message
    if says != "may have staged":
        assert "may have staged" not in answer.message
