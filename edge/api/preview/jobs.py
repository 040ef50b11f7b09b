"""What a sandbox child (preview/sandbox.py) does for each kind of job: `preview` (a Parquet
object's first rows), `diff` (two versions of an object) and `query` (SQL over one object).
Runs only in the child, with the job's sources read over its pipes; a refusal is JobRefused,
running out of memory a MemoryError, both answered by the child's loop."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import duckdb
import pyarrow as pa

from edge.api.preview import limits, parquet, table_diff, table_load, table_query, text_diff
from edge.api.preview.table_load import JobRefused

ReadRange = Callable[[int, int], BinaryIO]
Source = tuple[ReadRange, int]

__all__ = ["JobRefused", "prepare", "run"]


def prepare() -> None:
    """Before the memory limit: Arrow on one thread, and DuckDB's first connection made (its
    allocator's start-up reservations count as the imports', not the job's)."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    table_load.connect().close()


@contextlib.contextmanager
def _database() -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
    with tempfile.TemporaryDirectory(prefix="silt-job-") as workdir:
        con = table_load.connect()
        try:
            yield con, Path(workdir)
        finally:
            con.close()


def _bytes(source: Source | None, limit: int) -> tuple[bytes | None, bool]:
    if source is None:
        return None, True
    read_range, size = source
    if size == 0:
        return b"", True
    taken = min(size, limit)
    with read_range(0, taken - 1) as reader:
        return reader.read(), taken == size


def _diff(sources: list[Source], params: dict[str, Any], budget: int) -> dict[str, Any]:
    sides = {side: sources[params[side]] if params.get(side) is not None else None for side in ("left", "right")}
    fmt = str(params["format"])
    if fmt == "text":
        left, left_complete = _bytes(sides["left"], min(budget, text_diff.MAX_BYTES))
        right, right_complete = _bytes(sides["right"], min(budget, text_diff.MAX_BYTES))
        return text_diff.diff(left, right, left_complete, right_complete)
    key = params.get("key")
    limit = max(1, min(int(params.get("limit") or 100), limits.MAX_LISTED))
    with _database() as (con, workdir):
        match = str(params.get("match") or "auto")
        return table_diff.diff(con, fmt, sides["left"], sides["right"], key, limit, budget, workdir, match)


def _query(sources: list[Source], params: dict[str, Any], budget: int) -> dict[str, Any]:
    read_range, size = sources[0]
    with _database() as (con, workdir):
        # Parsed before anything is read: bad SQL costs no reading.
        table_query.single_select(con, str(params["sql"]))
        sample = table_load.load(
            con, table_query.TABLE, str(params["format"]), read_range, size, budget, limits.QUERY_ROWS, workdir
        )
        table_load.lock(con)
        answer = table_query.run(con, str(params["sql"]), int(params.get("offset") or 0))
        answer["sample"] = {**sample.as_json(), "limit_bytes": budget, "limit_rows": limits.QUERY_ROWS}
        return answer


def run(kind: str, sources: list[Source], params: dict[str, Any], budget: int) -> dict[str, Any]:
    if kind == "preview":
        read_range, size = sources[0]
        return parquet.decode(read_range, size, int(params["rows"]), budget)
    if kind == "diff":
        return _diff(sources, params, budget)
    if kind == "query":
        return _query(sources, params, budget)
    raise JobRefused(400, f"no such job: {kind}")
