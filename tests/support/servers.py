"""Starting and stopping the real HTTP servers the tests need (moto_server, Azurite,
fake-gcs-server): each on a free 127.0.0.1 port, in its own process group, dying with the test
run (parent-death signal); started again on another port if the first is taken meanwhile."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from silt.child_process import set_parent_death_signal
from silt.free_ports import free_port

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
# Another process can take the free port between our probe and the server binding it.
START_ATTEMPTS = 3
LOG_TAIL_LINES = 30


class ServerStartError(RuntimeError):
    pass


def _answers(endpoint_url: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint_url + "/", timeout=1.0) as response:
            response.read()
        return True
    except urllib.error.HTTPError:
        return True  # an HTTP error is still an HTTP server answering
    except OSError:
        return False


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} not written)"
    return "\n".join(lines[-LOG_TAIL_LINES:]) or f"({path} is empty)"


def stop_server(process: subprocess.Popen[bytes], grace: float = STOP_GRACE_S) -> None:
    """Stop the server's process group: SIGTERM, then SIGKILL after `grace` seconds."""
    if process.poll() is not None:
        return
    # The server runs in its own process group (start_new_session), so signal the group:
    # that reaches any worker it started and nothing else.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _die_with_parent() -> None:
    set_parent_death_signal(signal.SIGTERM)


def start_http_server(
    name: str, command: Callable[[int], list[str]], probe: str, log_path: Path, grace: float = STOP_GRACE_S
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `command(port)` on a free port; return the process and http://127.0.0.1:<port> once
    `probe` (a path) answers HTTP."""
    problem = ""
    for _ in range(START_ATTEMPTS):
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                command(port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                problem = f"{name} exited with status {process.returncode}"
                break
            if _answers(endpoint + probe):
                return process, endpoint
            time.sleep(0.1)
        else:
            problem = f"{name} did not answer on {endpoint} within {START_TIMEOUT_S:.0f}s"
            stop_server(process, grace)
    raise ServerStartError(f"{problem}; last lines of {log_path}:\n{_tail(log_path)}")
