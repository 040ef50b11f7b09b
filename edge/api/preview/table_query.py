"""A user's SQL over one object, in the sandbox's child: the object's sample is loaded as the
table `data` (preview/table_load.py), then DuckDB is locked (no files, network, extensions or SET) and
the SQL runs as one SELECT, paged. What keeps it to `data` is that configuration and the
process it runs in, not the SQL's text: the text is only parsed, by DuckDB, to check that it is
a single SELECT statement."""

from __future__ import annotations

import threading
import time
from typing import Any

import duckdb

from edge.api.preview.limits import PAGE_SIZE
from edge.api.preview.parquet import MAX_CELL_CHARS, _cell
from edge.api.preview.table_load import JobRefused

TABLE = "data"
# A total is counted (the query run a second time) only when the page came this fast.
CHEAP_SECONDS = 1.0
# And the count itself is interrupted past this.
COUNT_SECONDS = 1.0


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
    return _without_trailing_semicolons(str(statement.query))


def _without_trailing_semicolons(query: str) -> str:
    """The statement without the ";" that may end it (before comments): no part of a SELECT,
    it breaks the query once paged or counted. Found by DuckDB's tokenizer, so that a ";" in a
    string or a comment is left alone; each is replaced by a space, so the tokens' positions
    stay valid."""
    tokens = [(position, kind) for position, kind in duckdb.tokenize(query) if kind != duckdb.token_type.comment]
    while tokens and tokens[-1][1] == duckdb.token_type.operator and query[tokens[-1][0]] == ";":
        position = tokens.pop()[0]
        query = query[:position] + " " + query[position + 1 :]
    return query


def _was_cut(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > MAX_CELL_CHARS
    return isinstance(value, bytes) and len(value) > MAX_CELL_CHARS // 2


def _count(relation: duckdb.DuckDBPyRelation, con: duckdb.DuckDBPyConnection) -> int | None:
    """The query's row count, or None when counting takes more than COUNT_SECONDS: a page can
    come fast (its LIMIT stops a large join early) while the whole result takes minutes, and a
    count left to run would turn that page into a 504 at the job's deadline."""
    timer = threading.Timer(COUNT_SECONDS, con.interrupt)
    timer.start()
    try:
        rows = relation.aggregate("count(*)").fetchall()
    except duckdb.InterruptException:
        return None
    finally:
        timer.cancel()
        # Joined so that a timer firing just as the count ends interrupts nothing after it.
        timer.join()
    return int(rows[0][0]) if rows else None


def run(con: duckdb.DuckDBPyConnection, sql: str, offset: int) -> dict[str, Any]:
    """{columns: [{name, type}], rows, offset, page_size, has_more, total (null when not cheap)}:
    up to PAGE_SIZE rows from row `offset` of the query's result."""
    query = single_select(con, sql)
    started = time.monotonic()
    try:
        # The relation API: LIMIT/OFFSET and the count are built on the one parsed query.
        relation = con.sql(query)
        names, types = relation.columns, [str(kind) for kind in relation.types]
        found = relation.limit(PAGE_SIZE + 1, int(offset)).fetchall()
        total = None
        if offset == 0 and len(found) <= PAGE_SIZE:
            total = len(found)
        elif time.monotonic() - started < CHEAP_SECONDS:
            total = _count(relation, con)
    except duckdb.OutOfMemoryException:
        raise MemoryError from None
    except duckdb.Error as exc:
        raise JobRefused(400, f"{type(exc).__name__.removesuffix('Exception')} error: {exc}") from None
    rows = found[:PAGE_SIZE]
    return {
        "columns": [{"name": name, "type": kind} for name, kind in zip(names, types, strict=True)],
        "rows": [[_cell(value) for value in row] for row in rows],
        # Text and bytes cells cut short by _cell, per row: the sandbox sums them over the rows it
        # sends as "cells_cut", so that the UI can say so.
        "cells_cut_by_row": [sum(_was_cut(value) for value in row) for row in rows],
        "offset": offset,
        "page_size": PAGE_SIZE,
        "has_more": len(found) > PAGE_SIZE,
        "total": total,
    }
