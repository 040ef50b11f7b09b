"""Metrics in multiprocess mode (the gateway's workers): an increment asks the operating system
nothing, and a forked child still counts in files of its own, so that the endpoint's sum holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Run in a fresh interpreter: prometheus_client picks its mode when it is imported, from the
# environment, and this test process has imported it in the other mode already.
SCRIPT = """
import inspect, json, os
from prometheus_client import CollectorRegistry, multiprocess, values
from silt.telemetry import metrics

# What each increment calls to learn its process (prometheus_client's default: os.getpid).
check = values.ValueClass._MmapedValue__check_for_pid_change
asks = inspect.getclosurevars(check).nonlocals["process_identifier"]
counted = metrics.S3_REQUESTS.labels("GetObject", "200")
timed = metrics.S3_DURATION.labels("GetObject")
for _ in range(1000):
    counted.inc()
    timed.observe(0.001)

child = os.fork()
if child == 0:
    counted.inc(5)
    os._exit(0)
os.waitpid(child, 0)
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry, os.environ["PROMETHEUS_MULTIPROC_DIR"])
total = registry.get_sample_value("silt_s3_requests_total", {"operation": "GetObject", "status": "200"})
observed = registry.get_sample_value("silt_s3_request_duration_seconds_count", {"operation": "GetObject"})
files = sorted(name for name in os.listdir(os.environ["PROMETHEUS_MULTIPROC_DIR"]) if name.startswith("counter_"))
print(json.dumps({"asks_the_kernel": asks is os.getpid, "total": total, "observed": observed,
                  "counter_files": files, "parent": os.getpid(), "child": child}))
"""


def test_increments_ask_no_process_id_and_a_forked_child_counts_apart(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["asks_the_kernel"] is False
    assert result["total"] == 1005.0
    assert result["observed"] == 1000.0
    assert result["counter_files"] == [f"counter_{result['parent']}.db", f"counter_{result['child']}.db"]


def test_values_made_before_the_metrics_module_stop_it_from_loading(tmp_path: Path) -> None:
    # Two value classes would each open the process's files and write over each other's entries.
    script = "from prometheus_client import Counter\nCounter('early', 'made first')\nimport silt.telemetry.metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "values were made before silt.telemetry.metrics was imported" in done.stderr
