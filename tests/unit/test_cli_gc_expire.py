"""`silt gc expire` submits the last-access job as its own process and prints its summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import gc as gc_cli
from cli.common import State
from cli.main import cli

SUMMARY = {
    "repository": "repo",
    "branch": "main",
    "run_id": "20260101T000000Z-abcdef01",
    "dry_run": True,
    "entries": 3,
    "events": 1,
    "rules": [{"rule": "30 days under 'logs/'", "objects": 2, "bytes": 2048, "expired": 0, "spared": 0}],
    "commits": [],
    "paths": ["logs/a", "logs/b"],
    "paths_truncated": True,
    "report_location": "file:/ns/_silt/retention/20260101T000000Z-abcdef01/expired",
    "seconds": {"total": 1.0},
}

FAKE_JOB = """
import json, sys
args = sys.argv[1:]
print("args " + json.dumps(args), file=sys.stderr)
if args[1] == "nobranch":
    print("silt-last-access: branch 'nobranch' of repository 'repo' has no last-access rule", file=sys.stderr)
    sys.exit(5)
print(json.dumps(SUMMARY))
"""


@pytest.fixture
def fake_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fake_last_access_job.py").write_text(f"SUMMARY = {SUMMARY!r}\n{FAKE_JOB}")
    monkeypatch.setattr(gc_cli, "LAST_ACCESS_JOB", "fake_last_access_job")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


def test_expire_passes_the_options_and_prints_the_summary(fake_job: None) -> None:
    args = ["gc", "expire", "silt://repo", "main", "--dry-run", "--batch-size", "50"]
    result = CliRunner().invoke(cli, args, obj=State(), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    relayed = json.loads(result.stderr.splitlines()[0].removeprefix("args "))
    assert relayed == ["repo", "main", "--master", "local[*]", "--batch-size", "50", "--dry-run"]
    assert "(dry run: nothing changed)" in result.stdout
    assert "  logs/a\n  logs/b\n  ... (all of them in file:/ns/_silt/retention/" in result.stdout
    as_json = CliRunner().invoke(cli, [*args, "--json"], obj=State(), catch_exceptions=False)
    assert json.loads(as_json.stdout) == SUMMARY


def test_a_failed_expiry_keeps_the_jobs_message_and_exit_code(fake_job: None) -> None:
    result = CliRunner().invoke(cli, ["gc", "expire", "repo", "nobranch"], obj=State(), catch_exceptions=False)
    assert result.exit_code == 5
    assert result.stderr.splitlines()[-1] == "silt: branch 'nobranch' of repository 'repo' has no last-access rule"


def test_batch_size_is_bounded(fake_job: None) -> None:
    result = CliRunner().invoke(cli, ["gc", "expire", "repo", "main", "--batch-size", "1001"], obj=State())
    assert result.exit_code == 2 and "1001" in result.stderr
