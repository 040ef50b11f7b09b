"""IAM calls to auth made for the request's caller, not as the API.

The API signs every call to auth as its own service user (svc-api). An IAM call names the
authenticated caller in the `x-silt-acting-user` header; auth honors it because svc-api holds
`auth:ActForUser` (literal-only, granted by setup to svc-api alone) and then judges the call as
that user's: the permission rule and the "nobody grants what they do not hold" check both apply
to the end user, so delegated IAM through the API neither fails nor escalates
(services/auth/acting.py).

So a PERMISSION_DENIED from such a call is the caller's own 403 (the grants check's message
says what it lacked), except when auth refused the header itself (svc-api lost ActForUser): a
deployment fault, 503 like every refusal of the API's own credentials.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import grpc.aio

from edge.api.context import Context
from edge.api.errors import ApiError, from_silt
from silt.errors import AlreadyExists, NotFound, PermissionDenied, Unauthenticated
from silt.rpc.errors import error_from_rpc
from silt.rpc.signing import ACTING_USER_HEADER

# What auth says when it refuses the header itself (services/auth/acting.py REFUSED_ACTING).
REFUSED_ACTING = "cannot make IAM calls for other users"
LAKEFS_ALREADY_EXISTS = "Already exists"
LAKEFS_USER_NOT_FOUND = "user not found"


async def iam_call(ctx: Context, method: Any, request: Any) -> Any:
    """An AuthService IAM call made for ctx.caller, within the request's deadline."""
    remaining = ctx.deadline - time.monotonic()
    if remaining <= 0:
        raise ApiError(503, "auth did not answer within the request's deadline")
    try:
        # Where the caller is goes with it, signed: auth judges the user from there.
        metadata = ((ACTING_USER_HEADER, ctx.caller.user_id), *ctx.client_ip_metadata)
        return await method(request, timeout=remaining, metadata=metadata)
    except grpc.aio.AioRpcError as exc:
        error = error_from_rpc(exc)
        if isinstance(error, PermissionDenied) and REFUSED_ACTING not in str(error):
            raise ApiError(403, str(error)) from None
        if isinstance(error, PermissionDenied | Unauthenticated):
            raise ApiError(503, f"auth refused the REST API's service credentials: {error}") from None
        if isinstance(error, AlreadyExists):
            # lakeFS's words for every IAM duplicate (user, group, policy, credentials): lakectl
            # and scripts compare the whole message.
            raise ApiError(409, LAKEFS_ALREADY_EXISTS) from None
        if isinstance(error, NotFound) and error.what == "user":
            raise ApiError(404, LAKEFS_USER_NOT_FOUND) from None
        raise from_silt(error) from None
