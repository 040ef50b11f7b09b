"""The README's quickstart, run as written against the running stack, so the two cannot drift."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from silt.launcher import Stack
from tests.e2e.conftest import REPO_ROOT, aws_cli, isolated_aws_env

README = REPO_ROOT / "README.md"


def quickstart() -> str:
    match = re.search(r"<!-- quickstart -->\n```sh\n(.*?)\n```", README.read_text(), re.S)
    assert match, "README.md lost its <!-- quickstart --> block"
    return match.group(1)


def test_quickstart_runs_as_written(stack: Stack, tmp_path: Path) -> None:
    aws = aws_cli()
    # The reader's checkout, as far as the quickstart can tell: the venv, the files it uploads,
    # and .silt-data from `make run` (here: this session's stack).
    for name in (".venv", "README.md", "Makefile"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    (tmp_path / ".silt-data").symlink_to(stack.data_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env.update(isolated_aws_env())
    # The reader has the AWS CLI on their PATH.
    env["PATH"] = f"{Path(aws).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-eu", "-c", quickstart()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    assert "~ docs/README.md" not in out and "- docs/README.md" in out and "+ docs/Makefile" in out
    assert "Makefile instead of README" in out
    lines = out.rstrip().splitlines()
    assert lines[-4].endswith(" Makefile")  # aws s3 ls: only the Makefile is left on main
    assert lines[-3] == "# Silt"  # the README as it was one commit ago
