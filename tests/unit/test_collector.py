"""A serving process sets its startup heap aside from collections and collects less often."""

from __future__ import annotations

import subprocess
import sys

from silt.collector import FIRST_GENERATION

_PROBE = """
import gc
from silt.collector import tune_for_serving
before = gc.get_threshold()
tune_for_serving()
after = gc.get_threshold()
print(before[0], after[0], after[1:] == before[1:], gc.get_freeze_count() > 0)
# Garbage made after startup is still collected.
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
del a, b
print(gc.collect() >= 2)
"""


def test_tuning_freezes_startup_and_raises_the_first_threshold() -> None:
    # In a process of its own: the tuning is process-wide and must not leak into the test run.
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
    first, tuned, rest_kept, frozen = out.stdout.split("\n")[0].split()
    assert (int(first), int(tuned), rest_kept, frozen) == (700, FIRST_GENERATION, "True", "True")
    assert out.stdout.split("\n")[1] == "True"
