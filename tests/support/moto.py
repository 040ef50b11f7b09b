"""A real S3-compatible HTTP server for the test run: moto_server, started once per session.

The ``moto_server`` console script installed next to the test interpreter is started in
its own process group on a free 127.0.0.1 port; the fixture waits until it answers HTTP
and yields its endpoint URL. If it cannot be started the tests that need it fail (never
skip): a green run must mean the S3 code paths were exercised.

Set ``SILT_TEST_S3_ENDPOINT=http://host:port`` to use an already running server instead
(its credentials are then whatever ``s3_blockstore_config`` is given).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from silt.config import S3BlockstoreConfig, S3CredentialsConfig
from silt.launcher import free_port
from silt.lifeline import set_parent_death_signal

EXTERNAL_ENV = "SILT_TEST_S3_ENDPOINT"
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
# Another process can take the free port between our probe and moto binding it.
START_ATTEMPTS = 3
LOG_TAIL_LINES = 30
# moto accepts any credentials; fixed ones keep the tests independent of ~/.aws.
ACCESS_KEY_ID = "silt-test"
SECRET_ACCESS_KEY = "silt-test-secret"


class MotoStartError(RuntimeError):
    pass


def moto_server_executable() -> Path:
    # The console script of the venv running the tests, not whatever is first on PATH.
    path = Path(sys.executable).parent / "moto_server"
    if not path.exists():
        raise MotoStartError(f"moto_server not found next to {sys.executable}; install moto[server]")
    return path


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


def _stop(process: subprocess.Popen[bytes], grace: float = STOP_GRACE_S) -> None:
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


def start_moto_server(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start moto_server on a free port; return the process and its endpoint URL once it answers."""
    executable = moto_server_executable()
    problem = ""
    for _ in range(START_ATTEMPTS):
        port = free_port()
        endpoint_url = f"http://127.0.0.1:{port}"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [str(executable), "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # A killed test run must not leave moto_server behind (Linux: the kernel signals it).
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                problem = f"moto_server exited with status {process.returncode}"
                break
            if _answers(endpoint_url):
                return process, endpoint_url
            time.sleep(0.1)
        else:
            problem = f"moto_server did not answer on {endpoint_url} within {START_TIMEOUT_S:.0f}s"
            _stop(process)
    raise MotoStartError(f"{problem}; last lines of {log_path}:\n{_tail(log_path)}")


def moto_client(endpoint_url: str) -> Any:
    """A boto3 S3 client for the moto_server at endpoint_url."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        region_name="us-east-1",
    )


def s3_blockstore_config(endpoint_url: str, *, max_retries: int = 1) -> S3BlockstoreConfig:
    """blockstore.s3 settings for talking to the test server."""
    return S3BlockstoreConfig(
        region="us-east-1",
        endpoint_url=endpoint_url,
        force_path_style=True,
        max_retries=max_retries,
        credentials=S3CredentialsConfig(access_key_id=ACCESS_KEY_ID, secret_access_key=SecretStr(SECRET_ACCESS_KEY)),
    )


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """The endpoint URL of a moto_server shared by the whole test run."""
    external = os.environ.get(EXTERNAL_ENV, "").strip().rstrip("/")
    if external:
        yield external
        return
    with tempfile.TemporaryDirectory(prefix="silt-moto-") as tmp:
        log_path = Path(tmp) / "moto_server.log"
        try:
            process, endpoint_url = start_moto_server(log_path)
        except MotoStartError as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            yield endpoint_url
        finally:
            _stop(process)
