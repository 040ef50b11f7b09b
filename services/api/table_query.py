"""A user's SQL over one object, in the sandbox's child: the object's sample is loaded as the
table `data` (table_load.py), then DuckDB is locked (no files, network, extensions or SET) and
the SQL runs as one SELECT, paged. What keeps it to `data` is that configuration and the
process it runs in, not the SQL's text: the text is only parsed, by DuckDB, to check that it is
a single SELECT statement."""

from __future__ import annotations

import time
from typing import Any

import duckdb

from services.api.job_limits import PAGE_SIZE
from services.api.parquet_preview import _cell
from services.api.table_load import JobRefused

TABLE = "data"
# A total is counted (the query run a second time) only when the page came this fast.
CHEAP_SECONDS = 1.0


def single_select(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The SQL of the one SELECT statement in `sql`, or JobRefused (400)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise JobRefused(400, f"bad SQL: {exc}") from None
    if len(statements) != 1:
        raise JobRefused(400, f"one SELECT statement is run, not {len(statements)}")
    statement = statements[0]
    if statement.type != duckdb.StatementType.SELECT:
        raise JobRefused(400, f"only SELECT statements are run, not {statement.type.name}")
    return str(statement.query)


def run(con: duckdb.DuckDBPyConnection, sql: str, page: int) -> dict[str, Any]:
    """{columns: [{name, type}], rows, page, page_size, has_more, total (null when not cheap)}."""
    query = single_select(con, sql)
    # A newline before the parenthesis: a trailing "-- comment" in the SQL ends there.
    wrapped = f"SELECT * FROM (\n{query}\n) AS q LIMIT {PAGE_SIZE + 1} OFFSET {int(page) * PAGE_SIZE}"
    started = time.monotonic()
    try:
        relation = con.sql(wrapped)
        names, types = relation.columns, [str(kind) for kind in relation.types]
        found = relation.fetchall()
        total = None
        if page == 0 and len(found) <= PAGE_SIZE:
            total = len(found)
        elif time.monotonic() - started < CHEAP_SECONDS:
            row = con.execute(f"SELECT count(*) FROM (\n{query}\n) AS q").fetchone()
            total = int(row[0]) if row else None
    except duckdb.OutOfMemoryException:
        raise MemoryError from None
    except duckdb.Error as exc:
        raise JobRefused(400, f"{type(exc).__name__.removesuffix('Exception')} error: {exc}") from None
    return {
        "columns": [{"name": name, "type": kind} for name, kind in zip(names, types, strict=True)],
        "rows": [[_cell(value) for value in row] for row in found[:PAGE_SIZE]],
        "page": page,
        "page_size": PAGE_SIZE,
        "has_more": len(found) > PAGE_SIZE,
        "total": total,
    }
