"""What every benchmark prints: one JSON object per line, and the percentile they quote.

A process's first figure is preceded by the machine's calibration (bench/calibration.py): the
same fixed CPU and fsync work timed right then, so that every absolute figure comes with the
speed of the machine that measured it.
"""

from __future__ import annotations

import json
import statistics

from bench.calibration import calibrate, calibration_line

_calibrated = False


def emit_calibration() -> None:
    """Print the calibration line, once per process (emit calls it before the first figure)."""
    global _calibrated
    if not _calibrated:
        _calibrated = True
        print(calibration_line(calibrate()), flush=True)


def emit(name: str, value: float, unit: str, target: float | None, digits: int = 3) -> None:
    emit_calibration()
    print(json.dumps({"name": name, "value": round(value, digits), "unit": unit, "target": target}), flush=True)


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]
