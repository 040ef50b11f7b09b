"""A CSV, TSV or Parquet object's bounded sample loaded into a DuckDB table, in the sandbox's
child process (preview/sandbox.py): the first `budget` bytes of a CSV (cut after its last whole
line), the first whole row groups of a Parquet file that fit in `budget`, at most `max_rows`
rows either way.

DuckDB reads files, so the bytes go to a private temporary directory first; once every table is
loaded, `lock` turns off all file, network and extension access and locks the configuration, so
SQL run after it (a user's query) reads only the tables already in memory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from edge.api.preview import parquet as parquet_preview
from edge.api.preview.parquet import BudgetExceeded, PreviewRefused, RangedFile, ReadRange

FORMATS = ("csv", "tsv", "parquet")
# DuckDB's own memory limit, under the process's address-space limit (preview/sandbox.py): past
# it DuckDB refuses the query with an error of its own, and the child answers it as 422.
DUCKDB_MEMORY = "256MB"
# Bytes read from the store in one range: each is one DATA frame on the pipe.
READ_CHUNK = 8 * 1024 * 1024
MIB = 1024 * 1024

JobRefused = PreviewRefused


@dataclass
class Sample:
    """What of an object was loaded: `complete` when all of it."""

    rows: int
    bytes_read: int
    complete: bool

    def as_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "bytes_read": self.bytes_read, "complete": self.complete}


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory database on one thread within DUCKDB_MEMORY, that never spills to disk and
    never loads or installs an extension."""
    config: dict[str, Any] = {
        "threads": 1,
        "memory_limit": DUCKDB_MEMORY,
        "temp_directory": "",
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "allow_community_extensions": False,
    }
    return duckdb.connect(":memory:", config=config)


def lock(con: duckdb.DuckDBPyConnection) -> None:
    """No file system, network or extension access from here on, and no SET to undo it."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def clean(message: str, workdir: Path) -> str:
    """DuckDB's message without the private directory's path (a table's file keeps its name)."""
    return message.replace(str(workdir) + os.sep, "").replace(str(workdir), "")


def _read(read_range: ReadRange, start: int, end: int) -> bytes:
    parts = []
    for at in range(start, end + 1, READ_CHUNK):
        with read_range(at, min(end, at + READ_CHUNK - 1)) as reader:
            parts.append(reader.read())
    return b"".join(parts)


def _load_csv(
    con: duckdb.DuckDBPyConnection,
    table: str,
    read_range: ReadRange,
    size: int,
    delimiter: str,
    budget: int,
    max_rows: int,
    workdir: Path,
) -> Sample:
    taken = min(size, budget)
    data = _read(read_range, 0, taken - 1) if taken else b""
    complete = taken == size
    if not complete:
        cut = data.rfind(b"\n")
        if cut < 0:
            raise JobRefused(413, f"too large: its first line is longer than {budget // MIB} MiB")
        data = data[: cut + 1]
    if not data.strip():
        raise JobRefused(400, "the object is empty: no header line")
    path = workdir / f"{table}.csv"
    path.write_bytes(data)
    # Types sniffed from the first lines, as is quick; should a later line not fit them, sniffed
    # again from every line (twice the work, so only then).
    for sample_size in (20_480, -1):
        try:
            con.execute(
                f'CREATE TABLE "{table}" AS SELECT * FROM read_csv(?, header = true, delim = ?, '
                f"sample_size = {sample_size}) LIMIT {int(max_rows) + 1}",
                [str(path), delimiter],
            )
            break
        except (duckdb.ConversionException, duckdb.InvalidInputException):
            if sample_size == -1:
                raise
    path.unlink()
    rows = int(_scalar(con, f'SELECT count(*) FROM "{table}"'))
    if rows > max_rows:
        con.execute(f'DELETE FROM "{table}" WHERE rowid >= {int(max_rows)}')
        rows, complete = max_rows, False
    return Sample(rows, len(data), complete)


def _load_parquet(
    con: duckdb.DuckDBPyConnection, table: str, read_range: ReadRange, size: int, budget: int, max_rows: int
) -> Sample:
    source = RangedFile(read_range, size, budget)
    try:
        parquet = parquet_preview.open_checked(source, size)
        metadata = parquet.metadata
        groups: list[int] = []
        rows = compressed = uncompressed = 0
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            columns = [group.column(i) for i in range(group.num_columns)]
            compressed += sum(column.total_compressed_size for column in columns)
            uncompressed += sum(column.total_uncompressed_size for column in columns)
            too_big = uncompressed > parquet_preview.MAX_UNCOMPRESSED_BYTES
            if rows >= max_rows or compressed + source.bytes_read > budget or too_big:
                break
            groups.append(index)
            rows += group.num_rows
        if metadata.num_row_groups and not groups:
            raise BudgetExceeded(f"its first row group needs more than {budget // MIB} MiB")
        incoming = parquet.read_row_groups(groups, use_threads=False) if groups else parquet.schema_arrow.empty_table()
    except BudgetExceeded as exc:
        raise JobRefused(413, f"too large: {exc or 'its footer is too large'}") from None
    except (pa.ArrowException, OSError, ValueError, OverflowError) as exc:
        if isinstance(exc, MemoryError):
            raise
        raise JobRefused(400, f"not a Parquet file: {exc}") from None
    complete = len(groups) == metadata.num_row_groups and incoming.num_rows <= max_rows
    incoming = incoming.slice(0, max_rows)
    con.register("incoming_rows", incoming)
    try:
        con.execute(f'CREATE TABLE "{table}" AS SELECT * FROM incoming_rows')
    finally:
        con.unregister("incoming_rows")
    return Sample(incoming.num_rows, source.bytes_read, complete)


def load(
    con: duckdb.DuckDBPyConnection,
    table: str,
    fmt: str,
    read_range: ReadRange,
    size: int,
    budget: int,
    max_rows: int,
    workdir: Path,
) -> Sample:
    """The object's sample as table `table`. Refuses (JobRefused) what does not parse: 400, or
    413 when not even a first line or row group fits in the budget."""
    if fmt not in FORMATS:
        raise JobRefused(400, f"not a table format: {fmt}")
    try:
        if fmt == "parquet":
            return _load_parquet(con, table, read_range, size, budget, max_rows)
        return _load_csv(con, table, read_range, size, "\t" if fmt == "tsv" else ",", budget, max_rows, workdir)
    except duckdb.OutOfMemoryException:
        raise MemoryError from None
    except duckdb.Error as exc:
        raise JobRefused(400, f"could not read it as {fmt.upper()}: {clean(str(exc), workdir)}") from None


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return row[0] if row else None


def columns(con: duckdb.DuckDBPyConnection, table: str) -> list[dict[str, str]]:
    """The table's columns: [{name, type}] in order."""
    described = con.execute(f'DESCRIBE "{table}"').fetchall()
    return [{"name": str(row[0]), "type": str(row[1])} for row in described]


def quoted(name: str) -> str:
    """A column name as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'
