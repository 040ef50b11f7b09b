"""silt/grpc_handlers.py: how every server interceptor wraps a method handler. The handlers are
grpc's own; the servicer context is a stand-in (what a scope does with it is the point)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from silt.grpc_handlers import HandlerInterceptor, refusal, within


class _Aborted(Exception):
    pass


class _Context:
    def abort(self, code: grpc.StatusCode, message: str) -> None:
        raise _Aborted(code, message)


CONTEXT: Any = _Context()


def _recording(events: list[str]) -> Any:
    @contextmanager
    def scope(request: Any, context: Any) -> Iterator[None]:
        events.append(f"enter {request}")
        try:
            yield
        except ValueError:
            events.append("exit failed")
            raise
        events.append("exit")

    return scope


def test_a_unary_call_runs_inside_the_scope_which_sees_its_failure() -> None:
    events: list[str] = []

    def behavior(request: str, context: Any) -> str:
        events.append("call")
        if request == "bad":
            raise ValueError(request)
        return request.upper()

    handler = within(grpc.unary_unary_rpc_method_handler(behavior, request_deserializer=bytes), _recording(events))
    assert handler.request_deserializer is bytes  # carried over
    assert handler.unary_unary is not None
    assert handler.unary_unary("ok", CONTEXT) == "OK"
    with pytest.raises(ValueError):
        handler.unary_unary("bad", CONTEXT)
    assert events == ["enter ok", "call", "exit", "enter bad", "call", "exit failed"]


def test_a_streamed_response_keeps_the_scope_open_until_its_last_message() -> None:
    events: list[str] = []

    def behavior(request: str, context: Any) -> Iterator[str]:
        for n in range(2):
            events.append(f"send {n}")
            yield f"{request}{n}"

    handler = within(grpc.unary_stream_rpc_method_handler(behavior), _recording(events))
    assert handler.unary_stream is not None
    assert list(handler.unary_stream("m", CONTEXT)) == ["m0", "m1"]
    assert events == ["enter m", "send 0", "send 1", "exit"]


def test_what_a_scope_does_not_wrap_passes_through_unchanged() -> None:
    streamed: grpc.RpcMethodHandler = grpc.unary_stream_rpc_method_handler(lambda request, context: iter(()))
    assert within(streamed, _recording([]), streams=False) is streamed
    streamed_requests: grpc.RpcMethodHandler = grpc.stream_unary_rpc_method_handler(lambda requests, context: None)
    assert within(streamed_requests, _recording([])) is streamed_requests


def test_a_refusal_ends_the_call_without_reading_its_request() -> None:
    handler = refusal(
        grpc.unary_stream_rpc_method_handler(lambda r, c: iter(())), grpc.StatusCode.UNAUTHENTICATED, "no"
    )
    assert handler.request_streaming and handler.response_streaming and handler.stream_stream is not None

    def requests() -> Iterator[str]:
        raise AssertionError("the request was read")
        yield ""

    with pytest.raises(_Aborted) as refused:
        handler.stream_stream(requests(), CONTEXT)
    assert refused.value.args == (grpc.StatusCode.UNAUTHENTICATED, "no")


def test_an_interceptor_is_not_asked_to_wrap_a_method_the_server_does_not_have() -> None:
    class Marking(HandlerInterceptor):
        def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            return refusal(handler, grpc.StatusCode.PERMISSION_DENIED, details.method)

    known: grpc.RpcMethodHandler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    details: Any = type("Details", (), {"method": "/s/M", "invocation_metadata": ()})()
    assert Marking().intercept_service(lambda d: None, details) is None
    wrapped = Marking().intercept_service(lambda d: known, details)
    assert wrapped is not None and wrapped.stream_unary is not None
