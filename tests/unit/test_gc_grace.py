"""GC's grace period must outlast a staging-API link address by a margin: a shorter one is
refused where a run is requested (`silt gc run`, the job's entry point) before anything runs,
and the defaults pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import gc as gc_cli
from cli.common import State
from cli.main import cli
from edge.api.objects.link_addresses import LINK_VALIDITY_SECONDS
from jobs.gc import job
from silt.config import BlockstoreConfig
from silt.gc_grace import (
    DEFAULT_GRACE,
    DEFAULT_GRACE_SECONDS,
    GRACE_MARGIN_SECONDS,
    MIN_GRACE_SECONDS,
    GraceTooShort,
    check_grace,
    parse_grace,
)


def test_the_minimum_exceeds_the_link_validity_by_the_margin_and_the_default_meets_it() -> None:
    assert GRACE_MARGIN_SECONDS >= 3600
    assert MIN_GRACE_SECONDS == LINK_VALIDITY_SECONDS + GRACE_MARGIN_SECONDS
    assert parse_grace(DEFAULT_GRACE) == DEFAULT_GRACE_SECONDS >= MIN_GRACE_SECONDS
    assert job.GCOptions().grace_seconds == DEFAULT_GRACE_SECONDS


@pytest.mark.parametrize("grace", ["0", "90s", "30m", "6h", str(LINK_VALIDITY_SECONDS), str(MIN_GRACE_SECONDS - 1)])
def test_a_grace_within_the_link_validity_and_margin_is_refused(grace: str) -> None:
    with pytest.raises(GraceTooShort):
        check_grace(parse_grace(grace))
    # Only when the caller says so explicitly.
    assert check_grace(parse_grace(grace), unsafe_short_grace=True) == parse_grace(grace)


@pytest.mark.parametrize("grace", ["7h", "12h", "2d", str(MIN_GRACE_SECONDS)])
def test_a_grace_past_the_margin_is_accepted(grace: str) -> None:
    assert check_grace(parse_grace(grace)) == parse_grace(grace)


@pytest.fixture
def job_launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in GC job that records that it was started."""
    marker = tmp_path / "started"
    (tmp_path / "fake_gc_job.py").write_text(
        f"import json, pathlib, sys\npathlib.Path({str(marker)!r}).write_text(json.dumps(sys.argv[1:]))\n"
        'print(json.dumps({"repository": "repo", "run_id": "r", "dry_run": True, "objects": {}, "bytes": {},'
        ' "deleted": 0, "spared": 0, "seconds": {}, "report_location": ""}))\n'
    )
    monkeypatch.setattr(gc_cli, "GC_JOB", "fake_gc_job")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return marker


def test_silt_gc_run_refuses_a_short_grace_before_starting_the_job(job_launches: Path) -> None:
    result = CliRunner().invoke(cli, ["gc", "run", "repo", "--grace", "6h"], obj=State())
    assert result.exit_code == 2, result.output
    assert "--grace" in result.stderr and "at least 7 h" in result.stderr
    assert not job_launches.exists()


def test_silt_gc_run_passes_the_default_and_an_explicit_unsafe_grace(job_launches: Path) -> None:
    result = CliRunner().invoke(cli, ["gc", "run", "repo", "--json"], obj=State())
    assert result.exit_code == 0, result.output
    assert json.loads(job_launches.read_text())[:5] == ["repo", "--master", "local[*]", "--grace", DEFAULT_GRACE]
    result = CliRunner().invoke(
        cli, ["gc", "run", "repo", "--grace", "0", "--unsafe-short-grace", "--json"], obj=State()
    )
    assert result.exit_code == 0, result.output
    assert "--unsafe-short-grace" in json.loads(job_launches.read_text())


def test_the_job_refuses_a_short_grace_before_spark_or_graveler(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_session(*_: object) -> None:
        raise AssertionError("the job started Spark with a grace it should have refused")

    monkeypatch.setattr(job, "start_job", no_session)
    with pytest.raises(GraceTooShort):
        job.main(["repo", "--grace", "6h"])


def test_the_job_runs_with_a_short_grace_only_when_told_it_is_unsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    class Started(Exception):
        pass

    def started(*_: object) -> None:
        raise Started

    monkeypatch.setattr(job, "start_job", started)
    with pytest.raises(Started):
        job.main(["repo", "--grace", "0", "--unsafe-short-grace"])


class NoGraveler:
    """A graveler stub that fails the test if a run reaches it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the run called graveler's {name} with a grace it should have refused")


def test_options_with_a_short_grace_are_refused_unless_marked_unsafe() -> None:
    with pytest.raises(GraceTooShort):
        job.GCOptions(grace_seconds=0)
    with pytest.raises(GraceTooShort):
        job.GCOptions(grace_seconds=MIN_GRACE_SECONDS - 1, dry_run=True)
    assert job.GCOptions(grace_seconds=0, unsafe_short_grace=True).grace_seconds == 0
    assert job.GCOptions(grace_seconds=MIN_GRACE_SECONDS).grace_seconds == MIN_GRACE_SECONDS


def test_run_gc_refuses_a_short_grace_whoever_built_the_options() -> None:
    options = job.GCOptions()
    options.grace_seconds = 600  # changed after the options checked it
    with pytest.raises(GraceTooShort):
        job.run_gc(None, NoGraveler(), "repo", BlockstoreConfig(), options)
