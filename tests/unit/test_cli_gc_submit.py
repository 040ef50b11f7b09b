"""`silt gc run` submits the GC job as its own process: its progress reaches stderr, its
summary stdout, and a failure keeps the job's message and exit code."""

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
    "run_id": "20260101T000000Z-abcdef01",
    "dry_run": True,
    "objects": {"expired-commit": 2, "unreferenced": 0},
    "bytes": {"expired-commit": 10, "unreferenced": 0},
    "deleted": 0,
    "spared": 0,
    "seconds": {"mark": 1.0},
    "report_location": "",
}

FAKE_JOB = """
import json, sys
args = sys.argv[1:]
print("args " + json.dumps(args), file=sys.stderr)
if args[0] == "missing":
    print("silt-gc: repository 'missing' not found", file=sys.stderr)
    sys.exit(4)
print("JVM noise on stdout")
print(json.dumps(SUMMARY))
"""


@pytest.fixture
def fake_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fake_gc_job.py").write_text(f"SUMMARY = {SUMMARY!r}\n{FAKE_JOB}")
    monkeypatch.setattr(gc_cli, "GC_JOB", "fake_gc_job")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


def test_run_passes_the_options_and_prints_the_jobs_summary(fake_job: None) -> None:
    result = CliRunner().invoke(
        cli,
        ["gc", "run", "silt://repo", "--dry-run", "--grace", "0", "--unsafe-short-grace", "--json"],
        obj=State(),
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == SUMMARY
    relayed = json.loads(result.stderr.splitlines()[0].removeprefix("args "))
    assert relayed == ["repo", "--master", "local[*]", "--grace", "0", "--unsafe-short-grace", "--dry-run"]


def test_a_failed_run_keeps_the_jobs_message_and_exit_code(fake_job: None) -> None:
    result = CliRunner().invoke(cli, ["gc", "run", "missing"], obj=State(), catch_exceptions=False)
    assert result.exit_code == 4
    assert result.stderr.splitlines()[-1] == "silt: repository 'missing' not found"
