"""Tie a child process's life to its parent's: when the parent dies, even by SIGKILL, the
child exits too instead of living on with PPID 1.

A watch thread in the child waits on a pidfd of the parent (polls getppid where pidfds are
missing) and exits the process the moment the parent is gone. PR_SET_PDEATHSIG alone is not
enough: it fires when the *thread* that created the child exits (a pool may spawn workers
from any request thread), and it is lost if the parent died before it was set. It remains
the right tool before an exec (silt/child_process.py set_parent_death_signal), where no thread
of ours survives; silt/child_process.py also starts the pools whose workers watch their parent.
"""

from __future__ import annotations

import os
import select
import signal
import threading

PARENT_PID_ENV = "SILT_PARENT_PID"
POLL_SECONDS = 0.5


def _wait_gone(parent_pid: int) -> None:
    try:
        fd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        select.select([fd], [], [])  # readable once the parent has exited
        return
    while os.getppid() == parent_pid:
        threading.Event().wait(POLL_SECONDS)


def _exit_when_gone(parent_pid: int, grace: float | None) -> None:
    _wait_gone(parent_pid)
    if grace is not None:
        # The kernel ends the process when the grace runs out (SIGALRM's default action), even
        # if the orderly shutdown is stuck in interpreter finalization, where this daemon
        # thread would never run again to reach os._exit.
        signal.setitimer(signal.ITIMER_REAL, grace)
        os.kill(os.getpid(), signal.SIGTERM)  # the process's own orderly shutdown
        threading.Event().wait(grace)
    os._exit(1)


def die_with_parent(parent_pid: int, grace: float | None = None) -> None:
    """Exit this process when parent_pid exits (call early in the child, e.g. in a pool initializer).

    grace None: os._exit at once (a pool worker blocked in a queue read would never reach an
    orderly shutdown, and nothing waits for one). grace: SIGTERM this process first, so a
    service shuts down as it would when stopped, and os._exit after grace seconds.
    """
    if os.getppid() != parent_pid:  # died before we could watch it
        os._exit(1)
    threading.Thread(target=_exit_when_gone, args=(parent_pid, grace), name="silt-parent-watch", daemon=True).start()


def watch_parent_from_env(grace: float) -> None:
    """In a service the launcher started: stop when the launcher dies (PARENT_PID_ENV).

    The variable is removed, so processes this one starts do not watch the launcher instead
    of their own parent.
    """
    raw = os.environ.pop(PARENT_PID_ENV, "")
    if raw.isdigit():
        die_with_parent(int(raw), grace)
