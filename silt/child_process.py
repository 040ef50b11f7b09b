"""How Silt starts a child process, one way for each kind, so none forgets a protection:

* ``spawn_pool``: a pool of Python workers (a commit's build, an import's ingestion) started with
  ``spawn`` (a forked gRPC server process is not safe to use in the child), each of which dies
  with this process (silt/lifeline.py) and is made non-dumpable before its own initializer runs
  (it holds the service's store credentials; exec made it dumpable again);
* ``start_module``: ``python -m <module> <this pid>`` talking over pipes on its stdin and stdout,
  with only the environment it is given (sandboxed jobs, silt/sandbox/process.py; the span
  exporter, silt/telemetry/export_process.py). The child ties its life to this pid itself.

And the prctl(2) steps those children (and servers before them) take: non-dumpable
(``set_not_dumpable``) and the parent-death signal (``set_parent_death_signal``). prctl is Linux
only: elsewhere those steps are skipped (``LINUX`` says which).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from silt.lifeline import die_with_parent

LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4


# Looked up once, here: set_parent_death_signal may run in a forked child before its exec
# (a preexec_fn), where loading a library could wait forever on a lock another thread held.
try:
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl if LINUX else None
except (OSError, AttributeError):
    _PRCTL = None


def prctl(option: int, value: int) -> None:
    """prctl(2) through libc; a no-op where it does not exist (not Linux)."""
    if _PRCTL is None:
        return
    if _PRCTL(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def set_not_dumpable() -> None:
    """This process's /proc/<pid>/environ, mem, maps and fd then belong to root, and no process
    of the same user may ptrace it. Costs core dumps and same-user debugger attach."""
    prctl(_PR_SET_DUMPABLE, 0)


def is_dumpable() -> bool:
    """Whether this process is dumpable (always True where prctl does not exist)."""
    if _PRCTL is None:
        return True
    return bool(_PRCTL(_PR_GET_DUMPABLE, 0, 0, 0, 0))


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send sig to this process when its parent (thread) exits: the right tool
    just before an exec, where no watch thread of ours survives (silt/lifeline.py otherwise)."""
    prctl(_PR_SET_PDEATHSIG, int(sig))


def _start_worker(parent_pid: int, initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
    # A worker blocked on the call queue never notices its parent's death by itself: without
    # this, every kill -9 of the service left its workers (and, through them, multiprocessing's
    # resource tracker) running with PPID 1.
    die_with_parent(parent_pid)
    # It holds the service's store credentials: its memory and environment are root's, as the
    # service's own are (exec made it dumpable again).
    set_not_dumpable()
    initializer(*initargs)


def spawn_pool(workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...] = ()) -> ProcessPoolExecutor:
    """A pool of `workers` spawned workers that die with this process, are not dumpable, and then
    run initializer(*initargs) (a module-level function: it is pickled to each worker, and so
    are its arguments)."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(), initializer, initargs),
    )


def start_module(module: str, env: Mapping[str, str], *, new_session: bool = False) -> subprocess.Popen[bytes]:
    """``python -m module <this pid>`` with pipes to its stdin and stdout, `env` its whole
    environment and no other inherited descriptor. new_session: in a session of its own, so that
    a terminal's Ctrl-C reaches this process only (which then ends the child its own way)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(env),
        close_fds=True,
        start_new_session=new_session,
    )
    assert proc.stdin is not None and proc.stdout is not None
    return proc
