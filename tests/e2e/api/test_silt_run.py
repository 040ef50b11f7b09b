"""`silt run` (what `make run` runs) prints one endpoint for lakeFS clients, and lakefs-sdk
works against it with the admin key the run saved."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import lakefs_sdk
import urllib3

from silt.launcher import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_silt_run_prints_the_lakefs_endpoint_and_it_serves_the_sdk(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env.update(PYTHONPATH=str(ROOT), SILT_LOGGING_LEVEL="WARN")
    ports = [f"--{name}-port={free_port()}" for name in ("auth", "graveler", "gateway", "compactor")]
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "run", "--data-dir", str(data_dir), *ports],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        banner = ""
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        while "Press Ctrl-C" not in banner:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, f"silt run exited: {banner}"
            assert time.monotonic() < deadline, banner
            banner += line
        found = re.search(r"lakeFS API:\s+(\S+)", banner)
        assert found, banner
        endpoint = found.group(1)
        assert endpoint == re.search(r"S3 endpoint:\s+(\S+)", banner).group(1)  # type: ignore[union-attr]
        saved = json.loads((data_dir / "credentials.json").read_text())
        config = lakefs_sdk.Configuration(
            host=endpoint + "/api/v1", username=saved["access_key_id"], password=saved["secret_access_key"]
        )
        client = lakefs_sdk.ApiClient(config)
        assert lakefs_sdk.AuthApi(client).get_current_user().user.id == saved["user_id"]
        created = lakefs_sdk.RepositoriesApi(client).create_repository(
            lakefs_sdk.RepositoryCreation(name="quickstart", storage_namespace="local://quickstart")
        )
        assert created.default_branch == "main"
        # The web UI on the same endpoint: the bundle's page (200), or the page saying to build it.
        ui = re.search(r"^Web UI: (\S+)", banner, re.MULTILINE)
        assert ui and ui.group(1) == endpoint + "/ui/", banner
        page = urllib3.request("GET", ui.group(1), timeout=30, retries=False)
        assert page.status in (200, 503) and page.headers["Content-Type"].startswith("text/html")
        assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0
