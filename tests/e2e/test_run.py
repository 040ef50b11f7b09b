"""`silt run` (what `make run` runs) as a real process: first run, Ctrl-C, second run reusing the data.

The first run's banner gives one endpoint for lakeFS clients, which lakefs-sdk uses with the
admin key the run saved (checked on that run: a `silt run` start costs seconds)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import lakefs_sdk
import urllib3

from silt.free_ports import free_port
from tests.e2e.conftest import REPO_ROOT, Silt

# The in-process CLI sees the test's environment under its own: none of it may point elsewhere.
_NOTHING_INHERITED: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("SILT_", "AWS_"))}


def _start(data_dir: Path, ports: dict[str, int]) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["SILT_LOGGING_LEVEL"] = "WARN"
    args = [f"--{name}-port={port}" for name, port in ports.items()]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "run", "--data-dir", str(data_dir), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = ""
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while "Press Ctrl-C" not in seen:
        line = proc.stdout.readline()
        assert line or proc.poll() is None, f"silt run exited: {seen}"
        assert time.monotonic() < deadline, seen
        seen += line
    return proc, seen


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    return rest


def _closed(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _lakefs_clients_are_served(banner: str, saved: dict[str, str]) -> None:
    """The banner's one endpoint for lakeFS clients: S3, the REST API (lakefs-sdk with the saved
    admin key) and the web UI."""
    found = re.search(r"lakeFS API:\s+(\S+)", banner)
    assert found, banner
    endpoint = found.group(1)
    assert endpoint == re.search(r"S3 endpoint:\s+(\S+)", banner).group(1)  # type: ignore[union-attr]
    config = lakefs_sdk.Configuration(
        host=endpoint + "/api/v1", username=saved["access_key_id"], password=saved["secret_access_key"]
    )
    client = lakefs_sdk.ApiClient(config)
    assert lakefs_sdk.AuthApi(client).get_current_user().user.id == saved["user_id"]
    created = lakefs_sdk.RepositoriesApi(client).create_repository(
        # storage_id is optional in lakeFS's API; the SDK's pydantic model makes mypy ask for it.
        lakefs_sdk.RepositoryCreation(name="quickstart", storage_namespace="local://quickstart")  # type: ignore[call-arg]
    )
    assert created.default_branch == "main"
    # The web UI on the same endpoint: the bundle's page (200), or the page saying to build it.
    ui = re.search(r"^Web UI: (\S+)", banner, re.MULTILINE)
    assert ui and ui.group(1) == endpoint + "/ui/", banner
    page = urllib3.request("GET", ui.group(1), timeout=30, retries=False)
    assert page.status in (200, 503) and page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")


def test_silt_run_first_run_ctrl_c_and_reuse(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ports = {"auth": free_port(), "graveler": free_port(), "gateway": free_port(), "compactor": free_port()}
    proc, banner = _start(data_dir, ports)
    try:
        saved = json.loads((data_dir / "credentials.json").read_text())
        assert f"secret_access_key: {saved['secret_access_key']}" in banner
        assert "silt repo create sample --sample" in banner
        for name in ("credentials.json", "secret.key", "services.json"):
            assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600, name
        # The CLI finds the stack through SILT_DATA_DIR alone: as a real process once, the other
        # calls in-process (a new interpreter each costs seconds on a loaded machine).
        user = Silt({**_NOTHING_INHERITED, "SILT_DATA_DIR": str(data_dir)}, tmp_path)
        user("repo", "create", "kept")
        doctor = user.proc("doctor", "--json", ok=False)
        checks = {c["service"]: c["status"] for c in json.loads(doctor.out)}
        assert checks["auth"] == checks["graveler"] == checks["credentials"] == "ok"
        _lakefs_clients_are_served(banner, saved)
    finally:
        tail = _stop(proc)
    assert "Stopped." in tail
    assert all(_closed(port) for port in ports.values())

    proc, banner = _start(data_dir, ports)
    try:
        assert saved["secret_access_key"] not in banner and "from the first run" in banner
        listed = user("repo", "list", "--json").json()
        assert sorted(r["name"] for r in listed) == ["kept", "quickstart"]
    finally:
        _stop(proc)


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    nobody = Silt(
        {"SILT_DATA_DIR": str(tmp_path), "SILT_GRAVELER_LISTEN_ADDRESS": f"127.0.0.1:{free_port()}"}, tmp_path
    )
    missing = nobody.proc("repo", "list", ok=False)
    assert missing.code == 2 and "no credentials" in missing.err and missing.err.count("\n") == 1
    down = Silt(
        {**nobody.env, "SILT_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00", "SILT_SECRET_ACCESS_KEY": "x" * 40}, tmp_path
    ).proc("repo", "list", ok=False)
    assert down.code == 3 and "unavailable" in down.err and down.err.count("\n") == 1
    usage = nobody.proc("fs", "ls", "s3://not-silt", ok=False)
    assert usage.code == 2 and "silt://" in usage.err
