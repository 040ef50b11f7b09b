"""Silt's typed errors <-> gRPC status codes, in one place for every service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from silt.errors import (
    Aborted,
    AlreadyExists,
    ConfigError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PredicateFailed,
    SiltError,
    Unavailable,
)

STATUS_OF: list[tuple[type[SiltError], grpc.StatusCode]] = [
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (PredicateFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (Aborted, grpc.StatusCode.ABORTED),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
]
_ERROR_OF = {code: cls for cls, code in reversed(STATUS_OF)}


# A status message travels in a trailer, percent-encoded, and a peer refuses trailers over
# 16 KiB: a message echoing a client's megabyte-long name turned a refusal (INVALID_ARGUMENT)
# into RESOURCE_EXHAUSTED at the caller, which the gateway answers 503 SlowDown.
MAX_DETAILS_BYTES = 1024


def details_of(exc: BaseException) -> str:
    """The message of exc, cut to MAX_DETAILS_BYTES of UTF-8 (at most 3 KiB once percent-encoded)."""
    text = str(exc)
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_DETAILS_BYTES:
        return text
    return encoded[:MAX_DETAILS_BYTES].decode("utf-8", "ignore") + "… (message truncated)"


def status_of(exc: SiltError) -> grpc.StatusCode:
    for cls, code in STATUS_OF:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def error_from_rpc(exc: grpc.RpcError) -> SiltError:
    """The typed error a client raises for a failed call (UNAVAILABLE when the server is unreachable)."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return _ERROR_OF.get(code, SiltError)(details or code.name)


def _wrap(behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return behavior(request, context)
        except SiltError as exc:
            context.abort(status_of(exc), details_of(exc))

    return handle


def _wrap_stream(behavior: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            yield from behavior(request, context)
        except SiltError as exc:
            context.abort(status_of(exc), details_of(exc))

    return handle


class ErrorMappingInterceptor(grpc.ServerInterceptor):
    """Turns SiltErrors raised by any handler into the matching status code and message."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _wrap(handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _wrap_stream(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler
