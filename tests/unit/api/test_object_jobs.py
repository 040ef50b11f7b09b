"""The diff and query jobs' own work, in this process (the server runs them in the sandbox):
CSV types sniffed again when a late line disagrees, a text diff's worst case within its bounds,
a query that can only SELECT from its locked database, and the sandbox's paging, slots and
privileges."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from edge.api.errors import ApiError
from edge.api.preview import table_load, table_query, text_diff
from edge.api.preview.limits import PAGE_SIZE
from edge.api.preview.sandbox import CHILD_NICENESS, MAX_ANSWER_BYTES, _Child, _fitting
from edge.api.preview.table_load import JobRefused
from edge.api.routes.preview import PreviewGate


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
    page = table_query.run(con, "SELECT x FROM data WHERE x % 2 = 0 ORDER BY x -- a comment", 100)
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


def test_a_trailing_semicolon_or_comment_is_accepted_but_two_statements_are_not(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE data AS SELECT range AS x FROM range(3)")
    table_load.lock(con)
    for sql in (
        "SELECT x FROM data;",
        "SELECT x FROM data ;;\n",
        "SELECT x FROM data; -- done",
        "SELECT x FROM data -- c;",
    ):
        assert table_query.run(con, sql, 0)["rows"] == [[0], [1], [2]], sql
    assert table_query.run(con, "SELECT ';' AS s /* ; */ ;", 0)["rows"] == [[";"]]
    with pytest.raises(JobRefused) as refused:
        table_query.run(con, "SELECT x FROM data; SELECT 2", 0)
    assert "not 2" in refused.value.message


def test_a_count_that_would_run_long_is_stopped_and_the_page_answered(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE data AS SELECT range AS x FROM range(3000)")
    table_load.lock(con)
    # Should the count not be bounded, this stops it (as an error) instead of hanging the test.
    guard = threading.Timer(6.0, con.interrupt)
    guard.start()
    started = time.monotonic()
    try:
        page = table_query.run(con, "SELECT * FROM data a, data b, range(1000) c", 0)
    finally:
        guard.cancel()
    assert time.monotonic() - started < 4.0
    assert len(page["rows"]) == PAGE_SIZE and page["has_more"] and page["total"] is None
    # A cheap count is still given, and the connection still runs queries after an interrupt.
    assert table_query.run(con, "SELECT * FROM data", 100)["total"] == 3000


def test_rows_past_the_answer_bound_start_the_next_page() -> None:
    rows = [["x" * 100_000] for _ in range(PAGE_SIZE)]
    answer = {
        "columns": [],
        "rows": rows,
        "offset": 300,
        "has_more": False,
        "total": 400,
        "cells_cut_by_row": [1] * 100,
    }
    sent = json.loads(_fitting(answer))
    kept = len(sent["rows"])
    assert 0 < kept < PAGE_SIZE and len(json.dumps(sent)) <= MAX_ANSWER_BYTES
    assert sent["rows_cut"] == PAGE_SIZE - kept and sent["has_more"] and sent["next_offset"] == 300 + kept
    assert sent["cells_cut"] == kept and "cells_cut_by_row" not in sent
    whole = json.loads(_fitting({"rows": [[1]], "offset": 0, "has_more": True}))
    assert whole["rows_cut"] == 0 and whole["next_offset"] == PAGE_SIZE * 0 + 1


def test_one_user_gets_at_most_two_job_slots() -> None:
    gate = PreviewGate(limit=4, per_user=2)
    with gate.enter("alice"), gate.enter("alice"):
        with pytest.raises(ApiError) as refused, gate.enter("alice"):
            pass
        assert refused.value.status == 503 and "2 of your" in str(refused.value)
        with gate.enter("bob"), gate.enter("bob"):
            with pytest.raises(ApiError) as full, gate.enter("carol"):
                pass
            assert full.value.status == 503 and "4 previews" in str(full.value)
    with gate.enter("alice"), gate.enter("alice"):  # the slots are given back
        pass


def test_a_job_child_runs_niced_without_new_privileges() -> None:
    child = _Child()
    try:
        child.wait_ready()
        status = Path(f"/proc/{child.proc.pid}/status").read_text()
        assert "NoNewPrivs:\t1" in status
        niceness = int(Path(f"/proc/{child.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
        assert niceness == os.getpriority(os.PRIO_PROCESS, 0) + CHILD_NICENESS
    finally:
        child.end()


def test_the_server_starting_children_and_each_child_are_not_dumpable() -> None:
    # In processes of their own: this one (pytest) stays dumpable.
    probe = (
        "import ctypes, sys; from edge.api.preview import sandbox as s; "
        "s.Sandbox()._take().end() if sys.argv[1] == 'server' else s._drop(); "
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
    )
    for who in ("server", "child"):
        done = subprocess.run(
            [sys.executable, "-c", probe, who], capture_output=True, text=True, timeout=30, check=True
        )
        assert done.stdout.strip() == "0", (who, done.stdout, done.stderr)
