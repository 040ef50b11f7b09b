"""Anonymous clients cannot stall or exhaust the gateway.

A real gateway process with small limits; raw sockets play the attacker, boto3 the
legitimate client that must keep being served.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest
from botocore.awsrequest import AWSRequest

from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.wait import wait_until

HEAD_TIMEOUT_S = 1.5
MAX_CONNECTIONS = 24
BODY_IDLE_S = 1.5


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    limits = {
        "header_timeout_seconds": HEAD_TIMEOUT_S,
        "max_connections": MAX_CONNECTIONS,
        "body_idle_timeout_seconds": BODY_IDLE_S,
    }
    with gateway_stack(tmp_path_factory.mktemp("limits"), overrides={"gateways": {"s3": limits}}) as stack:
        yield stack


def connect(gw: GatewayStack) -> socket.socket:
    url = urlsplit(gw.endpoint)
    return socket.create_connection((url.hostname, url.port), timeout=30)


def _served(gw: GatewayStack) -> bool:
    """A new connection gets an answer other than the cap's 503."""
    with connect(gw) as sock:
        sock.sendall(b"GET /_silt/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return read_answer(sock).startswith(b"HTTP/1.1 200")


def read_answer(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return received


def code_of(answer: bytes) -> str:
    body = answer.partition(b"\r\n\r\n")[2]
    return ElementTree.fromstring(body).findtext("Code") or ""


def test_a_huge_header_is_refused_before_it_is_buffered(gw: GatewayStack) -> None:
    client = gw.client()
    client.create_bucket(Bucket="huge-header")
    with connect(gw) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent, piece = 0, b"a" * 65536
        started = time.monotonic()
        try:
            while sent < 128 * 1024 * 1024:  # the attack: a 128 MiB header value
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert code_of(answer) == "RequestHeaderSectionTooLarge"
    assert sent < 16 * 1024 * 1024  # refused long before the client could send it all
    assert time.monotonic() - started < 10
    # Legitimate clients were never held up.
    assert client.list_objects_v2(Bucket="huge-header", Prefix="main/")["KeyCount"] == 0


def test_one_long_header_line_is_refused(gw: GatewayStack) -> None:
    with connect(gw) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"b" * 9000 + b"\r\n\r\n")
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 400") and code_of(answer) == "RequestHeaderSectionTooLarge"


def test_a_connection_that_sends_nothing_is_closed(gw: GatewayStack) -> None:
    with connect(gw) as sock:
        started = time.monotonic()
        answer = read_answer(sock)
        waited = time.monotonic() - started
    assert code_of(answer) == "RequestTimeout"
    assert HEAD_TIMEOUT_S * 0.8 <= waited < HEAD_TIMEOUT_S + 5


def test_a_head_sent_too_slowly_is_closed(gw: GatewayStack) -> None:
    with connect(gw) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        answer = read_answer(sock)
    assert code_of(answer) == "RequestTimeout"
    assert time.monotonic() - started < HEAD_TIMEOUT_S + 5


def test_connections_beyond_the_cap_are_refused_and_the_rest_keep_working(gw: GatewayStack) -> None:
    client = gw.client()
    client.create_bucket(Bucket="capped")
    with ExitStack() as held:
        # The attacker holds the cap's worth of connections open (sending headers slowly).
        idle = [held.enter_context(connect(gw)) for _ in range(MAX_CONNECTIONS + 4)]
        answered: dict[int, bytes] = {}
        for sock in idle:
            sock.setblocking(False)

        def refused() -> int:
            for i, sock in enumerate(idle):
                if i not in answered:
                    with contextlib.suppress(BlockingIOError):
                        answered[i] = sock.recv(65536)
            return sum(b"503" in data.split(b"\r\n", 1)[0] for data in answered.values())

        wait_until(lambda: refused() >= 4, 10, "503 for the connections beyond the cap")
    # Once the attacker's connections are gone (the gateway has seen them close), service is back.
    wait_until(lambda: _served(gw), 10, "the gateway under its cap again")
    client.put_object(Bucket="capped", Key="main/k", Body=b"v")
    assert client.get_object(Bucket="capped", Key="main/k")["Body"].read() == b"v"


def test_a_huge_header_on_a_kept_alive_connection_is_refused_too(gw: GatewayStack) -> None:
    with connect(gw) as sock:
        sock.sendall(b"GET /_silt/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first[:100]
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 64 * 1024 * 1024:
                sock.sendall(b"a" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_answer(sock)
    assert code_of(answer) == "RequestHeaderSectionTooLarge"
    assert sent < 16 * 1024 * 1024


def test_a_body_that_stops_arriving_times_out_and_stores_nothing(gw: GatewayStack) -> None:
    client = gw.client()
    client.create_bucket(Bucket="stalled")
    # A signed PUT that promises 1,000 bytes and sends 10.
    signer = client._request_signer  # botocore's own signer, to sign a hand-made request
    aws = AWSRequest(
        method="PUT",
        url=f"{gw.endpoint}/stalled/main/k",
        headers={"Content-Length": "1000", "x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
    )
    signer.sign("PutObject", aws)
    head = "".join(f"{k}: {v}\r\n" for k, v in aws.headers.items())
    with connect(gw) as sock:
        host = urlsplit(gw.endpoint).netloc
        sock.sendall(f"PUT /stalled/main/k HTTP/1.1\r\nHost: {host}\r\n{head}\r\n".encode() + b"x" * 10)
        started = time.monotonic()
        answer = read_answer(sock)
    assert code_of(answer) == "RequestTimeout", answer[:300]
    assert time.monotonic() - started < BODY_IDLE_S + 5
    assert client.list_objects_v2(Bucket="stalled", Prefix="main/")["KeyCount"] == 0


def test_every_gateway_worker_applies_the_bounds(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With several workers each one refuses long heads and closes silent connections."""
    limits = {"header_timeout_seconds": HEAD_TIMEOUT_S, "max_connections": MAX_CONNECTIONS}
    overrides = {"gateways": {"s3": limits}}
    with gateway_stack(tmp_path_factory.mktemp("limits-workers"), workers=2, overrides=overrides) as stack:
        # Connections are spread over the workers by the kernel: enough of them reach both.
        for _ in range(6):
            with connect(stack) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"b" * 9000 + b"\r\n\r\n")
                answer = read_answer(sock)
            assert answer.startswith(b"HTTP/1.1 400") and code_of(answer) == "RequestHeaderSectionTooLarge"
        silent = [connect(stack) for _ in range(4)]
        try:
            started = time.monotonic()
            answers = [read_answer(sock) for sock in silent]
        finally:
            for sock in silent:
                sock.close()
        assert [code_of(answer) for answer in answers] == ["RequestTimeout"] * 4
        assert time.monotonic() - started < HEAD_TIMEOUT_S + 5
