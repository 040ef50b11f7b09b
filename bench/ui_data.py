"""`make bench-ui-data`: the web UI's data review calls through the REST API on a real stack, one
JSON object per line, each the median of --rounds calls:

- `ui_data.diff_csv_10mib`: a 10 MiB CSV compared with its edited version on its key column
  (all of it: it fits the diff's 16 MiB sample). Target 1 s.
- `ui_data.diff_parquet_100mb`: a 100 MB Parquet file compared with its edited version on its
  key column, on the bounded sample (the first row groups that fit in 16 MiB). Target 2 s.
- `ui_data.query_1m_rows`: a GROUP BY over a Parquet object of 1,000,000 rows. Target 2 s.

Each call starts a fresh sandbox child (edge/api/preview/sandbox.py), as the server does for every job;
the one started ahead is warm when the call comes, as between a user's clicks.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import urllib3

from bench.report import emit
from edge.api.preview.sandbox import START_SECONDS
from tests.support.gateway_stack import GatewayStack, gateway_stack

REPO = "bench-ui-data"
CSV_BYTES = 10 * 1024 * 1024
PARQUET_BYTES = 100 * 1000 * 1000
QUERY_ROWS = 1_000_000
TIMEOUT_S = 120.0


class Client:
    def __init__(self, gw: GatewayStack) -> None:
        secret = gw.admin.secret_access_key.get_secret_value()
        self.headers = dict(urllib3.make_headers(basic_auth=f"{gw.admin.access_key_id}:{secret}"))
        self.base = gw.endpoint + "/api/v1"
        self.http = urllib3.PoolManager()

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json") -> Any:
        headers = {**self.headers, "Content-Type": content_type}
        response = self.http.request(
            method, self.base + path, body=body, headers=headers, timeout=TIMEOUT_S, retries=False
        )
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {response.data[:300]!r}")
        try:
            return json.loads(response.data)
        except ValueError:
            return response.data

    def upload(self, path: str, body: bytes) -> None:
        self.call("POST", f"/repositories/{REPO}/branches/main/objects?path={path}", body, "application/octet-stream")


def _csv(rows: int, edited: bool) -> bytes:
    lines = [b"id,name,score,note"]
    for i in range(rows):
        score = i % 1000 + (1 if edited and i % 997 == 0 else 0)
        lines.append(b"%d,name-%d,%d,some words about row %d" % (i, i % 5000, score, i))
    return b"\n".join(lines) + b"\n"


def _csv_of_size(size: int, edited: bool) -> bytes:
    sample = _csv(1000, edited)
    return _csv(size * 1000 // len(sample), edited)


def _parquet_100mb(edited: bool) -> bytes:
    # Random doubles do not compress: 4 of them per row make the file's size.
    rows = PARQUET_BYTES // 32
    generator = np.random.default_rng(7)
    columns: dict[str, Any] = {"id": np.arange(rows, dtype=np.int64)}
    for name in ("a", "b", "c", "d"):
        columns[name] = generator.random(rows)
    if edited:
        columns["a"][::1009] = -1.0
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, row_group_size=100_000, compression="snappy")
    return out.getvalue()


def _parquet_rows(rows: int) -> bytes:
    generator = np.random.default_rng(11)
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "city": pa.array([f"city-{i % 50}" for i in range(rows)]),
            "value": generator.random(rows),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=250_000)
    return out.getvalue()


def _stage(client: Client) -> None:
    client.call("POST", "/repositories", json.dumps({"name": REPO, "storage_namespace": f"local://{REPO}"}).encode())
    client.upload("t/people.csv", _csv_of_size(CSV_BYTES, edited=False))
    client.upload("t/big.parquet", _parquet_100mb(edited=False))
    client.upload("t/rows.parquet", _parquet_rows(QUERY_ROWS))
    client.call("POST", f"/repositories/{REPO}/branches/main/commits", json.dumps({"message": "base"}).encode())
    client.call("POST", f"/repositories/{REPO}/branches", json.dumps({"name": "base", "source": "main"}).encode())
    client.upload("t/people.csv", _csv_of_size(CSV_BYTES, edited=True))
    client.upload("t/big.parquet", _parquet_100mb(edited=True))


def _timed(client: Client, rounds: int, method: str, path: str, body: bytes | None = None) -> tuple[float, Any]:
    answer: Any = None
    samples = []
    # The first call also starts the spare child the next one takes: not counted.
    client.call(method, path, body)
    for _ in range(rounds):
        # Between a user's clicks the spare child has started: so it has here.
        time.sleep(min(START_SECONDS, 2.0))
        started = time.perf_counter()
        answer = client.call(method, path, body)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), answer


def bench(client: Client, rounds: int) -> None:
    diff = f"/repositories/{REPO}/refs/base/diff/main/object"
    took, answer = _timed(client, rounds, "GET", f"{diff}?path=t/people.csv&key=id")
    assert answer["counts"]["changed"] > 0 and answer["sample"]["right"]["complete"], answer["sample"]
    emit("ui_data.diff_csv_10mib", took, "s", 1.0)
    took, answer = _timed(client, rounds, "GET", f"{diff}?path=t/big.parquet&key=id")
    assert answer["counts"]["changed"] > 0 and not answer["sample"]["right"]["complete"], answer["sample"]
    emit("ui_data.diff_parquet_100mb", took, "s", 2.0)
    sql = "SELECT city, count(*) AS n, avg(value) AS mean FROM data GROUP BY city ORDER BY city"
    query = f"/repositories/{REPO}/refs/main/objects/query?path=t/rows.parquet"
    took, answer = _timed(client, rounds, "POST", query, json.dumps({"sql": sql, "page": 0}).encode())
    assert answer["total"] == 50 and answer["sample"]["rows"] == QUERY_ROWS, answer["sample"]
    emit("ui_data.query_1m_rows", took, "s", 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="calls per figure; the median counts")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="silt-bench-ui-data-") as tmp,
        gateway_stack(Path(tmp) / "stack") as gw,
    ):
        client = Client(gw)
        _stage(client)
        bench(client, args.rounds)


if __name__ == "__main__":
    main()
