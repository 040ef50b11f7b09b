"""Where a request came from, as policy conditions see it: gRPC peers and ASGI clients."""

from __future__ import annotations

import pytest

from silt.source_address import asgi_client_address, canonical, grpc_peer_address


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.2:51234", "127.0.0.2"),
        ("ipv6:[::1]:51234", "::1"),
        ("ipv6:[::ffff:127.0.0.2]:51234", "127.0.0.2"),
        ("ipv6:[2001:DB8::1]:443", "2001:db8::1"),
        ("ipv6:[fe80::1%eth0]:443", "fe80::1"),
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
