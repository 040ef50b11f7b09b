"""Ports for servers to bind soon after: free now, out of the kernel's way, and promised to
one process at a time across every process of this user on the machine.

A launcher picks a port, then starts the service that binds it seconds later, and may restart
it there later on. Meanwhile two things could take it. The kernel, for an outgoing connection's
port or a bind(0), which is why ports are drawn below its ephemeral range (32768-60999 by
default). And another process picking ports the same way (the other test leg, a benchmark),
which may draw the same port while it is not yet bound, or while its service is down between a
kill and a restart. So every port handed out is written to a file of this user's, with the time
and the process it went to, that every free_port reads under a lock: no other process gets the
port while that one lives, nor for RESERVATION_SECONDS after it was handed out.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import tempfile
import time
from pathlib import Path

# Below 20000: the test Cassandra nodes' ports are drawn from 20000-32000.
FREE_PORTS = range(10000, 20000)
_DRAWS = 100
# Longer than a service takes to start and bind (the launcher waits 60 s at most): a process that
# exits while its child starts may leave a child that binds the port after it.
RESERVATION_SECONDS = 120.0
# The lock is held for microseconds; a holder stopped (SIGSTOP, a debugger) must not stop others.
_LOCK_WAIT_SECONDS = 2.0
# The file's size: the newest reservations are kept, at most this many (two fifths of the range;
# a test leg is handed about 1,500 ports in a run).
_MAX_RESERVATIONS = 4000


def reservations_path() -> Path:
    """This user's reservations, in a directory only they can write."""
    return Path(tempfile.gettempdir()) / f"silt-ports-{os.getuid()}" / "reserved.json"


def _private_dir(path: Path) -> bool:
    """Whether path is a directory of this user's that no one else can write (made if missing)."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError:
        return False
    return path.is_dir() and not path.is_symlink() and info.st_uid == os.getuid() and info.st_mode & 0o022 == 0


def _lock(fd: int) -> bool:
    deadline = time.monotonic() + _LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


Reservations = dict[str, tuple[float, int]]  # port -> (when it was handed out, to which process)


def _read(fd: int, now: float) -> Reservations:
    """The reservations still in force: recent, or held by a live process."""
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 1 << 20)
    try:
        loaded = json.loads(raw) if raw else {}
    except ValueError:
        return {}  # a torn or foreign file: start over rather than fail every launch
    if not isinstance(loaded, dict):
        return {}
    entries: Reservations = {}
    for port, entry in loaded.items():
        if (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], int | float)
            and isinstance(entry[1], int)
        ):
            entries[port] = (float(entry[0]), entry[1])
    living = {pid: _alive(pid) for pid in {pid for _, pid in entries.values()}}
    return {
        port: (at, pid)
        for port, (at, pid) in entries.items()
        if now - RESERVATION_SECONDS < at <= now + RESERVATION_SECONDS or living[pid]
    }


def _write(fd: int, reserved: Reservations) -> None:
    kept = dict(sorted(reserved.items(), key=lambda item: item[1][0])[-_MAX_RESERVATIONS:])
    data = json.dumps({port: list(entry) for port, entry in kept.items()}).encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False  # taken, or left in TIME_WAIT by a server that just stopped
    return True


def _draw(host: str, reserved: Reservations) -> int | None:
    for _ in range(_DRAWS):
        port = FREE_PORTS[secrets.randbelow(len(FREE_PORTS))]
        if str(port) not in reserved and _bindable(host, port):
            return port
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on or connects from now, and no other live process was given."""
    path = reservations_path()
    fd = -1
    if _private_dir(path.parent):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            fd = -1
    try:
        if fd >= 0 and _lock(fd):
            now = time.time()
            reserved = _read(fd, now)
            port = _draw(host, reserved)
            if port is not None:
                reserved[str(port)] = (now, os.getpid())
                _write(fd, reserved)
                return port
        else:
            # No shared record to consult (an unwritable temp dir, a stuck holder): a port free
            # now is still far likelier to stay free than none.
            port = _draw(host, {})
            if port is not None:
                return port
    finally:
        if fd >= 0:
            os.close(fd)  # releases the lock
    with socket.socket() as sock:  # the whole range busy: any port the kernel has
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
