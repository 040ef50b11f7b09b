"""A Parquet file of a few hundred bytes whose first rows decode to gigabytes, previewed through
the running gateway: refused with a clear error, while the gateway's memory stays where it was
and its health check keeps answering (the decoding runs in a bounded child process,
edge/api/preview/sandbox.py)."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import urllib3

from tests.e2e.api.conftest import Api, error_message

MIB = 1024 * 1024
# One dictionary value of 20 MB in every row: a batch of 100 rows decodes to 2 GB.
VALUE_BYTES = 20 * 1000 * 1000
ROWS = 1000
# The gateway may grow by this much while the bomb is previewed (it reads a few hundred bytes).
MAX_GROWTH_BYTES = 200 * MIB
MAX_HEALTH_SECONDS = 2.0
PREVIEW_TIMEOUT_SECONDS = 90.0


def _bomb() -> bytes:
    column = pa.DictionaryArray.from_arrays(pa.array([0] * ROWS, pa.int32()), pa.array(["a" * VALUE_BYTES]))
    out = io.BytesIO()
    pq.write_table(
        pa.table({"s": column}),
        out,
        compression="zstd",
        dictionary_pagesize_limit=1 << 30,
        data_page_size=1 << 30,
        write_statistics=False,
    )
    return out.getvalue()


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def _auth(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")


def test_a_decompression_bomb_is_refused_without_growing_or_stalling_the_gateway(api: Api, repo: str) -> None:
    bomb = _bomb()
    assert len(bomb) < 2048, len(bomb)
    uploaded = api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects?path=bomb.parquet",
        body=bomb,
        headers={**_auth(api), "Content-Type": "application/octet-stream"},
    )
    assert uploaded.status == 201, uploaded.data
    gateway = api.stack.stack.pid("gateway")
    assert gateway is not None
    before = _rss(gateway)

    answers: list[urllib3.BaseHTTPResponse] = []
    done = threading.Event()

    def preview() -> None:
        try:
            answers.append(
                api.http.request(
                    "GET",
                    f"{api.base}/repositories/{repo}/refs/main/objects/preview?path=bomb.parquet",
                    headers=_auth(api),
                    retries=False,
                    timeout=PREVIEW_TIMEOUT_SECONDS,
                )
            )
        finally:
            done.set()

    previewing = threading.Thread(target=preview, name="bomb-preview")
    previewing.start()
    peak = before
    slowest = 0.0
    health = urllib3.PoolManager()
    try:
        # While the preview runs: the gateway's memory, and how long its health check takes.
        while not done.wait(0.05):
            peak = max(peak, _rss(gateway))
            started = time.monotonic()
            live = health.request(
                "GET", f"{api.stack.endpoint}/_silt/health/live", retries=False, timeout=PREVIEW_TIMEOUT_SECONDS
            )
            slowest = max(slowest, time.monotonic() - started)
            assert live.status == 200
            peak = max(peak, _rss(gateway))
    finally:
        previewing.join(PREVIEW_TIMEOUT_SECONDS)
    print(f"gateway RSS {before / MIB:.0f} -> peak {peak / MIB:.0f} MiB; slowest health check {slowest:.3f} s")

    assert answers, "the preview got no answer"
    message = error_message(answers[0], 413)
    assert "too large to preview" in message
    assert peak - before < MAX_GROWTH_BYTES, (before / MIB, peak / MIB)
    assert slowest < MAX_HEALTH_SECONDS, slowest
    # The next preview of a sound file is served as before.
    table = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3]}), table)
    _upload_and_check(api, repo, table.getvalue())


def _upload_and_check(api: Api, repo: str, data: bytes) -> None:
    uploaded = api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects?path=ok.parquet",
        body=data,
        headers={**_auth(api), "Content-Type": "application/octet-stream"},
    )
    assert uploaded.status == 201, uploaded.data
    got = api.request("GET", f"/repositories/{repo}/refs/main/objects/preview?path=ok.parquet", headers=_auth(api))
    assert got.status == 200, got.data
    assert json.loads(got.data)["rows"] == [[1], [2], [3]]
