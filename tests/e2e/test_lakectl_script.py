"""A lakectl script runs unchanged against Silt: tests/e2e/scripts/lakectl_quickstart.sh, written
as lakeFS's quickstart and lakectl's documentation write them (lakefs:// URIs, lakectl's
arguments and flags), with `lakectl` being the `silt` CLI, then the rest of lakectl's commands
(identity, annotate, actions, bisect); after it, auth, gc and abuse as lakectl writes them, and
Silt's events and import, in this process with the same configuration. The CLI is configured by
~/.lakectl.yaml alone and reaches only the edge's HTTP port (the REST API and the S3 gateway):
Silt's gRPC endpoints point at a port nothing listens on, so any gRPC call would fail the script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from silt.client_base import EXIT_NOT_FOUND, EXIT_USAGE
from silt.launcher import Stack
from tests.e2e.conftest import REPO_ROOT, Silt, isolated_aws_env

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
    bisect = _section(out, "bisect").splitlines()
    found = [line for line in bisect if line.startswith(f"Found commit lakefs://{REPO}/")]
    assert found and all("lakes in Denmark" in line for line in found) and bisect[-1] == "Cleared bisect session"

    # After the script: a download is created with the umask's mode, not 0600.
    downloaded = _lakectl(lakectl_env, tmp_path, "fs", "download", f"lakefs://{REPO}/v1/lakes.csv", "got.csv")
    assert downloaded.returncode == 0, downloaded.stderr
    umask = os.umask(0o022)
    os.umask(umask)
    assert (tmp_path / "got.csv").stat().st_mode & 0o777 == 0o666 & ~umask

    # The rest of lakectl's commands in lakectl's syntax, and Silt's events and import, on the same
    # laptop (~/.lakectl.yaml alone, gRPC unreachable), in this process: a new interpreter each
    # would cost more than the calls.
    lakectl = _in_process(lakectl_env)
    repo = f"lakefs://{REPO}"
    events = lakectl("events", f"{repo}/main", "--since", "1h", "--json")
    assert {"merge", "reset", "write"} <= {json.loads(line)["type"] for line in events.out.splitlines()}
    outside = lakectl("import", "--from", "s3://elsewhere/x/", "--to", f"{repo}/main/x/", ok=False)
    assert outside.code == EXIT_USAGE and outside.err.count("\n") == 1, outside.err
    _auth_as_lakectl_writes_it(lakectl, tmp_path)
    _gc_as_lakectl_writes_it(lakectl, repo, tmp_path)
    _abuse_as_lakectl_writes_it(lakectl, repo, tmp_path)

    # Without -y and without a terminal to ask on, a destructive command refuses, as lakectl's.
    refused = _lakectl(lakectl_env, tmp_path, "branch", "reset", f"lakefs://{REPO}/main")
    assert refused.returncode == EXIT_USAGE and "--yes" in refused.stderr, refused.stderr
    # An error from the API is its JSON message, in one line, with the status's exit code.
    missing = _lakectl(lakectl_env, tmp_path, "branch", "delete", f"lakefs://{REPO}/no-such", "-y")
    assert missing.returncode == 4 and missing.stderr.count("\n") == 1 and "not found" in missing.stderr


def _in_process(env: dict[str, str]) -> Silt:
    """`lakectl` (the CLI) run in this process with the laptop's environment, nothing else of ours."""
    isolated: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("SILT_", "AWS_", "LAKECTL_"))}
    return Silt({**isolated, **env}, Path(env["HOME"]))


def _auth_as_lakectl_writes_it(lakectl: Silt, tmp_path: Path) -> None:
    user, group, policy = "quickstart-analyst", "quickstart-readers", "quickstart-keep-repo"
    lakectl("auth", "users", "create", "--id", user)
    lakectl("auth", "groups", "create", "--id", group)
    lakectl("auth", "groups", "members", "add", "--id", group, "--user", user)
    assert [u["id"] for u in lakectl("auth", "groups", "members", "list", "--id", group, "--json").json()] == [user]
    lakectl("auth", "groups", "acl", "set", "--id", group, "--permission", "Read")
    assert "Permission: Read" in lakectl("auth", "groups", "acl", "get", "--id", group).out
    assert [g["id"] for g in lakectl("auth", "users", "groups", "list", "--id", user, "--json").json()] == [group]
    document = tmp_path / "policy.json"
    resource = f"arn:lakefs:fs:::repository/{REPO}"
    statements = [{"effect": "deny", "action": ["fs:DeleteRepository"], "resource": resource}]
    document.write_text(json.dumps({"statement": statements}))
    lakectl("auth", "policies", "create", "--id", policy, "--statement-document", str(document))
    (statement,) = lakectl("auth", "policies", "show", "--id", policy, "--json").json()["statement"]
    assert statement["effect"] == "deny" and statement["action"] == ["DeleteRepo"]  # as enforced: Silt's words
    lakectl("auth", "users", "policies", "attach", "--id", user, "--policy", policy)
    attached = lakectl("auth", "users", "policies", "list", "--id", user, "--json").json()
    assert [p["id"] for p in attached] == [policy]
    lakectl("auth", "users", "policies", "detach", "--id", user, "--policy", policy)
    key = lakectl("auth", "users", "credentials", "create", "--id", user, "--json").json()
    listed = lakectl("auth", "users", "credentials", "list", "--id", user, "--json").json()
    assert [c["access_key_id"] for c in listed] == [key["access_key_id"]] and key["secret_access_key"]
    lakectl("auth", "users", "credentials", "delete", "--id", user, "--access-key-id", key["access_key_id"])
    lakectl("auth", "groups", "members", "remove", "--id", group, "--user", user)
    lakectl("auth", "policies", "delete", "--id", policy)
    lakectl("auth", "users", "delete", "--id", user)
    lakectl("auth", "groups", "delete", "--id", group)
    assert user not in [u["id"] for u in lakectl("auth", "users", "list", "--json").json()]
    assert lakectl("identity", "--json").json()["id"] == "admin"


def _gc_as_lakectl_writes_it(lakectl: Silt, repo: str, tmp_path: Path) -> None:
    rules = tmp_path / "gc.json"
    main_rule = {"branch_id": "main", "retention_days": 28}
    rules.write_text(json.dumps({"default_retention_days": 21, "branches": [main_rule]}))
    lakectl("gc", "set-config", repo, "-f", str(rules))
    assert "Default Retention Days: 21" in lakectl("gc", "get-config", repo).out
    assert lakectl("gc", "get-config", repo, "-p").json()["branches"] == [main_rule]
    started = lakectl("gc", "prepare-async", repo).out
    task = started.split("task ", 1)[1].split(".", 1)[0]
    assert f"GC commits task {task}:" in lakectl("gc", "check-async", repo, "--id", task).out
    lakectl("gc", "delete-config", repo)
    assert lakectl("gc", "get-config", repo, ok=False).code == EXIT_NOT_FOUND


def _abuse_as_lakectl_writes_it(lakectl: Silt, repo: str, tmp_path: Path) -> None:
    def completed(*args: str) -> int:
        done: dict[str, Any] = lakectl("abuse", *args, "--json").json()
        assert done["failed"] == 0, done
        return int(done["completed"])

    main = f"{repo}/main"
    assert completed("random-write", main, "--prefix", "abuse/", "--amount", "10", "--parallelism", "4") == 10
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"abuse/file-{i}\n" for i in range(5)))
    assert completed("random-read", main, "--from-file", str(keys), "--amount", "10", "--parallelism", "4") == 10
    assert completed("list", main, "--prefix", "abuse/", "--amount", "5", "--parallelism", "2") == 5
    assert completed("link-same-object", main, "--amount", "5", "--parallelism", "5") == 5
    assert completed("commit", main, "--amount", "2", "--gap", "10ms") == 2
    assert completed("create-branches", main, "--branch-prefix", "abuse-", "--amount", "3", "--parallelism", "3") == 3
    assert completed("create-branches", main, "--branch-prefix", "abuse-", "--clean-only", "--parallelism", "3") == 3
    assert completed("merge", main, "--amount", "2", "--parallelism", "2") == 2
    branches = [b["name"] for b in lakectl("branch", "list", repo, "--json").json()]
    assert not [b for b in branches if b.startswith(("abuse-", "merge-"))], branches
    assert completed("random-delete", main, "--from-file", str(keys), "--amount", "5", "--parallelism", "2") == 5
