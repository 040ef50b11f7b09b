"""One shape for every child process a service starts to run work it does not trust (a DuckDB
preview, a Lua hook, an action file's YAML) or that must not hold its secrets (span export).

The server's side (`Child`): the child is `python -m <module> <server pid>`, started with a
minimal environment (`minimal_env`: no credentials, no `SILT_*` settings, nothing inherited but
locale, PATH and where the code is), no inherited descriptors but its stdin and stdout pipes,
and talks in frames over those pipes. The server never blocks on it: every read and write has a
deadline (non-blocking writes, polled reads), every frame from the child a size limit, and
`end()` kills it with SIGKILL whatever it is doing. The server makes itself non-dumpable before
it starts the first child (`protect_server`), so a child taken over cannot read the server's
environment or memory through /proc, nor ptrace it.

The child's side (`die_with`, `drop`, `limit`, `send`, `receive`): it dies with its server
(PR_SET_PDEATHSIG, and EOF on stdin), makes itself non-dumpable, sets no_new_privs, lowers its
priority, and after its trusted imports limits its address space (RLIMIT_AS), its CPU time
(RLIMIT_CPU) and core dumps.

Frames: one kind byte, a 4-byte big-endian length, the payload.

prctl (PR_SET_DUMPABLE, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS) is Linux only: elsewhere those
steps are skipped (`LINUX` says which), and the rlimits and the wall-clock kill still apply. The
child is started, and prctl called, the one way silt/child_process.py does it.
"""

from __future__ import annotations

import math
import os
import resource
import select
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

# prctl's steps are silt/child_process.py's, as are the pipes a child is started with; named
# here too, as this module's users know them.
from silt.child_process import LINUX as LINUX
from silt.child_process import is_dumpable as is_dumpable
from silt.child_process import prctl, set_not_dumpable, set_parent_death_signal, start_module

HEADER_BYTES = 5
MAX_HELLO_BYTES = 256
_CHUNK = 1024 * 1024
_PR_SET_NO_NEW_PRIVS = 38
# What a child may inherit of the server's environment: how to find programs and read text.
_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# Where `silt` and `services` are importable from: the child runs the server's code.
CODE_ROOT = str(Path(__file__).resolve().parents[2])


class Gone(Exception):
    """The other end closed its pipe, sent a frame it may not send, or broke the protocol."""


def protect_server() -> None:
    """Called by a server before it starts its first child; see the module docstring."""
    set_not_dumpable()


def minimal_env(extra: Mapping[str, str] | None = None, code_root: str | None = CODE_ROOT) -> dict[str, str]:
    """The environment a child starts with: locale, PATH, where the code is, one malloc arena
    (arenas are address space), and `extra`. Nothing else of the server's: no credentials, no
    `SILT_*` settings, no cloud or database variables."""
    env = {name: os.environ[name] for name in _KEPT if name in os.environ}
    env.update(MALLOC_ARENA_MAX="1", PYTHONDONTWRITEBYTECODE="1")
    if code_root:
        env["PYTHONPATH"] = code_root
    env.update(extra or {})
    return env


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


def read_exact(fd: int, size: int, deadline: float) -> bytes:
    parts: list[bytes] = []
    got = 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while got < size:
        left = deadline - time.monotonic()
        # Polled once even past the deadline: what already waits in the pipe is read (a spare
        # child's READY frame, sent long before the job that takes it).
        if not poller.poll(max(left, 0.0) * 1000):
            if left <= 0:
                raise TimeoutError
            continue
        chunk = os.read(fd, min(size - got, _CHUNK))
        if not chunk:
            raise Gone("the child process closed its output")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes, deadline: float) -> None:
    """Non-blocking writes, so that a child that stops reading cannot hold the caller."""
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if not poller.poll(left * 1000):
            continue
        try:
            view = view[os.write(fd, view[:_CHUNK]) :]
        except BlockingIOError:
            continue
        except BrokenPipeError:
            raise Gone("the child process closed its input") from None


class Child:
    """The server's end of one child: `python -m module <server pid>`, its pipes, its kill."""

    def __init__(self, module: str, start_seconds: float, env: Mapping[str, str] | None = None) -> None:
        self.proc = start_module(module, minimal_env() if env is None else env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self.start_by = time.monotonic() + start_seconds
        self.ready = False
        self.hello = b""

    def receive(self, deadline: float, limit: int) -> tuple[bytes, bytes]:
        """The next frame (kind, payload); TimeoutError past deadline, Gone past limit bytes."""
        header = read_exact(self._out, HEADER_BYTES, deadline)
        size = int.from_bytes(header[1:], "big")
        if size > limit:
            raise Gone(f"a frame of {size} bytes")
        return header[:1], read_exact(self._out, size, deadline)

    def send(self, kind: bytes, payload: bytes, deadline: float) -> None:
        write_all(self._in, frame(kind, payload), deadline)

    def wait_ready(self, ready: bytes) -> None:
        """The child's first frame, `ready`, by its start deadline; its payload (what the child
        says of itself, at most MAX_HELLO_BYTES) kept as `hello`."""
        if not self.ready:
            kind, self.hello = self.receive(self.start_by, MAX_HELLO_BYTES)
            if kind != ready:
                raise Gone("the child process did not start")
            self.ready = True

    def end(self) -> int | None:
        """Kill it (whatever it is doing) and reap it: its exit status, negative for a signal."""
        if self.proc.poll() is None:
            self.proc.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a process SIGKILL does not end is the kernel's
            return None


# --- the child's side ---------------------------------------------------------------------


def die_with(parent: int) -> None:
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above: nobody waits for us
        os._exit(0)


def drop(niceness: int) -> None:
    """What a child gives up before it reads a byte of a job: another child (the same user) may
    not read its memory or its /proc files (non-dumpable), no exec can raise its privileges
    (no_new_privs), and it yields the CPU to the server."""
    set_not_dumpable()
    prctl(_PR_SET_NO_NEW_PRIVS, 1)
    os.nice(niceness)


def address_space() -> int:
    """This process's address space now (VmSize), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


def limit(memory: int, cpu_seconds: int) -> None:
    """After the imports (trusted, and their size and time are the interpreter's, not the job's):
    at most `memory` bytes of address space beyond what the process holds now, `cpu_seconds` of
    CPU beyond what it used so far (SIGXCPU then, SIGKILL 5 s later), no core dump."""
    space = address_space() + memory
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(usage.ru_utime + usage.ru_stime) + cpu_seconds
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def send(out: BinaryIO, kind: bytes, payload: bytes = b"") -> None:
    out.write(frame(kind, payload))
    out.flush()


def receive(inp: BinaryIO) -> tuple[bytes, bytes]:
    """The server's next frame; exits when the server is gone or gave up on this child."""
    header = inp.read(HEADER_BYTES)
    if len(header) < HEADER_BYTES:
        raise SystemExit(0)
    payload = inp.read(int.from_bytes(header[1:], "big"))
    return header[:1], payload
