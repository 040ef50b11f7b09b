"""A lakectl script runs unchanged against Silt: tests/e2e/scripts/lakectl_quickstart.sh, written
as lakeFS's quickstart and lakectl's documentation write them (lakefs:// URIs, lakectl's
arguments and flags), with `lakectl` being the `silt` CLI, then the rest of lakectl's commands
(identity, annotate, actions, bisect, auth, gc, abuse). The CLI is configured by
~/.lakectl.yaml alone and reaches only the edge's HTTP port (the REST API and the S3 gateway):
Silt's gRPC endpoints point at a port nothing listens on, so any gRPC call would fail the script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from silt.client_base import EXIT_USAGE
from silt.launcher import Stack
from tests.e2e.conftest import REPO_ROOT, isolated_aws_env

SCRIPT = Path(__file__).parent / "scripts" / "lakectl_quickstart.sh"
REPO = "lakectl-script"
# Nothing listens on port 1: the CLI's gRPC clients, were any used, would fail at once.
NOWHERE = "127.0.0.1:1"


@pytest.fixture(scope="module")
def lakectl_env(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A laptop set up for lakectl only: ~/.lakectl.yaml with the admin's key and the edge's URL,
    `lakectl` on PATH being `silt`, no Silt credentials or configuration."""
    assert stack.admin is not None
    root = tmp_path_factory.mktemp("lakectl-laptop")
    home, shims = root / "home", root / "bin"
    home.mkdir()
    shims.mkdir()
    (home / ".lakectl.yaml").write_text(
        "credentials:\n"
        f"  access_key_id: {stack.admin.access_key_id}\n"
        f"  secret_access_key: {stack.admin.secret_access_key.get_secret_value()}\n"
        "server:\n"
        f"  endpoint_url: {stack.endpoints['gateway']}/api/v1\n"
    )
    shim = shims / "lakectl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cli.main "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_", "LAKECTL_", "LAKEFS_"))}
    env.update(isolated_aws_env())
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(root / "cache"),
        PYTHONPATH=str(REPO_ROOT),
        PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}",
        SILT_GRAVELER_ENDPOINT=NOWHERE,
        SILT_AUTH_ENDPOINT=NOWHERE,
        SILT_COMPACTOR_ENDPOINT=NOWHERE,
    )
    return env


def _lakectl(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["lakectl", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def _section(out: str, marker: str) -> str:
    """The script's output after `--- marker`, up to the next marker."""
    return out.split(f"--- {marker}\n", 1)[1].split("\n--- ", 1)[0]


def test_quickstart_script_runs_unchanged(lakectl_env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**lakectl_env, "REPO": REPO, "NAMESPACE": f"local://{REPO}"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    # doctor: the REST API answers; the internal gRPC ports are unreachable from here, and that is no failure.
    doctor = {line.split()[0]: line for line in _section(out, "doctor").splitlines()[1:] if line.strip()}
    assert " ok " in doctor["rest"] and "unreachable" in doctor["graveler"], _section(out, "doctor")
    assert f"Repository: lakefs://{REPO}" in out
    assert "text/csv" in out  # fs stat: the content type guessed from the name
    assert _section(out, "uncommitted").splitlines()[0] == "+ lakes.csv"
    assert _section(out, "diff main..denmark-lakes").startswith("+ lakes.csv")
    assert "Merged denmark-lakes into main" in out
    log = _section(out, "log")
    assert log.count("commit ") >= 2 and "Create a dataset of just the lakes in Denmark" in log
    assert "Esrum Sø" in _section(out, "cat v1")
    assert _section(out, "after reset").splitlines()[0] == "No differences"
    branches = _section(out, "branches")
    assert "main" in branches and "denmark-lakes" not in branches

    # The rest of lakectl's commands, through the REST API alone.
    assert _section(out, "identity").startswith("User ID:          admin")
    assert "lakes.csv" in _section(out, "annotate") and "(uncommitted)" not in _section(out, "annotate")
    found = _section(out, "bisect").splitlines()[-1]
    assert found.startswith(f"Found commit lakefs://{REPO}/") and "lakes in Denmark" in found, _section(out, "bisect")
    auth = _section(out, "auth")
    assert "Permission: Read" in auth and "DeleteRepo" in auth and "secret_access_key" in auth
    assert "quickstart-analyst" not in _section(out, "users")
    gc = _section(out, "gc")
    assert "Default Retention Days: 21" in gc and '"retention_days": 28' in gc and "GC commits task" in gc
    abuse = _section(out, "abuse")
    for summary in ("stage object: 20 completed, 0 failed", "read: 20 completed", "merge: 3 completed, 0 failed"):
        assert summary in abuse, abuse

    # After the script: a download is created with the umask's mode, not 0600.
    downloaded = _lakectl(lakectl_env, tmp_path, "fs", "download", f"lakefs://{REPO}/v1/lakes.csv", "got.csv")
    assert downloaded.returncode == 0, downloaded.stderr
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / "got.csv").stat().st_mode & 0o777 == 0o666 & ~umask

    # Silt's own commands over the same endpoint: a branch's events, and an import this stack refuses.
    events = _lakectl(lakectl_env, tmp_path, "events", f"lakefs://{REPO}/main", "--since", "1h", "--json")
    assert events.returncode == 0, events.stderr
    assert {"merge", "commit"} <= {json.loads(line)["type"] for line in events.stdout.splitlines()}
    refused = _lakectl(
        lakectl_env, tmp_path, "import", "--from", "s3://elsewhere/x/", "--to", f"lakefs://{REPO}/main/x/"
    )
    assert refused.returncode == EXIT_USAGE and refused.stderr.count("\n") == 1, refused.stderr

    # Without -y and without a terminal to ask on, a destructive command refuses, as lakectl's.
    refused = _lakectl(lakectl_env, tmp_path, "branch", "reset", f"lakefs://{REPO}/main")
    assert refused.returncode == EXIT_USAGE and "--yes" in refused.stderr, refused.stderr
    # An error from the API is its JSON message, in one line, with the status's exit code.
    missing = _lakectl(lakectl_env, tmp_path, "branch", "delete", f"lakefs://{REPO}/no-such", "-y")
    assert missing.returncode == 4 and missing.stderr.count("\n") == 1 and "not found" in missing.stderr
