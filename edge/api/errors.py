"""The API's typed errors and the one place they become lakeFS-style JSON (`{"message": ...}`)."""

from __future__ import annotations

import time
from typing import Any

import grpc
import grpc.aio

from silt.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    KeptBySetup,
    KeysRefused,
    NotFound,
    PermissionDenied,
    ProtectedBranch,
    ResourceExhausted,
    SiltError,
    SourceChanged,
    Unauthenticated,
    Unavailable,
    is_hook_refusal,
    lakefs_refusal,
)
from silt.rpc.errors import error_from_rpc


class ApiError(Exception):
    """An answer other than success: its HTTP status and the message clients see."""

    def __init__(self, status: int, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        # Typed fields the JSON error carries next to lakeFS's message (lakeFS's clients read
        # only the message): what a client needs to name the cause without parsing the text.
        self.extra = extra or {}


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def unauthorized(message: str = "error authenticating request") -> ApiError:
    return ApiError(401, message)


def forbidden(message: str = "insufficient permissions") -> ApiError:
    return ApiError(403, message)


def not_found(message: str = "not found") -> ApiError:
    return ApiError(404, message)


# Most specific first: DeadlineExceeded is an Unavailable.
_STATUS: tuple[tuple[type[SiltError], int], ...] = (
    # An imported object whose source changed or vanished: lakeFS's "object gone".
    (SourceChanged, 410),
    (NotFound, 404),
    (AlreadyExists, 409),
    (InvalidArgument, 400),
    # What auth's setup writes again at every start: a conflict with Silt's own state.
    (KeptBySetup, 409),
    (FailedPrecondition, 400),
    (PermissionDenied, 403),
    (Unauthenticated, 401),
    (ResourceExhausted, 429),
    (Aborted, 503),
    (Unavailable, 503),
)


def protection_refusal(error: ProtectedBranch) -> ApiError:
    """A branch protection rule refused the change: the caller's problem, answered as lakeFS does
    (403, lakeFS's whole sentence: lakectl and scripts compare it), with the branch and the rules
    that matched it as a typed field for clients that name them (the web UI)."""
    text = str(error)
    protection = {"branch": error.branch, "rules": list(error.rules)}
    return ApiError(403, lakefs_refusal(text) or text, {"branch_protection": protection})


def from_silt(exc: SiltError) -> ApiError:
    if isinstance(exc, ProtectedBranch):
        return protection_refusal(exc)
    if isinstance(exc, FailedPrecondition) and is_hook_refusal(str(exc)):
        return ApiError(412, str(exc))
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return ApiError(status, str(exc) or kind.__name__)
    return ApiError(500, str(exc) or "internal error")


def from_rpc(exc: grpc.aio.AioRpcError, service: str) -> ApiError:
    """A failed call to graveler or auth. The caller was authorized before the call, so a
    service refusing the API itself is a deployment problem, answered 503, never 401/403."""
    return from_graveler(error_from_rpc(exc), service)


def from_graveler(error: SiltError, service: str) -> ApiError:
    """What graveler or auth answered a call, as the API answers it (from_rpc)."""
    if isinstance(error, ProtectedBranch):
        return protection_refusal(error)
    if isinstance(error, KeysRefused):
        # The user the API named may not change a key the operation would (silt/changed_keys.py).
        return ApiError(403, str(error))
    if isinstance(error, PermissionDenied | Unauthenticated):
        return ApiError(503, f"{service} refused the REST API's service credentials: {error}")
    return from_silt(error)


# Refusals a route may want to tell apart (a missing object from a missing branch): kept as
# silt errors by typed calls, not answered at once.
TYPED_REFUSALS = (NotFound, FailedPrecondition, InvalidArgument, AlreadyExists)


def time_left(deadline: float) -> float:
    """Seconds left before the request's deadline (time.monotonic()); 503 once there are none."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ApiError(503, "graveler did not answer within the request's deadline")
    return remaining


async def typed_graveler_call(method: Any, request: Any, deadline: float) -> Any:
    """One graveler call within deadline (time.monotonic()) whose refusals in TYPED_REFUSALS stay
    silt errors; other failures answered as ApiErrors."""
    remaining = time_left(deadline)
    try:
        return await method(request, timeout=remaining)
    except grpc.aio.AioRpcError as exc:
        error = error_from_rpc(exc)
        if isinstance(error, TYPED_REFUSALS):
            raise error from None
        raise from_rpc(exc, "graveler") from None
