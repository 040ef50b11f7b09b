"""Server limits (silt/rpc/limits.py) on a real gRPC server: a call whose request never comes
is cancelled after the receive timeout, so stalled callers cannot keep the workers; calls past
max_concurrent_rpcs are refused at once instead of queueing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.wrappers_pb2 import StringValue

from silt.rpc.limits import ServerLimits
from silt.rpc.server import bind, build_server

ECHO = "/test.Limits/Echo"


class Running:
    def __init__(self, limits: ServerLimits) -> None:
        self.server = build_server(limits=limits)

        def echo(request: StringValue, context: Any) -> StringValue:
            return request

        handler = grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=StringValue.FromString, response_serializer=StringValue.SerializeToString
        )
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Limits", {"Echo": handler})])
        self.address = f"127.0.0.1:{bind(self.server, '127.0.0.1:0')}"
        self.server.start()
        self.release = threading.Event()
        self.channels: list[grpc.Channel] = []

    def channel(self) -> grpc.Channel:
        channel = grpc.insecure_channel(self.address)
        self.channels.append(channel)
        return channel

    def stall(self, count: int) -> list[Any]:
        """Calls that start and never send their request (until released)."""

        def never_sends() -> Iterator[StringValue]:
            self.release.wait(30)
            return
            yield StringValue()

        channel = self.channel()
        grpc.channel_ready_future(channel).result(timeout=5)
        calls: list[Any] = []
        for _ in range(count):
            call = channel.stream_unary(
                ECHO, request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
            )
            calls.append(call.future(never_sends(), timeout=30))
        time.sleep(0.3)  # they have reached the server
        return calls

    def echo(self, value: str, timeout: float) -> str:
        call = self.channel().unary_unary(
            ECHO, request_serializer=StringValue.SerializeToString, response_deserializer=StringValue.FromString
        )
        return str(call(StringValue(value=value), timeout=timeout).value)

    def close(self) -> None:
        self.release.set()
        for channel in self.channels:
            channel.close()
        self.server.stop(None)


@pytest.fixture
def running(request: pytest.FixtureRequest) -> Iterator[Running]:
    server = Running(request.param)
    yield server
    server.close()


@pytest.mark.parametrize(
    "running", [ServerLimits(max_workers=2, max_concurrent_rpcs=16, receive_timeout_seconds=0.5)], indirect=True
)
def test_a_call_whose_request_never_comes_is_cancelled_and_frees_its_worker(running: Running) -> None:
    stalled = running.stall(4)  # twice the workers
    started = time.monotonic()
    assert running.echo("hello", timeout=5) == "hello"
    assert time.monotonic() - started < 3.0
    for call in stalled:
        error = call.exception(timeout=5)
        assert isinstance(error, grpc.RpcError) and error.code() == grpc.StatusCode.CANCELLED


@pytest.mark.parametrize(
    "running", [ServerLimits(max_workers=2, max_concurrent_rpcs=3, receive_timeout_seconds=20)], indirect=True
)
def test_calls_past_the_concurrency_limit_are_refused_at_once(running: Running) -> None:
    stalled = running.stall(3)  # kept: a call whose future is collected is cancelled
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as refused:
        running.echo("one too many", timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not any(call.done() for call in stalled)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize("running", [ServerLimits()], indirect=True)
def test_requests_arriving_normally_are_served(running: Running) -> None:
    assert [running.echo(str(i), timeout=5) for i in range(20)] == [str(i) for i in range(20)]
