"""The diff and query jobs' own work, in this process (the server runs them in the sandbox):
CSV types sniffed again when a late line disagrees, a text diff's worst case within its bounds,
and a query that can only SELECT from its locked database."""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from services.api import table_load, table_query, text_diff
from services.api.table_load import JobRefused


def _reader(data: bytes) -> table_load.ReadRange:
    return lambda start, end: io.BytesIO(data[start : end + 1])


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = table_load.connect()
    yield connection
    connection.close()


def test_a_late_line_that_breaks_the_sniffed_types_is_read_as_text(con: duckdb.DuckDBPyConnection) -> None:
    data = b"id,v\n" + b"".join(b"%d,%d\n" % (i, i) for i in range(30_000)) + b"x,1.5\n"
    with tempfile.TemporaryDirectory() as workdir:
        sample = table_load.load(con, "t", "csv", _reader(data), len(data), 1 << 20, 10**6, Path(workdir))
        assert list(Path(workdir).iterdir()) == []  # the copy is gone once loaded
    assert sample.rows == 30_001 and sample.complete
    assert table_load.columns(con, "t") == [{"name": "id", "type": "VARCHAR"}, {"name": "v", "type": "DOUBLE"}]


def test_a_csv_cut_at_the_budget_keeps_whole_lines_and_says_so(con: duckdb.DuckDBPyConnection) -> None:
    data = b"a,b\n" + b"1,2\n" * 1000
    sample = table_load.load(con, "t", "csv", _reader(data), len(data), 1001, 10**6, Path(tempfile.gettempdir()))
    assert not sample.complete and sample.bytes_read == 1000 and sample.rows == 249


def test_the_worst_text_diff_is_bounded() -> None:
    # Every line differs: each side cut to MAX_LINES lines, the listing to MAX_OUTPUT_LINES.
    left = "".join(f"left {i} {i * 7919 % 104729}\n" for i in range(20_000)).encode()
    right = "".join(f"right {i} {i * 104729 % 7919}\n" for i in range(20_000)).encode()
    started = time.monotonic()
    answer = text_diff.diff(left[: text_diff.MAX_BYTES], right[: text_diff.MAX_BYTES], False, False)
    assert time.monotonic() - started < 5.0
    assert answer["sample"]["left"]["lines"] == text_diff.MAX_LINES and not answer["sample"]["left"]["complete"]
    assert sum(len(hunk["lines"]) for hunk in answer["hunks"]) <= text_diff.MAX_OUTPUT_LINES and answer["truncated"]


def test_a_locked_query_reads_only_its_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE data AS SELECT range AS x FROM range(250)")
    table_load.lock(con)
    page = table_query.run(con, "SELECT x FROM data WHERE x % 2 = 0 ORDER BY x -- a comment", 1)
    assert page["rows"][0] == [200] and page["total"] == 125 and not page["has_more"]
    for sql, why in {
        "SELECT * FROM read_csv('/etc/hostname')": "disabled by configuration",
        "CREATE TABLE y AS SELECT 1": "only SELECT",
        "SET lock_configuration = false": "only SELECT",
        "SELECT 1) UNION (SELECT 2": "bad SQL",
    }.items():
        with pytest.raises(JobRefused) as refused:
            table_query.run(con, sql, 0)
        assert why in refused.value.message and refused.value.status == 400, (sql, refused.value.message)
