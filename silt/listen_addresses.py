"""Listen addresses and the addresses that dial them, without pydantic (the `silt` CLI reads
them at every start; silt/config.py re-exports them)."""

from __future__ import annotations

# Hosts that mean "every interface of this machine": fine to listen on, meaningless to dial.
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")


def dialable_host(host: str) -> str:
    """The host a process on this machine dials for a service listening on host: loopback for
    a wildcard (every interface), else host itself."""
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


def dialable_address(listen_address: str) -> str:
    """Where a process on this machine reaches a service listening on listen_address.

    Only valid on the same machine (the local launcher, a single-host install): in a cluster,
    clients dial the *.endpoint keys, which name a Service, never a listen address."""
    host, _, port = listen_address.rpartition(":")
    return f"{dialable_host(host)}:{port}"
