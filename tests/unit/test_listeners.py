"""owns_listener tells a service's own listening socket from another process's on the same port:
what lets the launcher refuse a port that was given to someone else after it was chosen."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

from silt.listeners import owns_listener

_LISTENER = """
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)
"""


def test_the_listening_process_and_its_parent_own_the_port_and_no_one_else() -> None:
    # A shell whose child listens: as the launcher's service whose worker holds the socket.
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {_LISTENER!r}])"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that the child, the listener, ends with it below
    )
    try:
        assert parent.stdout is not None
        port = int(parent.stdout.readline())
        assert owns_listener(parent.pid, port) is True
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            assert owns_listener(other.pid, port) is False  # reachable port, someone else's socket
        finally:
            other.kill()
            other.wait()
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def test_a_port_nobody_listens_on_is_owned_by_no_one() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening
        port = sock.getsockname()[1]
        with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as proc:
            try:
                assert owns_listener(proc.pid, port) is False
            finally:
                proc.kill()
