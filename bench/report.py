"""What every benchmark prints: one JSON object per line, and the percentile they quote."""

from __future__ import annotations

import json
import statistics


def emit(name: str, value: float, unit: str, target: float | None, digits: int = 3) -> None:
    print(json.dumps({"name": name, "value": round(value, digits), "unit": unit, "target": target}), flush=True)


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]
