"""Server interceptors' one way to wrap a gRPC method handler around a new behaviour.

Every Silt server interceptor (error mapping, authentication, admission, graveler's journal
context, telemetry's server spans) rebuilds the handler it is given around its own behaviour;
here is the one place that knows grpc's four kinds of handler and carries the (de)serializers
over. Most run each call inside a scope (a context manager opened with the call's request and
context, closed when the call ends: a unary call's return, a streamed response's last message),
so the same scope serves unary and streamed responses alike.

A module of its own, not in silt.rpc: silt.telemetry's interceptor uses it too, and silt.rpc
imports silt.telemetry.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc

# A handler's behaviour: (request, context) -> response, or an iterator of responses.
Behavior = Callable[[Any, grpc.ServicerContext], Any]
# Opened around one call: (request, context) -> a context manager.
Scope = Callable[[Any, grpc.ServicerContext], AbstractContextManager[object]]
Wrap = Callable[[Behavior], Behavior]


class HandlerInterceptor(grpc.ServerInterceptor, abc.ABC):
    """A server interceptor that rebuilds the handler of every method the server has (wrap);
    a method it does not have passes through as no handler, for gRPC to answer UNIMPLEMENTED."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        return None if handler is None else self.wrap(handler, handler_call_details)

    @abc.abstractmethod
    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        """The handler of the method details names, in place of handler."""


def wrapped(handler: grpc.RpcMethodHandler, unary: Wrap | None, streamed: Wrap | None = None) -> grpc.RpcMethodHandler:
    """handler with its behaviour replaced by unary(behaviour) for a unary request and response,
    by streamed(behaviour) for a unary request and a streamed response; handler itself for a
    kind given no wrap, and for streamed requests (no Silt API has them)."""
    if handler.unary_unary is not None:
        if unary is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            unary(handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None and streamed is not None:
        return grpc.unary_stream_rpc_method_handler(
            streamed(handler.unary_stream),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


def in_scope(behavior: Behavior, scope: Scope) -> Behavior:
    """A unary response's behaviour run inside scope."""

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        with scope(request, context):
            return behavior(request, context)

    return handle


def streamed_in_scope(behavior: Behavior, scope: Scope) -> Behavior:
    """A streamed response's behaviour run inside scope, from the first message to the last."""

    def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        with scope(request, context):
            yield from behavior(request, context)

    return handle


def within(handler: grpc.RpcMethodHandler, scope: Scope, streams: bool = True) -> grpc.RpcMethodHandler:
    """handler with every call of a unary request run inside scope (streamed responses only if
    streams)."""
    return wrapped(
        handler,
        lambda behavior: in_scope(behavior, scope),
        (lambda behavior: streamed_in_scope(behavior, scope)) if streams else None,
    )


def reading_requests(
    handler: grpc.RpcMethodHandler, behavior: Callable[[Iterator[Any], grpc.ServicerContext], Any]
) -> grpc.RpcMethodHandler:
    """A handler that reads its request as a stream (behaviour gets an iterator of requests),
    with handler's (de)serializers and kind of response."""
    factory = (
        grpc.stream_stream_rpc_method_handler if handler.response_streaming else grpc.stream_unary_rpc_method_handler
    )
    return factory(
        behavior, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


def refusal(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler that ends every call with code and message without reading its request."""

    def refuse(_requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        context.abort(code, message)

    return reading_requests(handler, refuse)
