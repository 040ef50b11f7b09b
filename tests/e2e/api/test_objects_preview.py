"""Silt's preview endpoint over the wire (a Parquet object's schema and first rows, typed 400s
for anything else), and objects served so an uploaded page never runs in the UI's origin."""

from __future__ import annotations

import concurrent.futures
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import urllib3

from tests.e2e.api.conftest import Api, error_message
from tests.support.wait import wait_until

BURST = 32


def _auth(api: Api, creds: object = None) -> dict[str, str]:
    user = creds or api.stack.admin
    return urllib3.make_headers(basic_auth=f"{user.access_key_id}:{user.secret_access_key.get_secret_value()}")  # type: ignore[attr-defined]


def _upload(api: Api, repo: str, path: str, body: bytes, content_type: str) -> None:
    response = api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects?path={path}",
        body=body,
        headers={**_auth(api), "Content-Type": content_type},
    )
    assert response.status == 201, response.data


def _preview(api: Api, repo: str, path: str, creds: object = None) -> urllib3.BaseHTTPResponse:
    return api.request("GET", f"/repositories/{repo}/refs/main/objects/preview?path={path}", headers=_auth(api, creds))


def _parquet(table: pa.Table, row_group_size: int) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=row_group_size)
    return out.getvalue()


def test_parquet_schema_and_first_hundred_rows(api: Api, repo: str) -> None:
    table = pa.table({"id": list(range(5_000)), "city": [f"city {i}" for i in range(5_000)]})
    _upload(api, repo, "t/cities.parquet", _parquet(table, 1_000), "application/octet-stream")
    response = _preview(api, repo, "t/cities.parquet", api.stack.reader)  # reading is enough
    assert response.status == 200, response.data
    answer = json.loads(response.data)
    assert answer["path"] == "t/cities.parquet"
    assert answer["schema"] == [{"name": "id", "type": "int64"}, {"name": "city", "type": "string"}]
    assert answer["rows"][:2] == [[0, "city 0"], [1, "city 1"]] and len(answer["rows"]) == 100
    assert answer["total_rows"] == 5_000 and answer["row_groups"] == 5


def test_not_parquet_too_large_missing_and_bad_input(api: Api, repo: str) -> None:
    _upload(api, repo, "a.csv", b"a,b\n1,2\n", "text/csv")
    assert "not a Parquet file" in error_message(_preview(api, repo, "a.csv"), 400)
    # One incompressible row group of 17 MiB: more than the 16 MiB a preview may read.
    blob = pa.table({"blob": pa.array([os.urandom(1024 * 1024) for _ in range(17)], pa.binary())})
    _upload(api, repo, "big.parquet", _parquet(blob, 100), "application/octet-stream")
    assert "too large to preview" in error_message(_preview(api, repo, "big.parquet"), 400)
    error_message(_preview(api, repo, "missing.parquet"), 404)
    error_message(api.request("GET", f"/repositories/{repo}/refs/main/objects/preview", headers=_auth(api)), 400)
    error_message(api.request("GET", f"/repositories/{repo}/refs/main/objects/preview?path=a.csv", headers={}), 401)


def test_an_uploaded_page_is_served_sandboxed(api: Api, repo: str) -> None:
    page = b"<html><body><script>document.title='ran'</script></body></html>"
    _upload(api, repo, "evil.html", page, "text/html")
    got = api.request("GET", f"/repositories/{repo}/refs/main/objects?path=evil.html", headers=_auth(api))
    assert got.status == 200 and got.data == page
    # A sandboxed document has an opaque origin and runs no script; nosniff keeps types as sent.
    assert got.headers["Content-Security-Policy"] == "sandbox"
    assert got.headers["X-Content-Type-Options"] == "nosniff"


def test_previews_beyond_the_process_cap_are_refused_with_503(api: Api, repo: str) -> None:
    # One user's burst meets the per-user cap (2) before the process's (4): both answer this way.
    # A first row group of 15 MiB of random bytes: each preview reads all of it.
    blob = pa.table({"blob": pa.array([os.urandom(1024 * 1024) for _ in range(15)], pa.binary())})
    _upload(api, repo, "heavy.parquet", _parquet(blob, 100), "application/octet-stream")
    pool = urllib3.PoolManager(maxsize=BURST)

    def burst() -> list[int] | None:
        with concurrent.futures.ThreadPoolExecutor(BURST) as workers:
            answers = list(
                workers.map(
                    lambda _: pool.request(
                        "GET",
                        f"{api.base}/repositories/{repo}/refs/main/objects/preview?path=heavy.parquet",
                        headers=_auth(api),
                        timeout=60,
                    ),
                    range(BURST),
                )
            )
        statuses = [answer.status for answer in answers]
        assert set(statuses) <= {200, 503}, statuses
        busy = [a for a in answers if a.status == 503]
        assert all("retry shortly" in json.loads(a.data)["message"] for a in busy)
        return statuses if busy and 200 in statuses else None

    wait_until(burst, 60, "a burst of previews meeting the cap")
