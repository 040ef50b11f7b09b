"""A real S3-compatible HTTP server for the test run: moto_server, started once per session.

The ``moto_server`` console script installed next to the test interpreter is started in
its own process group on a free 127.0.0.1 port; the fixture waits until it answers HTTP
and yields its endpoint URL. If it cannot be started the tests that need it fail (never
skip): a green run must mean the S3 code paths were exercised.

Set ``SILT_TEST_S3_ENDPOINT=http://host:port`` to use an already running server instead
(its credentials are then whatever ``s3_blockstore_config`` is given).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from silt.config import S3BlockstoreConfig, S3CredentialsConfig
from tests.support.servers import ServerStartError, start_http_server
from tests.support.servers import stop_server as _stop

EXTERNAL_ENV = "SILT_TEST_S3_ENDPOINT"
# moto accepts any credentials; fixed ones keep the tests independent of ~/.aws.
ACCESS_KEY_ID = "silt-test"
SECRET_ACCESS_KEY = "silt-test-secret"


MotoStartError = ServerStartError


def moto_server_executable() -> Path:
    # The console script of the venv running the tests, not whatever is first on PATH.
    path = Path(sys.executable).parent / "moto_server"
    if not path.exists():
        raise MotoStartError(f"moto_server not found next to {sys.executable}; install moto[server]")
    return path


def start_moto_server(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start moto_server on a free port; return the process and its endpoint URL once it answers."""
    executable = moto_server_executable()
    return start_http_server(
        "moto_server", lambda port: [str(executable), "-H", "127.0.0.1", "-p", str(port)], "/", log_path
    )


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


def s3_blockstore_overrides(endpoint_url: str) -> dict[str, Any]:
    """A stack's `blockstore` setting (tests/support/gateway_stack.py overrides) for objects on
    the moto_server at endpoint_url."""
    return {
        "type": "s3",
        "s3": {
            "endpoint_url": endpoint_url,
            "force_path_style": True,
            "credentials": {"access_key_id": ACCESS_KEY_ID, "secret_access_key": SECRET_ACCESS_KEY},
        },
    }


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
