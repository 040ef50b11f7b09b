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
import logging
import os
import secrets
import socket
import tempfile
import time
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

# Below 20000: the test Cassandra nodes' ports are drawn from 20000-32000.
FREE_PORTS = range(10000, 20000)
_DRAWS = 100
# Longer than a service takes to start and bind (the launcher waits 60 s at most): a process that
# exits while its child starts may leave a child that binds the port after it.
RESERVATION_SECONDS = 120.0
# The lock is held for microseconds; a holder stopped (SIGSTOP, a debugger) must not stop others.
_LOCK_WAIT_SECONDS = 2.0
# The file's size: at most this many reservations are kept, those of ended processes and then the
# oldest left out first (two fifths of the range; a test leg is handed about 1,500 ports a run).
_MAX_RESERVATIONS = 4000
# Linux's largest pid_max.
_MAX_PID = 1 << 22

log = logging.getLogger(__name__)
_warned: set[str] = set()


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


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


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
        return True  # another user's process: alive, though not one of this file's writers
    return True


@dataclass(frozen=True)
class _Reservation:
    at: float  # when it was handed out (time.time())
    pid: int  # to which process
    alive: bool = True


def _read(path: Path, now: float) -> dict[str, _Reservation]:
    """The reservations still in force: recent, or held by a live process."""
    try:
        with path.open("rb") as file:
            loaded = json.loads(file.read(1 << 20) or b"{}")
    except (OSError, ValueError):
        return {}  # none yet, or a foreign file: start over rather than fail every launch
    if not isinstance(loaded, dict):
        return {}
    entries: dict[str, tuple[float, int]] = {}
    for port, entry in loaded.items():
        if not (isinstance(entry, list) and len(entry) == 2):
            continue
        at, pid = entry
        if isinstance(at, int | float) and type(pid) is int and 0 < pid <= _MAX_PID:
            entries[port] = (float(at), pid)
    living = {pid: _alive(pid) for pid in {pid for _, pid in entries.values()}}
    return {
        port: _Reservation(at, pid, living[pid])
        for port, (at, pid) in entries.items()
        if now - RESERVATION_SECONDS < at <= now + RESERVATION_SECONDS or living[pid]
    }


def _write(path: Path, reserved: dict[str, _Reservation]) -> None:
    """Replace the file whole (a reader, or a crash midway, never sees half of it)."""
    kept = sorted(reserved.items(), key=lambda item: (item[1].alive, item[1].at))[-_MAX_RESERVATIONS:]
    data = json.dumps({port: [entry.at, entry.pid] for port, entry in kept}).encode()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False  # taken, or left in TIME_WAIT by a server that just stopped
    return True


def _draw(host: str, reserved: Container[str]) -> int | None:
    for _ in range(_DRAWS):
        port = FREE_PORTS[secrets.randbelow(len(FREE_PORTS))]
        if str(port) not in reserved and _bindable(host, port):
            return port
    return None


_UNRECORDED = -1


def _reserved_draw(host: str) -> int | None:
    """A port drawn past the reservations and recorded as this process's; None when nothing in
    the range is free; _UNRECORDED when no record can be kept (no private directory, a stuck
    lock holder)."""
    try:
        path = reservations_path()
    except OSError:  # no usable temporary directory at all
        _warn_once("free ports: no temporary directory to record reservations in")
        return _UNRECORDED
    if not _private_dir(path.parent):
        _warn_once(f"free ports: {path.parent} is not a directory only this user can write; not recording")
        return _UNRECORDED
    try:
        lock_fd = os.open(path.with_name("lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return _UNRECORDED
    try:
        if not _lock(lock_fd):
            _warn_once("free ports: the reservations' lock is held too long; not recording")
            return _UNRECORDED
        now = time.time()
        reserved = _read(path, now)
        port = _draw(host, reserved)
        if port is not None:
            reserved[str(port)] = _Reservation(now, os.getpid())
            try:
                _write(path, reserved)
            except OSError:
                _warn_once(f"free ports: cannot write {path}; not recording")
        return port
    finally:
        os.close(lock_fd)  # releases the lock


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on or connects from now, and no other live process was given."""
    port = _reserved_draw(host)
    if port == _UNRECORDED:
        # A port free now is still far likelier to stay free than none.
        port = _draw(host, ())
    if port is not None:
        return port
    with socket.socket() as sock:  # the whole range busy: any port the kernel has
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
