"""Where a request came from, as policy conditions see it: gRPC peers, ASGI clients, and the
client a trusted proxy names, on a dual-stack listener too."""

from __future__ import annotations

import asyncio
import http.client
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from edge.core.http_server import http_settings
from silt.config import _check_trusted_proxies
from silt.source_address import asgi_client_address, canonical, grpc_peer_address, with_mapped_forms
from tests.support.wait import wait_until


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.2:51234", "127.0.0.2"),
        ("ipv6:[::1]:51234", "::1"),
        ("ipv6:[::ffff:127.0.0.2]:51234", "127.0.0.2"),
        ("ipv6:[2001:DB8::1]:443", "2001:db8::1"),
        ("ipv6:[fe80::1%eth0]:443", "fe80::1"),
        # grpc 1.85 percent-encodes the brackets (and a zone's "%").
        ("ipv6:%5B::1%5D:48588", "::1"),
        ("ipv6:%5B::ffff:127.0.0.2%5D:48588", "127.0.0.2"),
        ("ipv6:%5Bfe80::1%25eth0%5D:443", "fe80::1"),
        ("unix:/tmp/silt.sock", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_grpc_peers(peer: str | None, address: str) -> None:
    assert grpc_peer_address(peer) == address


@pytest.mark.parametrize(
    ("scope", "address"),
    [
        ({"client": ("127.0.0.3", 40000)}, "127.0.0.3"),
        ({"client": ["::1", 40000]}, "::1"),
        ({"client": None}, ""),
        ({}, ""),
        # What a trusted proxy named that is no address (uvicorn passes it on): unknown.
        ({"client": ("somewhere", 0)}, ""),
    ],
)
def test_asgi_clients(scope: dict[str, object], address: str) -> None:
    assert asgi_client_address(scope) == address


def test_canonical_forms() -> None:
    assert canonical("2001:0db8:0000::0001") == "2001:db8::1"
    assert canonical("x" * 100) == ""


def test_ipv4_blocks_are_trusted_in_their_mapped_form_too() -> None:
    assert with_mapped_forms(["10.0.0.5/32", "10.0.0.0/8", "2001:db8::/32"]) == [
        "10.0.0.5/32",
        "10.0.0.0/8",
        "2001:db8::/32",
        "::ffff:a00:5/128",
        "::ffff:a00:0/104",
    ]


def _client_seen(trusted: list[str], peer: str, forwarded_for: str) -> str:
    """The client address the app reads when peer sends X-Forwarded-For: forwarded_for, through
    the app uvicorn builds with the edge's settings (its proxy-headers middleware included)."""
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["client"] = scope["client"]

    config = uvicorn.Config(app, **http_settings("[::]:0", _check_trusted_proxies(trusted)))
    config.load()
    scope = {"type": "http", "client": (peer, 4444), "headers": [(b"x-forwarded-for", forwarded_for.encode())]}
    asyncio.run(config.loaded_app(scope, None, None))
    return asgi_client_address(seen)


@pytest.mark.parametrize("peer", ["10.0.0.5", "::ffff:10.0.0.5"])
def test_a_trusted_ipv4_proxy_is_believed_on_a_dual_stack_listener(peer: str) -> None:
    # A dual-stack listener ("[::]") sees an IPv4 proxy as ::ffff:10.0.0.5.
    assert _client_seen(["10.0.0.5"], peer, "203.0.113.9") == "203.0.113.9"
    assert _client_seen(["10.0.0.0/24"], peer, "203.0.113.9, ::ffff:10.0.0.7") == "203.0.113.9"


@pytest.mark.parametrize("peer", ["10.0.0.6", "::ffff:10.0.0.6"])
def test_another_peer_is_judged_by_its_own_address(peer: str) -> None:
    assert _client_seen(["10.0.0.5"], peer, "203.0.113.9") == "10.0.0.6"


async def _echo_client(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers the scope's client as uvicorn left it, and the address policy conditions see."""
    if scope["type"] != "http":
        return
    body = f"{scope['client'][0]} {asgi_client_address(scope)}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def dual_stack_edge() -> Iterator[int]:
    """uvicorn with the edge's settings, trusting 127.0.0.3, on a "[::]" socket bound as uvicorn
    binds it for several workers (dual-stack: IPv4 peers arrive as ::ffff:a.b.c.d); its port."""
    config = uvicorn.Config(_echo_client, **http_settings("[::]:0", _check_trusted_proxies(["127.0.0.3"])))
    sock = config.bind_socket()
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30.0, "uvicorn to start")
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30.0)
        sock.close()


def _ask(port: int, source: str, forwarded_for: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        connection.request("GET", "/", headers={"X-Forwarded-For": forwarded_for})
        return connection.getresponse().read().decode()
    finally:
        connection.close()


def test_a_trusted_ipv4_proxy_reaching_a_dual_stack_listener_names_the_client(dual_stack_edge: int) -> None:
    # Another peer's X-Forwarded-For is ignored, and the peer shows the listener is dual-stack.
    assert _ask(dual_stack_edge, "127.0.0.2", "203.0.113.9") == "::ffff:127.0.0.2 127.0.0.2"
    assert _ask(dual_stack_edge, "127.0.0.3", "203.0.113.9") == "203.0.113.9 203.0.113.9"
