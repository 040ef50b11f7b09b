"""The benchmarks' calibration line: printed once per process, before the first figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import calibration, report


def test_calibration_precedes_the_first_figure_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fixed = calibration.Calibration(
        cpu_loop_s=0.5,
        cpu_loop_cpu_s=0.4,
        fsync_round_s=0.25,
        wakeup_cpu_us=43.21,
        load_1m=1.0,
        cpus=2,
        python="3.11.7",
    )
    monkeypatch.setattr(report, "calibrate", lambda: fixed)
    monkeypatch.setattr(report, "_calibrated", False)
    report.emit("x.first", 1.23456, "s", 2.0)
    report.emit("x.second", 2.0, "s", None)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["name"] for line in lines] == ["calibration", "x.first", "x.second"]
    assert lines[0] == {
        "name": "calibration",
        "cpu_loop_s": 0.5,
        "cpu_loop_cpu_s": 0.4,
        "fsync_round_s": 0.25,
        "wakeup_cpu_us": 43.2,
        "load_1m": 1.0,
        "cpus": 2,
        "python": "3.11.7",
    }
    assert lines[1] == {"name": "x.first", "value": 1.235, "unit": "s", "target": 2.0}


def test_the_fixed_work_is_timed(tmp_path: Path) -> None:
    wall, cpu = calibration.cpu_loop(10_000)
    assert wall > 0 and cpu >= 0
    assert calibration.fsync_round(rounds=3, size=512, directory=str(tmp_path)) > 0
    assert calibration.wakeup_cpu(wakeups=5, sleep_s=0.001) >= 0
    assert list(tmp_path.iterdir()) == []
