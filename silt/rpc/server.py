"""Building a gRPC server the same way for every service, so cross-cutting interceptors
(error mapping now, authentication later) apply to every handler without touching them."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from silt.rpc.errors import ErrorMappingInterceptor

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def build_server(interceptors: Sequence[grpc.ServerInterceptor] = (), max_workers: int = 32) -> grpc.Server:
    # Error mapping is innermost so other interceptors see handlers that never raise SiltError.
    return grpc.server(
        ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="grpc"),
        interceptors=[*interceptors, ErrorMappingInterceptor()],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )


def bind(server: grpc.Server, address: str) -> int:
    """Listen on address (host:port; port 0 picks a free one) and return the port."""
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return port
