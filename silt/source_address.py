"""The address a request came from, as policy conditions see it (silt/policy_conditions.py).

It travels between services as text: an IPv4 or IPv6 address in its canonical form, or "" when
unknown. Unknown is an answer, not an error: a statement with a condition treats it as failing
closed (docs/security.md, "Policy conditions"). An IPv4-mapped IPv6 address (a dual-stack
socket's view of an IPv4 client) is its IPv4 address, and an IPv6 zone is dropped, so that
`127.0.0.2` in a policy matches however the client reached the listener.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Longer than any address written as text (an IPv6 address with an IPv4 tail and a zone).
MAX_ADDRESS_LENGTH = 64
UNKNOWN = ""


def parse_address(text: str) -> IPAddress | None:
    """The address text names, or None for anything else (empty, a host name, a Unix socket)."""
    if not text or len(text) > MAX_ADDRESS_LENGTH:
        return None
    host = text.strip().strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def canonical(text: str) -> str:
    """text as the canonical form of its address, UNKNOWN ("") when it names none."""
    address = parse_address(text)
    return UNKNOWN if address is None else str(address)


def grpc_peer_address(peer: str | None) -> str:
    """The address of a gRPC peer (``context.peer()``: `ipv4:10.0.0.5:51234`,
    `ipv6:[::1]:51234`, `unix:/path`), without its port; UNKNOWN for anything but an IP peer.
    gRPC percent-encodes the URI it writes (`ipv6:%5B::1%5D:51234` since 1.6x), so the text is
    decoded before the port is split off."""
    kind, _, rest = (peer or "").partition(":")
    if kind not in ("ipv4", "ipv6"):
        return UNKNOWN
    if not rest.startswith("["):
        rest = unquote(rest)
    host = rest.rpartition(":")[0] or rest
    return canonical(host)


def asgi_client_address(scope: Mapping[str, Any]) -> str:
    """The address of an HTTP request's client, from an ASGI scope's `client`: the TCP peer, or
    the client a trusted proxy named (uvicorn resolves X-Forwarded-For against
    `gateways.trusted_proxies` before the app sees the scope: edge/core/http_server.py)."""
    client = scope.get("client")
    if not isinstance(client, tuple | list) or not client:
        return UNKNOWN
    host = client[0]
    return canonical(host) if isinstance(host, str) else UNKNOWN


def with_mapped_forms(blocks: Iterable[str]) -> list[str]:
    """blocks (canonical CIDR blocks) followed by the IPv4-mapped IPv6 form of each IPv4 block
    (`10.0.0.0/8` adds `::ffff:10.0.0.0/104`).

    A dual-stack listener (`[::]`) sees an IPv4 peer as `::ffff:a.b.c.d`, and uvicorn compares
    that text with the trusted blocks as it is: without the mapped form an IPv4 proxy reaching
    such a listener would not be trusted, its X-Forwarded-For ignored, and every client judged
    by the proxy's address."""
    listed = list(blocks)
    mapped = []
    for block in listed:
        network = ipaddress.ip_network(block, strict=False)
        if isinstance(network, ipaddress.IPv4Network):
            mapped.append(f"::ffff:{network.network_address}/{96 + network.prefixlen}")
    return listed + [str(ipaddress.ip_network(block)) for block in mapped]
