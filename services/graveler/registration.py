"""Serving GravelerService on a gRPC server, some answers handed over already serialized.

The generated registration gives every method a serializer of its response message. A
listing page of thousands of entries is written straight in protobuf's wire format
(list_answer.py): parsing those bytes into a message only for gRPC to serialize it again
cost more than writing them. Those methods are registered here with their bytes-returning
handler and a serializer that passes the bytes on; every other method as generated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc

from silt.graveler.v1 import graveler_pb2_grpc as api_grpc

SERVICE = "silt.graveler.v1.GravelerService"


class _Recorder:
    """Stands in for a server to the generated registration, keeping the handlers it adds."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # the same handlers come again, by name, below

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        assert service == SERVICE, service
        self.handlers.update(handlers)


def _as_is(answer: bytes) -> bytes:
    return answer


def add_graveler_service(
    servicer: api_grpc.GravelerServiceServicer,
    server: grpc.Server,
    serialized: Mapping[str, Callable[[Any, grpc.ServicerContext], bytes]],
) -> None:
    """Register servicer's methods on server; each method named in serialized is served by its
    handler there, which returns the response's serialized bytes."""
    recorder = _Recorder()
    # Duck-typed: the generated code only calls the two methods _Recorder has.
    api_grpc.add_GravelerServiceServicer_to_server(servicer, recorder)  # type: ignore[arg-type]
    handlers = dict(recorder.handlers)
    for method, handler in serialized.items():
        generated = handlers[method]
        handlers[method] = grpc.unary_unary_rpc_method_handler(
            handler, request_deserializer=generated.request_deserializer, response_serializer=_as_is
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
