"""Anonymous clients cannot stall or exhaust the gateway.

A real gateway process with small limits; raw sockets play the attacker, boto3 the
legitimate client that must keep being served.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any
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


def read_one_answer(sock: socket.socket) -> bytes:
    """One whole answer on a connection that stays open: its head, then Content-Length bytes of
    body (the two may arrive in separate reads)."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole head: {received[:200]!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"closed inside the body: {received[:200]!r}"
        body += chunk
    return head + b"\r\n\r\n" + body


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
        first = read_one_answer(sock)
        assert first.startswith(b"HTTP/1.1 200"), first[:100]
        assert first.endswith(b'{"status":"live"}'), first
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


# --- one client address must not hold every connection ------------------------------------

CROWD = 1000  # the attacker's idle connections, from 127.0.0.2
CROWD_MAX_CONNECTIONS = 1000  # as many as the crowd: without a cap per client it takes them all
PER_CLIENT = 100
IDLE_S = 4.0
LATENCY_BOUND_S = 2.0  # a request that waits for nothing answers in milliseconds
_EOF = b"\0eof"  # appended to what a connection received once the gateway closed it


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    limits = {
        "max_connections": CROWD_MAX_CONNECTIONS,
        "max_connections_per_client": PER_CLIENT,
        "idle_timeout_seconds": IDLE_S,
    }
    with gateway_stack(tmp_path_factory.mktemp("crowded"), overrides={"gateways": {"s3": limits}}) as stack:
        yield stack


def connect_from(gw: GatewayStack, source: str) -> socket.socket:
    url = urlsplit(gw.endpoint)
    return socket.create_connection((url.hostname, url.port), timeout=30, source_address=(source, 0))


def collect(socks: list[socket.socket], answers: dict[int, bytes], done: Callable[[], bool], timeout: float) -> None:
    """Read what arrives on socks into answers (by index) until done() holds; fails after timeout."""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for i, sock in enumerate(socks):
            if not answers.get(i, b"").endswith(_EOF):
                selector.register(sock, selectors.EVENT_READ, i)
        while not done():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{len(answers)} of {len(socks)} connections closed by the gateway"
            for key, _ in selector.select(remaining):
                sock = socks[key.data]
                received = answers.get(key.data, b"")
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if chunk:
                    answers[key.data] = received + chunk  # not closed yet: read on until EOF
                    continue
                answers[key.data] = received + _EOF
                selector.unregister(sock)


def closed(answers: dict[int, bytes]) -> list[bytes]:
    return [data[: -len(_EOF)] for data in answers.values() if data.endswith(_EOF)]


def _timed_list(client: Any, bucket: str) -> float:
    started = time.monotonic()
    assert client.list_objects_v2(Bucket=bucket, Prefix="main/")["KeyCount"] == 1
    return time.monotonic() - started


def test_one_address_holding_many_connections_does_not_shut_out_another(crowded: GatewayStack) -> None:
    crowded.client().create_bucket(Bucket="crowded")
    crowded.client().put_object(Bucket="crowded", Key="main/k", Body=b"v")
    baseline = min(_timed_list(crowded.client(), "crowded") for _ in range(3))  # a new connection each
    with ExitStack() as held:
        opened = time.monotonic()
        crowd = [held.enter_context(connect_from(crowded, "127.0.0.2")) for _ in range(CROWD)]
        answers: dict[int, bytes] = {}
        # Past the cap the gateway answers 503 SlowDown and closes, at once, not at the idle timeout.
        collect(crowd, answers, lambda: len(closed(answers)) >= CROWD - PER_CLIENT, timeout=IDLE_S * 0.75)
        refused = closed(answers)
        assert len(refused) == CROWD - PER_CLIENT
        assert all(data.startswith(b"HTTP/1.1 503") and code_of(data) == "SlowDown" for data in refused)
        # Another address is served while the crowd holds its share, without waiting.
        during = _timed_list(crowded.client(), "crowded")
        assert during < LATENCY_BOUND_S, (baseline, during)
        # The crowd's address gets no more, even as its held connections stay silent.
        with connect_from(crowded, "127.0.0.2") as extra:
            assert code_of(read_answer(extra)) == "SlowDown"
        # The held ones are closed once idle for the timeout, without an answer to a request never sent.
        collect(crowd, answers, lambda: len(closed(answers)) == CROWD, timeout=IDLE_S + 10)
        assert time.monotonic() - opened >= IDLE_S * 0.8
        assert closed(answers).count(b"") == PER_CLIENT
    # Its connections gone, the crowd's address is served again.
    with connect_from(crowded, "127.0.0.2") as sock:
        sock.sendall(b"GET /_silt/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")


def test_a_kept_alive_connection_is_closed_once_idle(crowded: GatewayStack) -> None:
    with connect_from(crowded, "127.0.0.1") as sock:
        sock.sendall(b"GET /_silt/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        # Whole: one recv may return the head alone, and the body would count as more data.
        first = read_one_answer(sock)
        assert first.startswith(b"HTTP/1.1 200"), first[:100]
        answered = time.monotonic()
        rest = read_answer(sock)  # until the gateway closes the idle connection
        waited = time.monotonic() - answered
    assert rest == b""
    assert IDLE_S * 0.8 <= waited < IDLE_S + 5
