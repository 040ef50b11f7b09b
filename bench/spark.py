"""`make bench-spark`: one Spark job through Silt's S3 gateway, through moto_server and to
local `file://`, in one run; one JSON object per line.

The job: `--rows` rows (3,000,000) written as Parquet in 8 files and read back with a filter,
then the same rows written partitioned into 200 directories of one file each. All three
targets run in one local SparkSession (S3A per-bucket endpoints, silt/spark.py), each first
with a small untimed warm-up so that JIT and connection set-up do not count against whichever
target happens to go first. Silt runs as real processes (tests/support/gateway_stack.py),
moto as `moto_server` (tests/support/moto.py).

Printed: seconds per step and target (the best of `--repeat` rounds, which take the targets in
turn), the totals, and the ratios silt/moto (target: at most 0.7) and silt/file (at most 2.0).
Each target's round also reports the CPU seconds its S3 server used (Silt's three services, or
moto_server; from /proc) and what the rest used (Spark's JVM and this process), so that a
round's time can be set against the CPU each side spent in it, whatever the machine's load.
`--requests` adds the number of S3 requests the gateway answered per operation during Silt's
first timed round (from its access log), to tell request count from per-request cost, and the
graveler calls they cost (from graveler's own /metrics, per method and per S3 request; target:
at most 1.5 graveler calls per S3 request on average).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.processes import cpu_seconds, process_tree
from bench.report import emit
from silt.free_ports import free_port
from silt.spark import S3AEndpoint, local_session, use_endpoint_for_bucket
from tests.support.gateway_stack import gateway_stack
from tests.support.moto import ACCESS_KEY_ID, SECRET_ACCESS_KEY, _stop, moto_client, start_moto_server

FILES = 8
PARTITIONS = 200
WARM_UP_ROWS = 20_000
STEPS = ("write_8_files", "read_filter", "write_200_partitions")


def frame(spark: Any, rows: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.col("id"),
        (F.col("id") % 1000).alias("k"),
        (F.col("id") % PARTITIONS).alias("p"),
        F.rand(seed=7).alias("v"),
        F.concat(F.lit("name-"), F.col("id").cast("string")).alias("s"),
    )


def run_job(spark: Any, base: str, rows: int) -> dict[str, float]:
    """Seconds of each step of the job under base (an s3a:// or file:// URI)."""
    from pyspark.sql import functions as F

    df = frame(spark, rows)
    seconds: dict[str, float] = {}

    def timed(step: str, action: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = action()
        seconds[step] = time.perf_counter() - started
        return result

    timed("write_8_files", lambda: df.repartition(FILES).write.mode("overwrite").parquet(f"{base}/flat"))
    matched = timed("read_filter", lambda: spark.read.parquet(f"{base}/flat").filter(F.col("k") < 10).count())
    expected = sum(1 for k in range(1000) if k < 10) * (rows // 1000) + min(rows % 1000, 10)
    if matched != expected:
        raise SystemExit(f"{base}: the filter matched {matched} rows, expected {expected}")
    timed(
        "write_200_partitions",
        lambda: df.repartition(PARTITIONS, "p").write.mode("overwrite").partitionBy("p").parquet(f"{base}/parted"),
    )
    return seconds


def count_files(spark: Any, uri: str) -> int:
    """Parquet data files under uri, through Hadoop's FileSystem (as Spark sees them)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    files = fs.listFiles(path, True)
    count = 0
    while files.hasNext():
        if files.next().getPath().getName().endswith(".parquet"):
            count += 1
    return count


_OPERATION = re.compile(r'operation="([A-Za-z0-9]+)"')
_DURATION = re.compile(r"duration_ms=([0-9.]+)")


def gateway_requests(log: Path, since: int) -> dict[str, tuple[int, float]]:
    """(requests, seconds spent answering them) per S3 operation in the gateway's access log
    lines after byte offset since."""
    counts: dict[str, tuple[int, float]] = {}
    with log.open("rb") as lines:
        lines.seek(since)
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            operation, duration = _OPERATION.search(line), _DURATION.search(line)
            if "access " not in line or operation is None:
                continue
            count, seconds = counts.get(operation.group(1), (0, 0.0))
            counts[operation.group(1)] = (count + 1, seconds + (float(duration.group(1)) / 1000 if duration else 0.0))
    return counts


def graveler_calls(metrics_url: str) -> dict[str, float]:
    """gRPC calls graveler has completed so far, per method, from its /metrics."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    calls: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "silt_grpc_server_handled":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                method = sample.labels["method"]
                calls[method] = calls.get(method, 0.0) + sample.value
    return calls


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds used so far by the processes under roots (each with its descendants)."""
    return sum(cpu_seconds(pid) for root in roots for pid in process_tree(root))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows of the job (smaller for a smoke run)")
    parser.add_argument("--only", default="file,moto,silt", help="targets to run, comma-separated")
    parser.add_argument("--requests", action="store_true", help="also print the gateway's requests per operation")
    parser.add_argument("--repeat", type=int, default=2, help="rounds per target; each step's best is reported")
    args = parser.parse_args()
    targets = [t for t in args.only.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="silt-bench-spark-") as tmp:
        workdir = Path(tmp)
        moto_process, moto_endpoint = start_moto_server(workdir / "moto.log")
        try:
            # The access log (INFO) only when asked for: it costs the gateway time per request.
            metrics_address = f"127.0.0.1:{free_port()}"
            overrides = {"graveler": {"metrics_listen_address": metrics_address}} if args.requests else None
            with gateway_stack(
                workdir / "stack", log_level="INFO" if args.requests else "WARN", overrides=overrides
            ) as gw:
                gw.client().create_bucket(Bucket="bench")
                moto = moto_client(moto_endpoint)
                moto.create_bucket(Bucket="bench-moto")
                spark = local_session(
                    None,
                    master="local[2]",
                    app_name="silt-bench-spark",
                    extra={
                        "spark.hadoop.fs.s3a.impl.disable.cache": "true",
                        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
                        "spark.ui.showConsoleProgress": "false",
                    },
                )
                spark.sparkContext.setLogLevel("ERROR")
                try:
                    admin = gw.admin
                    use_endpoint_for_bucket(
                        spark,
                        "bench",
                        S3AEndpoint(gw.endpoint, admin.access_key_id, admin.secret_access_key.get_secret_value()),
                    )
                    use_endpoint_for_bucket(
                        spark, "bench-moto", S3AEndpoint(moto_endpoint, ACCESS_KEY_ID, SECRET_ACCESS_KEY)
                    )
                    bases = {
                        "file": (workdir / "local").as_uri(),
                        "moto": "s3a://bench-moto/job",
                        "silt": "s3a://bench/main/job",
                    }
                    for target in targets:
                        run_job(spark, bases[target] + "-warm-up", WARM_UP_ROWS)
                    metrics_url = f"http://{metrics_address}/metrics" if args.requests else None
                    silt = {s: pid for s in ("gateway", "graveler", "auth") if (pid := gw.stack.pid(s)) is not None}
                    servers = {"file": {}, "moto": {"moto_server": moto_process.pid}, "silt": silt}
                    results = measure(
                        spark, bases, targets, args, gw.stack.logs_dir / "gateway.log", servers, metrics_url
                    )
                    report_ratios(results)
                finally:
                    spark.stop()
        finally:
            _stop(moto_process)


def measure(
    spark: Any,
    bases: dict[str, str],
    targets: list[str],
    args: argparse.Namespace,
    access_log: Path,
    servers: dict[str, dict[str, int]],
    metrics_url: str | None = None,
) -> dict[str, dict[str, float]]:
    """Each step's best seconds per target. Rounds go through the targets in turn, so that a
    slow spell of a shared machine hits every target alike. servers: each target's S3 server
    processes by name, whose CPU per round is reported beside the CPU of everything else (the JVM)."""
    rounds: dict[str, list[dict[str, float]]] = {target: [] for target in targets}
    every_server = [pid for named in servers.values() for pid in named.values()]
    # CPU seconds of each server process and of everything else ("client") in each target's rounds.
    cpu: dict[str, list[dict[str, float]]] = {target: [] for target in targets}
    for round_number in range(args.repeat):
        for target in targets:
            counted = target == "silt" and args.requests and round_number == 0
            offset = access_log.stat().st_size if access_log.exists() else 0
            calls_before = graveler_calls(metrics_url) if counted and metrics_url else {}
            before = {name: tree_cpu([pid]) for name, pid in servers[target].items()}
            all_before, servers_before = tree_cpu([os.getpid()]), tree_cpu(every_server)
            rounds[target].append(run_job(spark, bases[target], args.rows))
            used = {name: tree_cpu([pid]) - before[name] for name, pid in servers[target].items()}
            used["client"] = tree_cpu([os.getpid()]) - all_before - (tree_cpu(every_server) - servers_before)
            cpu[target].append(used)
            calls_after = graveler_calls(metrics_url) if counted and metrics_url else {}
            parted = count_files(spark, bases[target] + "/parted")
            if parted != PARTITIONS:
                raise SystemExit(f"{target}: the partitioned write made {parted} files, not {PARTITIONS}")
            if counted and access_log.exists():
                requests = gateway_requests(access_log, offset)
                for operation, (count, seconds) in sorted(requests.items()):
                    emit(f"spark.silt.requests.{operation}", count, "requests", None, digits=0)
                    emit(f"spark.silt.request_seconds.{operation}", seconds, "s", None)
                report_graveler_calls(calls_before, calls_after, sum(count for count, _ in requests.values()))
    results = {target: {step: min(r[step] for r in rounds[target]) for step in STEPS} for target in targets}
    for target in targets:
        for step, seconds in results[target].items():
            emit(f"spark.{target}.{step}", seconds, "s", None)
        emit(f"spark.{target}.total", sum(results[target].values()), "s", None)
        # The CPU of the target's quickest round.
        quickest = min(range(len(rounds[target])), key=lambda i: sum(rounds[target][i].values()))
        used = cpu[target][quickest]
        emit(f"spark.{target}.server_cpu", sum(v for name, v in used.items() if name != "client"), "s", None)
        for name, seconds in used.items():
            emit(f"spark.{target}.cpu.{name}", seconds, "s", None)
    return results


def report_graveler_calls(before: dict[str, float], after: dict[str, float], s3_requests: int) -> None:
    """Graveler calls made during the round, per method and per S3 request the gateway answered."""
    calls = {method: after[method] - before.get(method, 0.0) for method in after}
    calls = {method: count for method, count in calls.items() if count > 0}
    for method, count in sorted(calls.items()):
        emit(f"spark.silt.graveler_calls.{method}", count, "calls", None, digits=0)
    if s3_requests:
        emit("spark.silt.graveler_calls_per_s3_request", sum(calls.values()) / s3_requests, "ratio", 1.5)


def report_ratios(results: dict[str, dict[str, float]]) -> None:
    silt = results.get("silt")
    if silt is None:
        return
    for other, target in (("moto", 0.7), ("file", 2.0)):
        if other not in results:
            continue
        for step in STEPS:
            emit(f"spark.silt_over_{other}.{step}", silt[step] / results[other][step], "ratio", target)
        total = sum(silt.values()) / sum(results[other].values())
        emit(f"spark.silt_over_{other}.total", total, "ratio", target)


if __name__ == "__main__":
    main()
