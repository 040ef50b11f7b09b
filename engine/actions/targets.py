"""Where a webhook may be sent: the address policy webhook.py applies before it connects.

A webhook makes the server send a request wherever an action file says, and anyone who can write
to a repository can write an action file: the policy keeps those requests off what only the
server itself can reach and that must not be reachable through it (server-side request forgery).
Always refused, whatever the configuration: cloud metadata endpoints (by address, and by the
host names that name them), link-local, unspecified, multicast, broadcast and reserved
addresses, and IPv6 addresses that embed one of those (IPv4-mapped, IPv4-compatible, NAT64,
6to4). Loopback and private addresses are refused unless `allow_private` is on: a deployment
whose webhook receivers live on its own network opts in (lakeFS allows them always); off by
default, since otherwise anyone who can write an action file reaches what only the server's
network can. An address is judged as the address it is, however it was spelled: an IPv4-mapped
or -compatible IPv6 address as its IPv4 address, and a host such as `2130706433` or `0177.0.0.1`
as the address the resolver reads it as (webhook.py checks resolved addresses). `allowed_hosts`
/ `allowed_cidrs`, when either is set, let through only what they list; `denied_cidrs` refuse
more. Allow lists only ever narrow what is allowed: they never let through an address the rules
above refuse.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = ("http", "https")

# Names of metadata services that resolve (inside their cloud) to a refused address anyway;
# refused by name too, so that no lookup is made and the refusal says what was meant.
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.goog"})


def _table(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(cidr), reason) for cidr, reason in rows)


# First match names the reason, so the specific rows come before the ranges that contain them.
_ALWAYS_REFUSED = _table(
    ("169.254.169.254/32", "cloud metadata"),
    ("fd00:ec2::254/128", "cloud metadata"),
    ("100.100.100.200/32", "cloud metadata"),
    ("168.63.129.16/32", "cloud platform endpoint"),
    # Linux connects to 0.0.0.0 as if it were the local host.
    ("0.0.0.0/8", "unspecified"),
    ("::/128", "unspecified"),
    ("169.254.0.0/16", "link-local"),
    ("fe80::/10", "link-local"),
    ("224.0.0.0/4", "multicast"),
    ("ff00::/8", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
)

_PRIVATE = _table(
    ("127.0.0.0/8", "loopback"),
    ("::1/128", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "shared (carrier-grade NAT)"),
    ("198.18.0.0/15", "private (benchmarking)"),
    ("fc00::/7", "unique local"),
    ("fec0::/10", "site-local"),
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def normalize_host(name: str) -> str:
    """A host name as compared and sent: ASCII (IDNA), lower case, without the trailing dot.
    ValueError if it cannot be one."""
    name = name.rstrip(".")
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise ValueError(f"{name!r} is not a valid host name: {exc}") from None
    return name.lower()


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for or is routed to, if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _first(ip: IPAddress, table: Sequence[tuple[IPNetwork, str]]) -> str | None:
    for network, reason in table:
        if ip in network:
            return reason
    return None


def _networks(cidrs: Sequence[str], what: str) -> tuple[IPNetwork, ...]:
    try:
        return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in cidrs)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _host_patterns(hosts: Sequence[str]) -> tuple[str, ...]:
    patterns = []
    for host in hosts:
        wildcard = host.startswith("*.")
        name = normalize_host(host[2:] if wildcard else host)
        if not name or "*" in name:
            raise ValueError(f"allowed_hosts: {host!r} is not a host name or *.domain")
        patterns.append(("*." if wildcard else "") + name)
    return tuple(patterns)


@dataclass(frozen=True)
class WebhookPolicy:
    """Where webhooks may be sent (the module's docstring gives the rules)."""

    # Loopback, RFC 1918, carrier-grade NAT and IPv6 unique-local addresses: off unless opted in.
    allow_private: bool = False
    # Either set: only these host names ("*.example.com" for any subdomain) or addresses.
    allowed_hosts: Sequence[str] = ()
    allowed_cidrs: Sequence[str] = ()
    denied_cidrs: Sequence[str] = ()
    allowed_schemes: Sequence[str] = SCHEMES
    # PEM file of the CAs an https webhook's certificate may chain to; None: the system's.
    ca_certs: str | None = None
    _host_patterns: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _allowed_networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)
    _denied_networks: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        schemes = tuple(s.lower() for s in self.allowed_schemes)
        unknown = [s for s in schemes if s not in SCHEMES]
        if unknown:
            raise ValueError(f"allowed_schemes: {unknown!r}: webhooks are sent over http or https only")
        object.__setattr__(self, "allowed_schemes", schemes)
        object.__setattr__(self, "allowed_hosts", tuple(self.allowed_hosts))
        object.__setattr__(self, "allowed_cidrs", tuple(self.allowed_cidrs))
        object.__setattr__(self, "denied_cidrs", tuple(self.denied_cidrs))
        object.__setattr__(self, "_host_patterns", _host_patterns(self.allowed_hosts))
        object.__setattr__(self, "_allowed_networks", _networks(self.allowed_cidrs, "allowed_cidrs"))
        object.__setattr__(self, "_denied_networks", _networks(self.denied_cidrs, "denied_cidrs"))

    @property
    def restricted(self) -> bool:
        return bool(self._host_patterns or self._allowed_networks)

    def _listed(self, host: str) -> bool:
        return any(
            host.endswith(pattern[1:]) if pattern.startswith("*.") else host == pattern
            for pattern in self._host_patterns
        )

    def scheme_refusal(self, scheme: str) -> str | None:
        if scheme in self.allowed_schemes:
            return None
        return f"scheme {scheme} is not an allowed webhook scheme (allowed: {', '.join(self.allowed_schemes)})"

    def host_refusal(self, host: str) -> str | None:
        """Why host (normalized) is refused before it is even looked up, or None."""
        if host in METADATA_HOSTS:
            return f"host {host} is not an allowed webhook target (cloud metadata)"
        if self.restricted and not self._allowed_networks and not self._listed(host):
            return f"host {host} is not an allowed webhook target (not in allowed_hosts)"
        return None

    def address_refusal(self, host: str, addresses: Sequence[IPAddress]) -> str | None:
        """Why host, resolved to addresses, is refused, or None. Every address is checked:
        the request may go to any of them."""
        if not addresses:
            return f"host {host} resolved to no address"
        listed = self._listed(host)
        for ip in addresses:
            reason = self._refusal(ip, listed)
            if reason is not None:
                return f"address {ip} is not an allowed webhook target ({reason})"
        return None

    def _refusal(self, ip: IPAddress, host_listed: bool) -> str | None:
        # A socket connects to an IPv4-mapped address over IPv4: it is that IPv4 address.
        effective: IPAddress = ip
        embedded = None
        if isinstance(ip, ipaddress.IPv6Address):
            embedded = _embedded_ipv4(ip)
            if ip.ipv4_mapped is not None:
                effective = ip.ipv4_mapped
        for candidate in dict.fromkeys(a for a in (ip, effective, embedded) if a is not None):
            reason = _first(candidate, _ALWAYS_REFUSED)
            if reason is not None:
                return reason if candidate == ip else f"{reason}: {candidate}"
            for network in self._denied_networks:
                if candidate in network:
                    return f"in denied_cidrs {network}"
            private = _first(candidate, _PRIVATE)
            if private is not None and not self.allow_private:
                return f"{private} address, and allow_private is off"
        if self.restricted and not host_listed and not any(effective in n for n in self._allowed_networks):
            return "not in allowed_hosts or allowed_cidrs"
        return None
