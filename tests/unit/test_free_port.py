"""silt.launcher.free_port: a port for a server to bind soon after, out of the way of the ports
the kernel gives outgoing connections."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from silt import launcher


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_free_ports_are_bindable_and_below_the_ephemeral_range() -> None:
    ports = {launcher.free_port() for _ in range(20)}
    assert len(ports) > 1  # drawn, not the same one each time
    for port in ports:
        assert port in launcher._FREE_PORTS and port < _ephemeral_low()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        # The range is that one port: nothing free in it, so the kernel's answer.
        monkeypatch.setattr(launcher, "_FREE_PORTS", range(taken, taken + 1))
        assert launcher.free_port() != taken
