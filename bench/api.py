"""`make bench-api`: the lakeFS REST API against the S3 gateway on the same port, in the same run,
one JSON object per line.

- 4 KiB uploads and downloads at 32 clients over keep-alive connections: REST
  (`POST .../branches/main/objects`, `GET .../refs/main/objects`, HTTP Basic as lakefs-sdk sends
  it) and S3 (presigned PUT/GET made before the clock starts, so client-side signing does not
  count). The two take turns, round after round, so that other load on the machine falls on
  both alike; the median round counts. Target: REST at least 0.8 of S3.
- Listing N staged objects (staged in process, as bench.gateway does, so that staging is not
  what is measured) through `/objects/ls` pages of 1000 and through ListObjectsV2 pages of
  1000, both as raw HTTP. Target: REST no slower than S3. N defaults to 240,000; BENCH_API_LIST_COUNT (or
  --list-count) makes it small for a quick run.

Only loopback traffic: the stack listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import requests
import urllib3

from bench.graveler import stage_in_process
from bench.report import emit
from edge.api.backend import UploadLimits
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.kv import open_store
from tests.support.gateway_stack import GatewayStack, gateway_stack

BUCKET = "bench-api"
LIST_REPO = "bench-api-list"
SMALL = 4096
PAGE = 1000
TIMEOUT = 60


@dataclass(frozen=True)
class Call:
    method: str
    target: str  # path and query
    headers: dict[str, str]
    expect: int


def _hammer(host: str, port: int, calls: list[Call], body: bytes, threads: int) -> float:
    """Requests per second for the calls spread over `threads` keep-alive connections."""
    local = threading.local()
    failures: list[str] = []

    def one(call: Call) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
        payload = body if call.method in ("PUT", "POST") else None
        conn.request(call.method, call.target, body=payload, headers=call.headers)
        response = conn.getresponse()
        data = response.read()
        if response.status != call.expect:
            failures.append(f"{call.method} {call.target}: HTTP {response.status} {data[:200]!r}")

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, calls))
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return len(calls) / elapsed


def _basic(gw: GatewayStack) -> dict[str, str]:
    secret = gw.admin.secret_access_key.get_secret_value()
    return dict(urllib3.make_headers(basic_auth=f"{gw.admin.access_key_id}:{secret}"))


def _api_calls(gw: GatewayStack, keys: list[str]) -> tuple[list[Call], list[Call]]:
    auth = _basic(gw)
    upload = {**auth, "Content-Type": "application/octet-stream"}
    base = f"/api/v1/repositories/{BUCKET}"
    puts = [Call("POST", f"{base}/branches/main/objects?{urlencode({'path': k})}", upload, 201) for k in keys]
    gets = [Call("GET", f"{base}/refs/main/objects?{urlencode({'path': k})}", auth, 200) for k in keys]
    return puts, gets


def _s3_calls(gw: GatewayStack, keys: list[str]) -> tuple[list[Call], list[Call]]:
    s3 = gw.client()

    def presigned(op: str, method: str, key: str) -> Call:
        url = urlsplit(s3.generate_presigned_url(op, Params={"Bucket": BUCKET, "Key": f"main/{key}"}, ExpiresIn=3600))
        return Call(method, f"{url.path}?{url.query}", {}, 200)

    return [presigned("put_object", "PUT", k) for k in keys], [presigned("get_object", "GET", k) for k in keys]


def bench_small(gw: GatewayStack, count: int, threads: int, rounds: int) -> None:
    parts = urlsplit(gw.endpoint)
    assert parts.hostname == "127.0.0.1" and parts.port, gw.endpoint
    host, port = parts.hostname, parts.port
    body = os.urandom(SMALL)
    rates: dict[str, list[float]] = {"api.put": [], "api.get": [], "s3.put": [], "s3.get": []}
    for round_no in range(-1, rounds):  # round -1 warms connections and caches up; not counted
        size = min(count, 500) if round_no < 0 else count
        api_puts, api_gets = _api_calls(gw, [f"api/{round_no}/{i:06d}" for i in range(size)])
        s3_puts, s3_gets = _s3_calls(gw, [f"s3/{round_no}/{i:06d}" for i in range(size)])
        measured = {
            "s3.put": _hammer(host, port, s3_puts, body, threads),
            "api.put": _hammer(host, port, api_puts, body, threads),
            "s3.get": _hammer(host, port, s3_gets, body, threads),
            "api.get": _hammer(host, port, api_gets, body, threads),
        }
        if round_no >= 0:
            for name, rate in measured.items():
                rates[name].append(rate)
    median = {name: statistics.median(values) for name, values in rates.items()}
    emit(f"api.put_4kib_{threads}_clients", median["api.put"], "req/s", None)
    emit(f"api.get_4kib_{threads}_clients", median["api.get"], "req/s", None)
    emit(f"api.gateway_put_4kib_{threads}_clients", median["s3.put"], "req/s", None)
    emit(f"api.gateway_get_4kib_{threads}_clients", median["s3.get"], "req/s", None)
    emit("api.put_4kib_vs_gateway", median["api.put"] / median["s3.put"], "ratio", 0.8)
    emit("api.get_4kib_vs_gateway", median["api.get"] / median["s3.get"], "ratio", 0.8)


@contextmanager
def _graveler(gw: GatewayStack) -> Iterator[Graveler]:
    """Graveler in this process, over the stack's own store."""
    config = gw.stack.config
    assert config is not None
    kv = open_store(config.database)
    graveler = open_graveler(kv, LocalAdapter(config.blockstore.local.path))
    try:
        yield graveler
    finally:
        graveler.close()
        kv.close()


def _list_api(gw: GatewayStack, session: requests.Session) -> int:
    url = f"{gw.endpoint}/api/v1/repositories/{LIST_REPO}/refs/main/objects/ls"
    listed, after = 0, ""
    while True:
        response = session.get(url, params={"after": after, "amount": str(PAGE)}, timeout=TIMEOUT)
        response.raise_for_status()
        page = json.loads(response.content)
        listed += len(page["results"])
        if not page["pagination"]["has_more"]:
            return listed
        after = page["pagination"]["next_offset"]


def _list_s3(gw: GatewayStack, session: requests.Session) -> int:
    s3 = gw.client()
    listed, token = 0, ""
    while True:
        params = {"Bucket": LIST_REPO, "Prefix": "main/", "MaxKeys": PAGE}
        if token:
            params["ContinuationToken"] = token
        response = session.get(s3.generate_presigned_url("list_objects_v2", Params=params), timeout=TIMEOUT)
        response.raise_for_status()
        body = response.content
        listed += body.count(b"<Contents>")
        start = body.find(b"<NextContinuationToken>")
        if start < 0:
            return listed
        end = body.index(b"</NextContinuationToken>", start)
        token = body[start + len(b"<NextContinuationToken>") : end].decode()


def bench_list(gw: GatewayStack, count: int, rounds: int) -> None:
    gw.client().create_bucket(Bucket=LIST_REPO)
    with _graveler(gw) as graveler:
        # Staging one request at a time would measure uploads, not listing.
        stage_in_process(graveler, LIST_REPO, "main", count)
    api_session = requests.Session()
    api_session.headers.update(_basic(gw))
    s3_session = requests.Session()
    times: dict[str, list[float]] = {"api": [], "s3": []}
    for _ in range(rounds):
        for name, lister, session in (("s3", _list_s3, s3_session), ("api", _list_api, api_session)):
            started = time.perf_counter()
            listed = lister(gw, session)
            times[name].append(time.perf_counter() - started)
            assert listed == count, (name, listed, count)
    api_s, s3_s = statistics.median(times["api"]), statistics.median(times["s3"])
    label = f"{count // 1000}k" if count >= 1000 else str(count)
    emit(f"api.objects_ls_{label}_staged", api_s, "s", None)
    emit(f"api.gateway_list_v2_{label}_staged", s3_s, "s", None)
    emit(f"api.objects_ls_{label}_staged_vs_list_v2", api_s / s3_s, "ratio", 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small-count", type=int, default=5000, help="4 KiB uploads (and downloads) per round")
    # At most as many clients as one process takes uploads at once: past that the API refuses an
    # upload (503 with Retry-After, which lakeFS's clients retry) rather than queue it, and a
    # refused request would end the benchmark.
    parser.add_argument("--threads", type=int, default=UploadLimits().in_flight)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per comparison; the median counts")
    parser.add_argument(
        "--list-count",
        type=int,
        default=int(os.environ.get("BENCH_API_LIST_COUNT", "240000")),
        help="staged objects to list (default: $BENCH_API_LIST_COUNT or 240000)",
    )
    parser.add_argument("--only", default="small,list")
    parser.add_argument("--workers", type=int, default=2, help="gateways.s3.workers")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with (
        tempfile.TemporaryDirectory(prefix="silt-bench-api-") as tmp,
        gateway_stack(Path(tmp) / "stack", workers=args.workers) as gw,
    ):
        gw.client().create_bucket(Bucket=BUCKET)
        if "small" in only:
            bench_small(gw, args.small_count, args.threads, args.rounds)
        if "list" in only:
            bench_list(gw, args.list_count, args.rounds)


if __name__ == "__main__":
    main()
