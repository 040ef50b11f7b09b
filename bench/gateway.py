"""`make bench-gateway`: the S3 gateway as a real server process, one JSON object per line.

Auth, graveler and the gateway run as processes (tests/support/gateway_stack.py). Large
transfers use curl against both the gateway and nginx (a loopback nginx with a temporary
config, when `nginx` is installed), so that the ratio compares the servers, not the clients.
Small-object rates use 32 client threads over keep-alive connections with presigned URLs
made before the clock starts, so that client-side signing does not count against the server.
The latency section sends the requests S3A's committer makes one after another (HEAD of an
object, HEAD of a missing key, a one-key LIST, a 4 KiB PUT) from one keep-alive connection to
Silt and to moto_server in turn: what a Spark job's sequential metadata calls wait for.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import boto3
import botocore.session
import requests
from botocore.config import Config as BotoConfig

from bench.processes import cpu_seconds, process_tree
from bench.report import emit
from bench.turns import balanced_rounds, turn_order
from silt.free_ports import free_port
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.moto import _stop, moto_client, start_moto_server

MIB = 1024 * 1024
_Sent = TypeVar("_Sent")
NGINX_CONF = """
worker_processes 1;
{user}
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    sendfile on;
    client_body_temp_path {root}/body;
    client_max_body_size 0;
    server {{
        listen 127.0.0.1:{port};
        root {root}/www;
        location / {{ dav_methods PUT; create_full_put_path on; }}
    }}
}}
"""


def curl(*args: str) -> float:
    """Seconds curl took for one transfer."""
    done = subprocess.run(
        ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{time_total}", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def best_of(n: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(n))


class Nginx:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "www").mkdir(parents=True)
        (root / "body").mkdir()
        self.port = free_port()
        conf = root / "nginx.conf"
        # As root, nginx's workers would drop to `nobody`, who cannot write into our temp dir.
        user = "user root;" if os.geteuid() == 0 else ""
        conf.write_text(NGINX_CONF.format(root=root, port=self.port, user=user))
        self.proc = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(root)], stderr=subprocess.DEVNULL)
        time.sleep(0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def md5_seconds(block: bytes, count: int) -> float:
    """Seconds one MD5 takes over count blocks (a single-part PUT's ETag is one such digest)."""
    started = time.perf_counter()
    digest = hashlib.md5(usedforsecurity=False)
    for _ in range(count):
        digest.update(block)
    return time.perf_counter() - started


def bench_large(gw: GatewayStack, workdir: Path, size_mib: int) -> None:
    path = workdir / "large.bin"
    with open(path, "wb") as f:
        block = os.urandom(MIB)
        for _ in range(size_mib):
            f.write(block)
    user = f"{gw.admin.access_key_id}:{gw.admin.secret_access_key.get_secret_value()}"
    sign = ["--aws-sigv4", f"aws:amz:{gw.region}:s3", "--user", user, "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    url = f"{gw.endpoint}/bench/main/large.bin"
    gw_put = best_of(3, lambda: curl(*sign, "-T", str(path), url))
    gw_get = best_of(3, lambda: curl(*sign, url))
    # A single-part PUT's ETag is the MD5 of its bytes, one digest that no thread can share, so
    # no PUT beats one MD5 here; nginx hashes nothing, so its PUT rate over the MD5 rate is the
    # best ratio to nginx this machine allows (the disk's fsync may cap it lower).
    md5 = best_of(3, lambda: md5_seconds(block, size_mib))
    size = size_mib * MIB
    emit(f"gateway.put_{size_mib}mib", size / gw_put / MIB, "MiB/s", None)
    emit(f"gateway.get_{size_mib}mib", size / gw_get / MIB, "MiB/s", None)
    emit(f"md5_{size_mib}mib", size / md5 / MIB, "MiB/s", None)
    if shutil.which("nginx") is None:
        print(json.dumps({"note": "nginx not installed: no GET/PUT ratios"}), flush=True)
        return
    nginx = Nginx(workdir / "nginx")
    try:
        nginx_put = best_of(3, lambda: curl("-T", str(path), f"{nginx.url}/large.bin"))
        nginx_get = best_of(3, lambda: curl(f"{nginx.url}/large.bin"))
    finally:
        nginx.stop()
    emit(f"nginx.put_{size_mib}mib", size / nginx_put / MIB, "MiB/s", None)
    emit(f"nginx.get_{size_mib}mib", size / nginx_get / MIB, "MiB/s", None)
    emit(f"gateway.get_{size_mib}mib_vs_nginx", nginx_get / gw_get, "ratio", 0.5)
    emit(f"gateway.put_{size_mib}mib_vs_nginx", nginx_put / gw_put, "ratio", 0.6)
    emit(f"gateway.put_{size_mib}mib_vs_nginx_md5_ceiling", nginx_put / md5, "ratio", None)
    path.unlink()


def _hammer(urls: list[tuple[str, str]], body: bytes, threads: int) -> float:
    """Requests per second for (method, url) pairs spread over `threads` keep-alive connections."""
    local = threading.local()
    failures: list[int] = []

    def one(item: tuple[str, str]) -> None:
        method, url = item
        parts = urlsplit(url)
        conn = getattr(local, "conn", None)
        if conn is None:
            assert parts.hostname, url
            conn = local.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        conn.request(method, f"{parts.path}?{parts.query}", body=body if method == "PUT" else None)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            failures.append(response.status)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, urls))
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, e.g. HTTP {failures[0]}")
    return len(urls) / elapsed


def bench_small(gw: GatewayStack, count: int, threads: int) -> None:
    s3 = gw.client()
    body = os.urandom(4096)

    def presign(method: str, i: int) -> tuple[str, str]:
        op = "put_object" if method == "PUT" else "get_object"
        params = {"Bucket": "bench", "Key": f"main/small/{i:06d}"}
        return method, s3.generate_presigned_url(op, Params=params, ExpiresIn=3600)

    puts = [presign("PUT", i) for i in range(count)]
    gets = [presign("GET", i) for i in range(count)]
    for name, urls, target in (("put", puts, 1000), ("get", gets, 2500)):
        before, client_before = _service_cpu(gw), _own_cpu()
        emit(f"gateway.{name}_4kib_32_clients", _hammer(urls, body, threads), "req/s", target)
        used = {service: seconds - before[service] for service, seconds in _service_cpu(gw).items()}
        used["client"] = _own_cpu() - client_before
        for process, seconds in used.items():
            emit(f"gateway.{name}_4kib.cpu_ms_per_request.{process}", seconds * 1000 / len(urls), "ms", None)
        # What the processes' CPU time alone allows on this machine's cores: the ceiling that
        # no amount of concurrency gets past, whatever the machine's load.
        ceiling = (os.cpu_count() or 1) * len(urls) / sum(used.values())
        emit(f"gateway.{name}_4kib.cpu_bound_ceiling", ceiling, "req/s", None)


LATENCY_PROBES = ("head_object", "head_missing", "list_one", "put_4kib")


def _probe_urls(s3: Any, bucket: str, prefix: str, count: int) -> dict[str, list[tuple[str, str]]]:
    """Presigned (method, url) pairs per probe, count of each."""

    def url(method: str, op: str, **params: Any) -> tuple[str, str]:
        return method, s3.generate_presigned_url(op, Params={"Bucket": bucket, **params}, ExpiresIn=3600)

    return {
        "head_object": [url("HEAD", "head_object", Key=f"{prefix}lat/object") for _ in range(count)],
        "head_missing": [url("HEAD", "head_object", Key=f"{prefix}lat/missing-{i}") for i in range(count)],
        "list_one": [
            url("GET", "list_objects_v2", Prefix=f"{prefix}lat/dir-{i}/", Delimiter="/", MaxKeys=1)
            for i in range(count)
        ],
        "put_4kib": [url("PUT", "put_object", Key=f"{prefix}lat/put-{i}") for i in range(count)],
    }


def _sequential_ms(urls: list[tuple[str, str]], body: bytes, answers: tuple[int, ...] = (200, 404)) -> list[float]:
    """Milliseconds of each request, sent one after another on one keep-alive connection; an
    answer outside answers (a missing key's 404 is one by default) ends the run."""
    parts = urlsplit(urls[0][1])
    assert parts.hostname, urls[0][1]
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    took = []
    try:
        for method, url in urls:
            target = urlsplit(url)
            started = time.perf_counter()
            conn.request(method, f"{target.path}?{target.query}", body=body if method == "PUT" else None)
            response = conn.getresponse()
            response.read()
            took.append((time.perf_counter() - started) * 1000)
            if response.status not in answers:
                raise RuntimeError(f"{method} {target.path}: HTTP {response.status}")
    finally:
        conn.close()
    return took


def bench_latency(gw: GatewayStack, workdir: Path, count: int, rounds: int) -> None:
    """p50 of sequential requests per probe, Silt against moto_server, rounds interleaved; and the
    CPU each Silt process spends per request, which is most of the wait on an idle machine."""
    body = os.urandom(4096)
    moto_process, moto_endpoint = start_moto_server(workdir / "moto.log")
    try:
        moto = moto_client(moto_endpoint)
        moto.create_bucket(Bucket="bench-moto")
        moto.put_object(Bucket="bench-moto", Key="lat/object", Body=body)
        silt = gw.client()
        silt.put_object(Bucket="bench", Key="main/lat/object", Body=body)
        p50: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for round_no in range(rounds):
            targets = (("silt", silt, "bench", f"main/r{round_no}/"), ("moto", moto, "bench-moto", f"r{round_no}/"))
            for name, client, bucket, prefix in targets:
                for probe, urls in _probe_urls(client, bucket, prefix, count).items():
                    _sequential_ms(urls[: count // 10], body)  # warm up
                    before = _service_cpu(gw)
                    took = _sequential_ms(urls, body)
                    p50.setdefault((name, probe), []).append(statistics.median(took))
                    if name == "silt":
                        for service, seconds in _service_cpu(gw).items():
                            per_request = (seconds - before[service]) * 1000 / len(urls)
                            cpu.setdefault((service, probe), []).append(per_request)
        for probe in LATENCY_PROBES:
            for name in ("silt", "moto"):
                emit(f"gateway.latency.{probe}.{name}_p50", statistics.median(p50[name, probe]), "ms", None)
            ratios = [s / m for s, m in zip(p50["silt", probe], p50["moto", probe], strict=True)]
            emit(f"gateway.latency.{probe}.silt_over_moto_min", min(ratios), "ratio", None)
            emit(f"gateway.latency.{probe}.silt_over_moto_median", statistics.median(ratios), "ratio", 0.7)
            emit(f"gateway.latency.{probe}.silt_over_moto_max", max(ratios), "ratio", None)
            for service in ("gateway", "graveler", "auth"):
                emit(
                    f"gateway.latency.{probe}.cpu_ms_per_request.{service}",
                    statistics.median(cpu[service, probe]),
                    "ms",
                    None,
                )
    finally:
        _stop(moto_process)


def _is_export_process(pid: int) -> bool:
    try:
        return b"silt.telemetry.export_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _service_cpu(gw: GatewayStack) -> dict[str, float]:
    """CPU seconds used so far by each service's processes (the gateway's workers included), and
    under "export" the part of it in span export processes (silt/telemetry/export_process.py)."""
    used = {"export": 0.0}
    for service in ("gateway", "graveler", "auth"):
        pid = gw.stack.pid(service)
        used[service] = 0.0
        for p in process_tree(pid) if pid is not None else []:
            seconds = cpu_seconds(p)
            used[service] += seconds
            if _is_export_process(p):
                used["export"] += seconds
    return used


def _own_cpu() -> float:
    return time.process_time()


def _small_rates(gw: GatewayStack, count: int, threads: int, round_no: int) -> tuple[float, float]:
    """(PUT, GET) requests per second of 4 KiB objects, on fresh keys each round."""
    put_rate, get_rate, *_ = _small_rates_and_cpu(gw, count, threads, round_no)
    return put_rate, get_rate


def _small_rates_and_cpu(
    gw: GatewayStack, count: int, threads: int, round_no: int
) -> tuple[float, float, float, float, float, float]:
    """(PUT, GET) requests per second of 4 KiB objects, on fresh keys each round, then the CPU
    milliseconds the stack's processes (gateway, graveler, auth) spent per PUT and per GET,
    then the part of those in span export processes."""
    s3 = gw.client()
    body = os.urandom(4096)
    keys = [f"main/telemetry/{round_no}/{i:06d}" for i in range(count)]
    puts = [("PUT", s3.generate_presigned_url("put_object", Params={"Bucket": "bench", "Key": k})) for k in keys]
    gets = [("GET", s3.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": k})) for k in keys]
    put_rate, put_cpu, put_export = _with_stack_cpu(gw, functools.partial(_hammer, puts, body, threads), count)
    get_rate, get_cpu, get_export = _with_stack_cpu(gw, functools.partial(_hammer, gets, body, threads), count)
    return put_rate, get_rate, put_cpu, get_cpu, put_export, get_export


def _with_stack_cpu(gw: GatewayStack, send: Callable[[], _Sent], count: int) -> tuple[_Sent, float, float]:
    """What send() gave, then the CPU milliseconds per request the stack's processes spent while
    it sent count requests, then the part of those in span export processes."""
    before = _service_cpu(gw)
    sent = send()
    after = _service_cpu(gw)
    export = (after.pop("export") - before.pop("export")) * 1000 / count
    return sent, (sum(after.values()) - sum(before.values())) * 1000 / count, export


def _sequential_cpu(
    gw: GatewayStack, count: int, round_no: int, stored: list[str]
) -> tuple[float, float, float, float]:
    """4 KiB GETs of the keys stored, then PUTs of fresh keys, count of each, one at a time on one
    connection: the CPU milliseconds the stack's processes spent per PUT and per GET, then the
    part of those in span export processes. Without concurrency, a request's cost is the same
    whatever else the machine does between requests, which a throughput under 32 clients is
    not. The GETs go first: what the PUTs leave behind (history events flushed every 0.2 s) falls
    before the stack's next turn, not into its GETs."""
    s3 = gw.client()
    body = os.urandom(4096)
    fresh = [f"main/telemetry-sequential/{round_no}/{i:06d}" for i in range(count)]
    read = [stored[i % len(stored)] for i in range(count)]
    gets = [("GET", s3.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": k})) for k in read]
    puts = [("PUT", s3.generate_presigned_url("put_object", Params={"Bucket": "bench", "Key": k})) for k in fresh]
    one_at_a_time = functools.partial(_sequential_ms, body=body, answers=(200,))
    _, get_cpu, get_export = _with_stack_cpu(gw, functools.partial(one_at_a_time, gets), count)
    _, put_cpu, put_export = _with_stack_cpu(gw, functools.partial(one_at_a_time, puts), count)
    return put_cpu, get_cpu, put_export, get_export


def _telemetry_overrides(mode: str) -> dict[str, Any]:
    if mode == "off":
        return {}
    overrides: dict[str, Any] = {
        "gateways": {"s3": {"metrics_listen_address": f"127.0.0.1:{free_port()}"}},
        "auth": {"metrics_listen_address": f"127.0.0.1:{free_port()}"},
        "graveler": {"metrics_listen_address": f"127.0.0.1:{free_port()}"},
    }
    if mode.startswith("tracing"):
        overrides["telemetry"] = {"tracing": True}
    return overrides


# The span processor's batching delay, the SDK's default (OTEL_BSP_SCHEDULE_DELAY), as in production.
EXPORT_DELAY_SECONDS = 5

# tracing_inproc: tracing every request with OTLP export in the serving processes themselves
# (SILT_TRACES_EXPORT_PROCESS=0), to compare with the export process in the same rounds.
TELEMETRY_MODES = ("off", "metrics", "tracing", "tracing_10pct", "tracing_inproc")


def bench_telemetry(
    workdir: Path,
    count: int,
    threads: int,
    workers: int,
    rounds: int | None,
    modes: tuple[str, ...] = TELEMETRY_MODES,
    sequential_count: int = 500,
) -> None:
    """Throughput of 4 KiB PUT/GET with telemetry off, metrics only, and tracing (every request
    sampled — the target's case — or one in ten, exported over OTLP/gRPC to a receiver in this
    process) plus metrics.

    The stacks run side by side and take turns, round after round, in the orders of a Williams
    design (bench/turns.py), so that load from anything else on the machine, the stack before
    included, falls on all of them alike. In a fixed order, in two runs of two modes, the stack
    going second paid 11-15 % more CPU per PUT than the first whichever mode it ran: an order
    effect or chance, which a balanced order keeps from favouring either. A mode's cost is
    computed per round against that round's "off" figure; min, median and max over the rounds
    are reported. Before those
    rounds, as many rounds send sequential_count PUTs and GETs one at a time to each stack in
    turn (0: none), whose CPU per request is the mode's cost without the contention of 32
    clients on 2 cores.
    """
    from tests.support.otlp import OtlpReceiver, environment, otel_env

    if "off" not in modes or not set(modes) <= set(TELEMETRY_MODES):
        raise ValueError(f"--telemetry-modes: off (the baseline) and any of {', '.join(TELEMETRY_MODES)}")
    # parentbased: the gateway decides once per trace; graveler and auth follow its decision.
    samplers = {
        "tracing": "parentbased_always_on",
        "tracing_10pct": "parentbased_traceidratio",
        "tracing_inproc": "parentbased_always_on",
    }
    rounds = rounds or balanced_rounds(len(modes))
    rates: dict[str, list[tuple[float, float, float, float, float, float]]] = {mode: [] for mode in modes}
    with contextlib.ExitStack() as stacks, OtlpReceiver() as receiver:
        running = {}
        for mode in modes:
            # The SDK's default batching (every EXPORT_DELAY_SECONDS or 512 spans).
            env = (
                otel_env(receiver, sampler=samplers[mode], delay_ms=EXPORT_DELAY_SECONDS * 1000)
                if mode in samplers
                else {}
            )
            if mode == "tracing_10pct":
                env["OTEL_TRACES_SAMPLER_ARG"] = "0.1"
            if mode == "tracing_inproc":
                env["SILT_TRACES_EXPORT_PROCESS"] = "0"
            with environment(env):
                running[mode] = stacks.enter_context(
                    gateway_stack(workdir / f"telemetry-{mode}", workers=workers, overrides=_telemetry_overrides(mode))
                )
            running[mode].client().create_bucket(Bucket="bench")
        for mode in modes:  # warm-up: connections, caches, first files
            _small_rates(running[mode], min(count, 500), threads, -1)
        sequential: dict[str, list[tuple[float, float, float, float]]] = {mode: [] for mode in modes}
        sequential_export: dict[str, float] = {}
        if sequential_count:
            # Before any burst, and once the warm-up's spans are exported (the batches' delay):
            # what a burst leaves behind (batches, flushes, checkpoints) would be counted as the
            # requests that follow it, and moved these figures by a third from round to round.
            time.sleep(EXPORT_DELAY_SECONDS + 1)
            stored = [f"main/telemetry/-1/{i:06d}" for i in range(min(count, 500))]  # the warm-up's keys
            exported = {mode: _service_cpu(running[mode])["export"] for mode in modes}
            for round_no in range(rounds):
                for mode in turn_order(modes, round_no):
                    sequential[mode].append(_sequential_cpu(running[mode], sequential_count, round_no, stored))
            # A batch is exported when it is full or its delay ends, often in another stack's turn:
            # the export processes' CPU is counted over all the rounds, their last batches included.
            time.sleep(EXPORT_DELAY_SECONDS + 1)
            requests = 2 * sequential_count * rounds
            for mode in modes:
                spent = _service_cpu(running[mode])["export"] - exported[mode]
                sequential_export[mode] = spent * 1000 / requests
        for round_no in range(rounds):
            for mode in turn_order(modes, round_no):
                rates[mode].append(_small_rates_and_cpu(running[mode], count, threads, round_no))
        spans = len(receiver.spans())
    for mode in modes:
        for i, op in enumerate(("put", "get")):
            emit(f"gateway.telemetry_{mode}.{op}_4kib", statistics.median(r[i] for r in rates[mode]), "req/s", None)
            cpu = statistics.median(r[i + 2] for r in rates[mode])
            emit(f"gateway.telemetry_{mode}.{op}_4kib.cpu_ms_per_request", cpu, "ms", None)
            if any(r[i + 4] for r in rates[mode]):
                export = statistics.median(r[i + 4] for r in rates[mode])
                emit(f"gateway.telemetry_{mode}.{op}_4kib.export_cpu_ms_per_request", export, "ms", None)
    targets = {"metrics": 2.0, "tracing": 10.0, "tracing_inproc": 10.0}
    for mode in modes:
        if mode == "off":
            continue
        for i, op in enumerate(("put", "get")):
            losses = sorted(100.0 * (1.0 - r[i] / off[i]) for r, off in zip(rates[mode], rates["off"], strict=True))
            name = f"gateway.{mode}_overhead.{op}_4kib"
            emit(name, statistics.median(losses), "% throughput lost", targets.get(mode), digits=1)
            print(
                json.dumps(
                    {"name": name, "min": round(losses[0], 1), "max": round(losses[-1], 1), "rounds": len(losses)}
                ),
                flush=True,
            )
            # The same cost as the services' own CPU per request: what tracing adds to the stack,
            # whatever else (the load client, this process's OTLP receiver) shares the cores.
            extra = sorted(
                100.0 * (r[i + 2] / off[i + 2] - 1.0) for r, off in zip(rates[mode], rates["off"], strict=True)
            )
            cpu_name = f"gateway.{mode}_cpu_overhead.{op}_4kib"
            emit(cpu_name, statistics.median(extra), "% more CPU per request", None, digits=1)
            print(
                json.dumps({"name": cpu_name, "min": round(extra[0], 1), "max": round(extra[-1], 1)}),
                flush=True,
            )
            # Without the span export processes: what the serving processes themselves pay.
            serving = sorted(
                100.0 * ((r[i + 2] - r[i + 4]) / off[i + 2] - 1.0)
                for r, off in zip(rates[mode], rates["off"], strict=True)
            )
            serving_name = f"gateway.{mode}_serving_cpu_overhead.{op}_4kib"
            emit(serving_name, statistics.median(serving), "% more CPU per request", None, digits=1)
            print(
                json.dumps({"name": serving_name, "min": round(serving[0], 1), "max": round(serving[-1], 1)}),
                flush=True,
            )
    if sequential_count:
        _emit_sequential_telemetry(sequential, sequential_export)
    print(json.dumps({"note": f"the tracing runs exported {spans} spans to the local OTLP receiver"}), flush=True)


def _emit_sequential_telemetry(
    sequential: dict[str, list[tuple[float, float, float, float]]], exported: dict[str, float]
) -> None:
    """The CPU per request of one request at a time in the serving processes, per mode, and each
    mode's against "off" in the same round (min, median and max over the rounds); and the span
    export processes' CPU per request (PUTs and GETs together) over all the rounds."""
    for mode, runs in sequential.items():
        if exported.get(mode):
            emit(f"gateway.telemetry_{mode}.sequential_export_cpu_ms_per_request", exported[mode], "ms", None)
        for i, op in enumerate(("put", "get")):
            serving = [r[i] - r[i + 2] for r in runs]
            name = f"gateway.telemetry_{mode}.{op}_4kib.sequential_serving_cpu_ms_per_request"
            emit(name, statistics.median(serving), "ms", None)
            if mode == "off":
                continue
            off = [r[i] - r[i + 2] for r in sequential["off"]]
            extra = sorted(100.0 * (one / base - 1.0) for one, base in zip(serving, off, strict=True))
            extra_name = f"gateway.{mode}_sequential_serving_cpu_overhead.{op}_4kib"
            emit(extra_name, statistics.median(extra), "% more CPU per request", None, digits=1)
            print(json.dumps({"name": extra_name, "min": round(extra[0], 1), "max": round(extra[-1], 1)}), flush=True)


def bench_list(gw: GatewayStack, count: int) -> None:
    from bench.graveler import stage_in_process
    from engine.open import open_graveler
    from silt.block.local import LocalAdapter
    from silt.kv import open_store

    assert gw.stack.config is not None
    s3 = gw.client()
    s3.create_bucket(Bucket="bench-list")
    config = gw.stack.config
    kv = open_store(config.database)
    graveler = open_graveler(kv, LocalAdapter(config.blockstore.local.path))
    try:
        # Staging 240,000 entries one request at a time would measure PutObject, not listing.
        stage_in_process(graveler, "bench-list", "main", count)
    finally:
        graveler.close()
        kv.close()
    # The server's share: the same pages over plain HTTP, without botocore's XML parsing.
    session = requests.Session()
    started = time.perf_counter()
    listed, token = 0, None
    while True:
        params = {"Bucket": "bench-list", "Prefix": "main/", **({"ContinuationToken": token} if token else {})}
        body = session.get(s3.generate_presigned_url("list_objects_v2", Params=params), timeout=60).content
        listed += body.count(b"<Contents>")
        match = re.search(rb"<NextContinuationToken>(.*?)</NextContinuationToken>", body)
        if match is None:
            break
        token = match.group(1).decode()
    assert listed == count, (listed, count)
    emit(f"gateway.list_v2_{count // 1000}k_staged.raw_http", time.perf_counter() - started, "s", 2.5)
    for name, client in (("", s3), (".fast_timestamps", _fast_timestamp_client(gw))):
        started = time.perf_counter()
        listed = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench-list", Prefix="main/"):
            listed += page["KeyCount"]
        elapsed = time.perf_counter() - started
        assert listed == count, (listed, count)
        emit(f"gateway.list_v2_paginator_{count // 1000}k_staged{name}", elapsed, "s", 10.0)


def _fast_timestamp_client(gw: GatewayStack) -> Any:
    """boto3 with botocore's documented timestamp-parser hook set to datetime.fromisoformat.

    By default botocore parses every LastModified with dateutil (~75 us each), which alone
    costs ~18 s of client CPU for 240,000 keys; this variant shows what the server does.
    """
    session = botocore.session.Session()
    session.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=lambda value: datetime.fromisoformat(value.replace("Z", "+00:00"))
    )
    return boto3.Session(botocore_session=session).client(
        "s3",
        endpoint_url=gw.endpoint,
        aws_access_key_id=gw.admin.access_key_id,
        aws_secret_access_key=gw.admin.secret_access_key.get_secret_value(),
        region_name=gw.region,
        config=BotoConfig(s3={"addressing_style": "path"}),
    )


def bench_memory(gw: GatewayStack, workdir: Path, size_mib: int) -> None:
    path = workdir / "huge.bin"
    with open(path, "wb") as f:
        f.truncate(size_mib * MIB)  # sparse: the disk is not what is measured
    user = f"{gw.admin.access_key_id}:{gw.admin.secret_access_key.get_secret_value()}"
    sign = ["--aws-sigv4", f"aws:amz:{gw.region}:s3", "--user", user, "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    pid = gw.stack.pid("gateway")
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        curl(*sign, "-T", str(path), f"{gw.endpoint}/bench/main/huge.bin")
    finally:
        done.set()
        sampler.join()
        path.unlink()
    emit(f"gateway.peak_rss_during_{size_mib // 1024}gib_upload", peak[0] / 1024, "MiB", 200)


def _rss_kib(pid: int | None) -> int:
    """The largest RSS among the gateway and its worker processes (the upload runs in one of them)."""
    peak = 0
    for one in process_tree(pid) if pid is not None else []:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak = max(peak, int(line.split()[1]))
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--small-count", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--list-count", type=int, default=240_000)
    parser.add_argument("--memory-mib", type=int, default=2048)
    parser.add_argument("--only", default="large,small,latency,list,memory,telemetry")
    parser.add_argument("--latency-count", type=int, default=500, help="sequential requests per probe and round")
    parser.add_argument("--latency-rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="gateways.s3.workers")
    parser.add_argument("--telemetry-count", type=int, default=2000, help="4 KiB PUTs and GETs per telemetry round")
    parser.add_argument(
        "--telemetry-rounds",
        type=int,
        default=None,
        help="rounds of turns (default: the fewest, at least 4, that balance the modes' order)",
    )
    parser.add_argument(
        "--telemetry-sequential-count",
        type=int,
        default=500,
        help="4 KiB PUTs and GETs sent one at a time per telemetry round and mode (0: none)",
    )
    parser.add_argument(
        "--telemetry-modes",
        default="off,metrics,tracing,tracing_10pct",
        help="stacks compared, among " + ",".join(TELEMETRY_MODES),
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="silt-bench-gw-") as tmp:
        workdir = Path(tmp)
        if "telemetry" in only:
            modes = tuple(args.telemetry_modes.split(","))
            bench_telemetry(
                workdir,
                args.telemetry_count,
                args.threads,
                args.workers,
                args.telemetry_rounds,
                modes,
                args.telemetry_sequential_count,
            )
            only.discard("telemetry")
            if not only:
                return
        with gateway_stack(workdir / "stack", workers=args.workers) as gw:
            gw.client().create_bucket(Bucket="bench")
            if "large" in only:
                bench_large(gw, workdir, args.large_mib)
            if "small" in only:
                bench_small(gw, args.small_count, args.threads)
            if "latency" in only:
                bench_latency(gw, workdir, args.latency_count, args.latency_rounds)
            if "memory" in only:
                bench_memory(gw, workdir, args.memory_mib)
            if "list" in only:
                bench_list(gw, args.list_count)


if __name__ == "__main__":
    main()
