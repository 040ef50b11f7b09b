"""A gRPC port cannot be hung by a caller without credentials: a real auth process keeps
answering signed calls promptly while anonymous peers hold health streams and stalled calls
open, and refuses requests larger than its API needs before parsing them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.launcher import Stack
from silt.rpc.signing import REQUIRED_HEADERS, signed_channel

WHO_AM_I = "/silt.auth.v1.AuthService/WhoAmI"
AUTHORIZE_MANY = "/silt.auth.v1.AuthService/AuthorizeMany"
# More than the server's worker threads (32), as an attacker would open.
HOSTILE_STREAMS = 64
PROMPT_SECONDS = 3.0


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir: Path = tmp_path_factory.mktemp("silt-exhaustion")
    with Stack(data_dir, ports={"auth": 0}, services=["auth"], restart=False, on_event=lambda _: None) as stack:
        yield stack


def forged_metadata() -> tuple[tuple[str, str | bytes], ...]:
    """Every signature header, with values anyone can write without a key."""
    return tuple((header, "0") for header in REQUIRED_HEADERS)


def test_open_health_watches_and_stalled_unsigned_calls_leave_signed_calls_prompt(auth: Stack) -> None:
    endpoint = auth.endpoints["auth"]
    hostile = [grpc.insecure_channel(endpoint) for _ in range(8)]
    release = threading.Event()
    watches: list[Any] = []
    stalled: list[grpc.Future] = []

    def never_sends() -> Iterator[bytes]:
        release.wait(60)
        return
        yield b""

    try:
        for channel in hostile:
            grpc.channel_ready_future(channel).result(timeout=10)
        for i in range(HOSTILE_STREAMS):
            channel = hostile[i % len(hostile)]
            watches.append(health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), timeout=60))  # type: ignore[attr-defined]
            # A call that starts and never sends its request.
            call = channel.stream_unary(WHO_AM_I, request_serializer=bytes, response_deserializer=bytes)
            stalled.append(call.future(never_sends(), timeout=60))
        time.sleep(1.0)  # every hostile call has reached the server

        assert auth.admin is not None
        with signed_channel(endpoint, auth.admin) as channel:
            started = time.monotonic()
            reply = auth_pb2_grpc.AuthServiceStub(channel).WhoAmI(auth_pb2.WhoAmIRequest(), timeout=10)
            elapsed = time.monotonic() - started
        assert reply.user.id == auth.admin_user_id
        assert elapsed < PROMPT_SECONDS, f"a signed call took {elapsed:.1f}s while anonymous calls were open"
        # Probes still get their answer.
        with grpc.insecure_channel(endpoint) as probe:
            status = health_pb2_grpc.HealthStub(probe).Check(health_pb2.HealthCheckRequest(), timeout=PROMPT_SECONDS)  # type: ignore[attr-defined]
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        # Watch is not served at all; the stalled calls were refused without being read.
        with pytest.raises(grpc.RpcError) as watch_error:
            next(watches[0])
        assert watch_error.value.code() == grpc.StatusCode.UNIMPLEMENTED
        error = stalled[0].exception(timeout=PROMPT_SECONDS)
        assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        release.set()
        for future in stalled:
            future.cancel()
        for watch in watches:
            watch.cancel()
        for channel in hostile:
            channel.close()


def test_an_oversized_request_is_refused_before_it_is_parsed(auth: Stack) -> None:
    # 5 MiB of resources: more than any Silt request needs, far less than the old 64 MiB cap.
    request = auth_pb2.AuthorizeManyRequest(user_id="admin", action="ReadRepo", resources=["r" * 1024] * 5 * 1024)
    with grpc.insecure_channel(auth.endpoints["auth"]) as channel:
        call = channel.unary_unary(
            AUTHORIZE_MANY,
            request_serializer=auth_pb2.AuthorizeManyRequest.SerializeToString,
            response_deserializer=auth_pb2.AuthorizeManyResponse.FromString,
        )
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            call(request, metadata=forged_metadata(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
    assert time.monotonic() - started < PROMPT_SECONDS
