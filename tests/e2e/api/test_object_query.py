"""SQL over one object over the wire: paged answers, and a query that can read nothing but its
own object (no other files, ATTACH, COPY, SET), bounded in size, memory and time, while the
server keeps answering."""

from __future__ import annotations

import json
import time

import pyarrow as pa

from edge.api.preview.limits import PAGE_SIZE
from edge.api.preview.sandbox import DECODE_SECONDS
from tests.e2e.api.conftest import Api, error_message
from tests.e2e.api.data_support import parquet, query, upload


def test_pages_of_a_parquet_query_and_a_csv_query(api: Api, repo: str) -> None:
    table = pa.table({"id": list(range(250)), "city": [f"city {i % 7}" for i in range(250)]})
    upload(api, repo, "t/cities.parquet", parquet(table, 100))
    sql = "SELECT id, city FROM data WHERE id % 2 = 0 ORDER BY id"
    first = query(api, repo, "t/cities.parquet", sql)
    assert first.status == 200, first.data
    page = json.loads(first.data)
    assert page["columns"] == [{"name": "id", "type": "BIGINT"}, {"name": "city", "type": "VARCHAR"}]
    assert len(page["rows"]) == PAGE_SIZE and page["rows"][0] == [0, "city 0"] and page["has_more"]
    assert page["total"] == 125 and page["sample"]["complete"] and page["table"] == "data"
    last = json.loads(query(api, repo, "t/cities.parquet", sql, page=1).data)
    assert last["rows"][0] == [200, "city 4"] and len(last["rows"]) == 25 and not last["has_more"]

    upload(api, repo, "t/w.tsv", b"station\ttemp\nosl\t3.5\nber\t7.25\n", "text/tab-separated-values")
    grouped = json.loads(query(api, repo, "t/w.tsv", "SELECT max(temp) AS hottest, count(*) AS n FROM data;").data)
    assert grouped["rows"] == [[7.25, 2]] and grouped["total"] == 1


def test_a_page_too_large_for_one_answer_goes_on_where_it_was_cut(api: Api, repo: str) -> None:
    upload(api, repo, "ids.csv", b"id\n" + b"".join(b"%d\n" % i for i in range(150)), "text/csv")
    # 100 rows of 50 cells of 1,000 characters are about 5 MB: more than an answer holds.
    wide = ", ".join(f"repeat(chr(97 + {n % 26}), 1200) AS c{n}" for n in range(50))
    sql = f"SELECT id, {wide} FROM data ORDER BY id"
    first = json.loads(query(api, repo, "ids.csv", sql).data)
    kept = len(first["rows"])
    assert 0 < kept < PAGE_SIZE and first["rows_cut"] == PAGE_SIZE - kept and first["has_more"]
    assert first["next_offset"] == kept and first["cells_cut"] == kept * 50
    second = json.loads(query(api, repo, "ids.csv", sql, offset=first["next_offset"]).data)
    assert second["rows"][0][0] == kept and second["offset"] == kept


def test_a_query_reads_its_object_only(api: Api, repo: str) -> None:
    upload(api, repo, "d.csv", b"a,b\n1,2\n", "text/csv")
    upload(api, repo, "other.csv", b"secret\n42\n", "text/csv")
    refused = {
        "SELECT * FROM read_csv('/etc/passwd')": "disabled by configuration",
        "SELECT * FROM read_csv('other.csv')": "disabled by configuration",
        "ATTACH '/tmp/x.db' AS x": "only SELECT",
        "COPY data TO '/tmp/out.csv'": "only SELECT",
        "SET enable_external_access = true": "only SELECT",
        "INSTALL httpfs": "only SELECT",
        "SELECT 1; ATTACH '/tmp/x.db'": "not 2",
        "SELEC 1": "bad SQL",
    }
    for sql, why in refused.items():
        message = error_message(query(api, repo, "d.csv", sql), 400)
        assert why in message, (sql, message)
        assert "/tmp/silt-job-" not in message and "local://" not in message, message
    error_message(query(api, repo, "missing.csv", "SELECT 1"), 404)
    upload(api, repo, "notes.txt", b"hi")
    assert "can be queried" in error_message(query(api, repo, "notes.txt", "SELECT 1"), 400)
    assert "16 KiB" in error_message(query(api, repo, "d.csv", "SELECT 1 -- " + "x" * 17_000), 413)
    error_message(query(api, repo, "d.csv", "SELECT 1", page=-1), 400)


def test_a_memory_bomb_ends_with_a_clear_error_in_time(api: Api, repo: str) -> None:
    upload(api, repo, "n.parquet", parquet(pa.table({"x": list(range(10_000))})))
    # A page that comes at once, of a result that takes minutes to count: the page, no total.
    started = time.monotonic()
    cross = json.loads(query(api, repo, "n.parquet", "SELECT * FROM data a, data b, data c").data)
    assert len(cross["rows"]) == PAGE_SIZE and cross["has_more"] and cross["total"] is None
    assert time.monotonic() - started < 5
    started = time.monotonic()
    bomb = "SELECT string_agg(repeat('x', 10000), '') FROM data a, data b"
    message = error_message(query(api, repo, "n.parquet", bomb), 422)
    assert "memory" in message
    assert time.monotonic() - started < DECODE_SECONDS + 5
    # A query that would run for minutes is stopped at the deadline.
    slow = "SELECT count(*) FROM data a, data b, data c WHERE a.x < b.x AND b.x < c.x"
    started = time.monotonic()
    assert "took more than" in error_message(query(api, repo, "n.parquet", slow), 504)
    assert time.monotonic() - started < DECODE_SECONDS + 5
    health = api.http.request("GET", f"{api.stack.endpoint}/_silt/health/live", timeout=5, retries=False)
    assert health.status == 200
    fine = query(api, repo, "n.parquet", "SELECT count(*) FROM data")
    assert fine.status == 200 and json.loads(fine.data)["rows"] == [[10_000]]
