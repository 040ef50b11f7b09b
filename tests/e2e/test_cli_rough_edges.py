"""The CLI as a new user meets it: --json anywhere for every command,
numbers as numbers, progress when not on a terminal, exit codes, prompts, messages, and
`silt check` reading the running stack's configuration without creating anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from silt.free_ports import free_port
from silt.launcher import Stack
from tests.e2e.conftest import CLIENTS_BIN, REPO_ROOT, Silt, isolated_aws_env

REPO = "cli-edges"


@pytest.fixture(scope="module")
def repo(silt: Silt) -> str:
    silt("repo", "create", REPO)
    return REPO


def test_json_anywhere_for_commands_that_change_things(silt: Silt, repo: str, tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * 2844)
    uri = f"silt://{repo}/main/j/data.bin"
    # After the subcommand, and before it: both give JSON, with sizes as numbers.
    uploaded = silt("fs", "upload", str(data), uri, "--json", "-q")
    assert json.loads(uploaded.out)["bytes"] == 2844
    again = silt("--json", "fs", "upload", str(data), uri, "-q")
    assert json.loads(again.out)["files"] == [{"path": "j/data.bin", "size": 2844}]
    stat = json.loads(silt("fs", "stat", uri, "--json").out)
    assert stat["size"] == 2844
    downloaded = json.loads(silt("fs", "download", uri, str(tmp_path / "back.bin"), "-q", "--json").out)
    assert downloaded["bytes"] == 2844
    assert json.loads(silt("fs", "rm", uri, "--json").out)["removed"] == ["j/data.bin"]

    silt("branch", "create", f"silt://{repo}/gone", "--source", "main")
    assert json.loads(silt("branch", "delete", f"silt://{repo}/gone", "--yes", "--json").out)["branch"] == "gone"
    silt("auth", "users", "create", "cli-edges-user")
    silt("auth", "groups", "create", "cli-edges-group")
    added = silt("auth", "groups", "add-member", "cli-edges-group", "cli-edges-user", "--json")
    assert json.loads(added.out) == {"ok": True, "group_id": "cli-edges-group", "user_id": "cli-edges-user"}
    silt("repo", "create", "cli-edges-doomed")
    assert json.loads(silt("repo", "delete", "cli-edges-doomed", "--yes", "--json").out)["repository"] == (
        "cli-edges-doomed"
    )


def test_progress_lines_when_not_a_terminal(silt: Silt, repo: str, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(3):
        (tree / f"f{i}.bin").write_bytes(os.urandom(300_000))
    env = {**silt.env, "SILT_PROGRESS_INTERVAL_SECONDS": "0"}
    done = Silt(env, silt.cwd).proc("fs", "upload", "-r", str(tree), f"silt://{repo}/main/tree/")
    lines = [line for line in done.err.splitlines() if line.startswith("silt: uploading")]
    assert len(lines) >= 2, done.err  # periodic lines, then the last one
    assert "878.9 KiB of 878.9 KiB (100%)" in lines[-1] and "3/3 files" in lines[-1] and "/s" in lines[-1]
    assert "done in" in lines[-1]
    assert any("ETA" in line for line in lines[:-1])
    quiet = Silt(env, silt.cwd).proc("fs", "upload", "-r", "-q", str(tree), f"silt://{repo}/main/tree/")
    assert "uploading" not in quiet.err


def test_doctor_wrong_secret_exits_6(stack: Stack, silt: Silt) -> None:
    assert stack.admin is not None
    wrong = silt.as_user(stack.admin.access_key_id, "x" * 40).proc("doctor", ok=False)
    assert wrong.code == 6, wrong.err + wrong.out


def test_deleting_a_missing_branch_fails_before_prompting(silt: Silt, repo: str) -> None:
    result = silt("branch", "delete", f"silt://{repo}/no-such-branch", ok=False)
    assert result.code == 4, result.err
    assert "Delete branch" not in result.out + result.err
    missing_repo = silt("repo", "delete", "no-such-repository-here", ok=False)
    assert missing_repo.code == 4 and "Delete repository" not in missing_repo.out


def test_list_commands_take_a_bare_repository_name(silt: Silt, repo: str) -> None:
    assert "main" in [b["name"] for b in json.loads(silt("branch", "list", repo, "--json").out)]
    assert json.loads(silt("tag", "list", repo, "--json").out) == []


def test_commit_on_a_tag_says_it_is_a_tag(silt: Silt, repo: str) -> None:
    silt("tag", "create", f"silt://{repo}/v1", "main")
    result = silt("commit", f"silt://{repo}/v1", "-m", "onto a tag", ok=False)
    assert result.code == 2
    assert "'v1' is a tag" in result.err and "not a branch" in result.err
    assert "not found" not in result.err


def test_check_reads_the_running_stack_config_and_creates_nothing(stack: Stack, silt: Silt, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**silt.env, "HOME": str(home)}
    result = Silt(env, silt.cwd).proc("check")
    assert f"config: {stack.config_path}" in result.out
    assert "kv: local ok" in result.out and "blockstore: local ok" in result.out
    assert list(home.iterdir()) == []  # no ~/silt, nothing else


def test_run_hint_works_as_printed(tmp_path: Path) -> None:
    """Start `silt run`, then paste its "Try" lines into a shell, as a new user would."""
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env.update(isolated_aws_env(), PYTHONPATH=str(REPO_ROOT), SILT_LOGGING_LEVEL="WARN")
    env["PATH"] = os.pathsep.join([str(CLIENTS_BIN), str(Path(sys.executable).parent), env.get("PATH", "")])
    ports = [f"--{name}-port={free_port()}" for name in ("auth", "graveler", "gateway")]
    run = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "run", "--data-dir", str(data_dir), *ports],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        banner, deadline = "", time.monotonic() + 60
        assert run.stdout is not None
        while "Press Ctrl-C" not in banner:
            line = run.stdout.readline()
            assert line and time.monotonic() < deadline, f"silt run: {banner}"
            banner += line
        hint = banner.split("Try, in another terminal:\n", 1)[1].split("\n\n", 1)[0]
        commands = [line.strip() for line in hint.splitlines() if line.strip()]
        assert any(c.startswith('eval "$(') and c.endswith(' auth env)"') for c in commands), commands
        (tmp_path / "README.md").write_text("hello from the quickstart\n")
        shell = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(commands)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shell.returncode == 0, f"{commands}\n{shell.stdout}\n{shell.stderr}"
        assert "README.md" in shell.stdout
    finally:
        run.send_signal(2)
        run.communicate(timeout=60)


def test_repo_create_sample_fills_it_through_the_rest_api(silt: Silt) -> None:
    created = silt("repo", "create", "cli-sample", "--sample")
    assert "Sample data: 2 commits on main" in created.out, created.out
    listed = silt("fs", "ls", "silt://cli-sample/main/", "--json")
    paths = {row["path"] for row in json.loads(listed.out)}
    assert "README.md" in paths, listed.out
    assert "README.md" in silt("fs", "ls", "silt://cli-sample/raise-prices/", "--json").out
    shown = silt("fs", "cat", "silt://cli-sample/raise-prices/tables/products.csv")
    assert "hammer,hardware,13.75" in shown.out
    again = silt("repo", "create", "cli-sample", "--sample", ok=False)
    assert again.code != 0 and "already exists" in again.err, again.err
