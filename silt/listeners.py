"""Which process listens on a TCP port (Linux's /proc), so that a launcher waiting for its service
does not take another process's listener for it.

A launcher chooses a free port, then starts the service on it; in between, any other process may
be given that port (an ephemeral port of a server bound to port 0, say). Reaching the port then
proves nothing: the service must own the listening socket, itself or through a child (the edge
process's supervisor binds it and its workers inherit it).
"""

from __future__ import annotations

import os
from pathlib import Path

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's state column
_PROC = Path("/proc")


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    found: set[str] = set()
    fd_dir = _PROC / str(pid) / "fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def _children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        tasks = os.listdir(_PROC / str(pid) / "task")
    except OSError:
        return children
    for task in tasks:
        try:
            children += [int(c) for c in (_PROC / str(pid) / "task" / task / "children").read_text().split()]
        except OSError:
            continue
    return children


def owns_listener(pid: int, port: int) -> bool | None:
    """Whether pid, or a descendant of it, holds a socket listening on port; None where /proc
    cannot tell (not Linux, or not allowed to look)."""
    if not (_PROC / "net" / "tcp").exists():
        return None
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    pending, seen = [pid], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            if _socket_inodes(current) & inodes:
                return True
        except PermissionError:
            return None
        except OSError:
            continue  # the process ended meanwhile
        pending += _children(current)
    return False
