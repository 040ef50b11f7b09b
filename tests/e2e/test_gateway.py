"""The same day with object bytes: the AWS CLI and `silt fs` through the S3 gateway."""

from __future__ import annotations

import subprocess
from pathlib import Path

from silt.launcher import Stack
from tests.e2e.conftest import Silt, aws_cli

REPO = "e2e-bytes"


def _aws(
    silt: Silt, *args: str, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    aws = aws_cli()
    done = subprocess.run(
        [aws, *args],
        env={**silt.process_env(), **(env or {})},
        cwd=silt.cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def _tree(root: Path, count: int) -> list[str]:
    keys = []
    for i in range(count):
        rel = f"d{i % 7}/sub{i % 3}/file-{i:04d}.txt"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"version 1 of {rel}\n")
        keys.append(rel)
    return sorted(keys)


def test_upload_branch_merge_and_read_old_versions(stack: Stack, silt: Silt, tmp_path: Path) -> None:
    src = tmp_path / "src"
    keys = _tree(src, 300)
    silt("repo", "create", REPO)

    _aws(silt, "s3", "cp", "--recursive", "--only-show-errors", str(src), f"s3://{REPO}/main/aws/")
    silt.proc("fs", "upload", "-r", "-q", str(src), f"silt://{REPO}/main/cli/")
    listed = silt("fs", "ls", "-r", f"silt://{REPO}/main/", "--json").json()
    assert len(listed) == 600
    first = silt("commit", f"silt://{REPO}/main", "-m", "import", "--json").json()["id"]

    silt("branch", "create", f"silt://{REPO}/dev", "--source", "main")
    (tmp_path / "new.txt").write_text("version 2\n")
    silt.proc("fs", "upload", str(tmp_path / "new.txt"), f"silt://{REPO}/dev/aws/{keys[0]}")
    _aws(silt, "s3", "rm", f"s3://{REPO}/dev/aws/{keys[1]}")
    diff = silt.proc("diff", f"silt://{REPO}/dev").out.splitlines()
    assert diff == [f"~ aws/{keys[0]}", f"- aws/{keys[1]}"]
    silt("commit", f"silt://{REPO}/dev", "-m", "edit")
    silt("merge", f"silt://{REPO}/dev", "main")

    assert silt.proc("fs", "cat", f"silt://{REPO}/main/aws/{keys[0]}").out == "version 2\n"
    old = _aws(silt, "s3", "cp", f"s3://{REPO}/{first}/aws/{keys[0]}", "-")
    assert old.stdout == f"version 1 of {keys[0]}\n"
    assert _aws(silt, "s3", "cp", f"s3://{REPO}/main/aws/{keys[1]}", "-", ok=False).returncode != 0

    out = tmp_path / "out"
    silt.proc("fs", "download", "-r", "-q", f"silt://{REPO}/{first}/cli/", str(out))
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == keys
    assert (out / keys[5]).read_text() == f"version 1 of {keys[5]}\n"

    silt("branch", "revert", f"silt://{REPO}/main", "main", "--parent-number", "1", "-y")
    assert silt.proc("fs", "cat", f"silt://{REPO}/main/aws/{keys[0]}").out == f"version 1 of {keys[0]}\n"


def test_analyst_gets_access_denied_on_s3_write(silt: Silt, tmp_path: Path) -> None:
    silt("repo", "create", "e2e-bytes-ro")
    silt("auth", "users", "create", "s3-analyst")
    silt("auth", "groups", "add-member", "Analysts", "s3-analyst")
    key = silt("auth", "credentials", "create", "--user", "s3-analyst", "--json").json()
    env = {"AWS_ACCESS_KEY_ID": key["access_key_id"], "AWS_SECRET_ACCESS_KEY": key["secret_access_key"]}
    (tmp_path / "f.txt").write_text("x")
    silt("fs", "upload", str(tmp_path / "f.txt"), "silt://e2e-bytes-ro/main/f.txt")
    silt("commit", "silt://e2e-bytes-ro/main", "-m", "f")

    read = _aws(silt, "s3", "cp", "s3://e2e-bytes-ro/main/f.txt", "-", env=env)
    assert read.stdout == "x"
    write = _aws(silt, "s3", "cp", str(tmp_path / "f.txt"), "s3://e2e-bytes-ro/main/g.txt", env=env, ok=False)
    assert write.returncode != 0 and "AccessDenied" in write.stderr
    ana = silt.as_user(key["access_key_id"], key["secret_access_key"])
    denied = ana.proc("fs", "upload", str(tmp_path / "f.txt"), "silt://e2e-bytes-ro/main/h.txt", ok=False)
    assert denied.code == 6 and "permission denied" in denied.err
