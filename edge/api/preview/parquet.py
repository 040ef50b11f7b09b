"""A Parquet object's schema and first rows, read within a byte budget: the footer and the first
row group, never the whole file. The web UI's object page shows them (docs/design/api.md).

What the footer claims is checked before any data is read (its own size, the first row group's
compressed and uncompressed sizes), only the first MAX_COLUMNS columns are read, and they are
decoded one batch of at most MAX_ROWS rows at a time, so a small file that decodes into a huge
row group costs one batch of memory, not the row group.

A batch can still be huge (100 copies of one dictionary value of 40 MB), and no claim of the
footer bounds it, so the server never decodes in its own process: preview/sandbox.py runs
`decode` in a child process with a memory limit and a deadline. `preview` is the same work in
the calling process, for tests and tools that hold trusted files."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
from collections.abc import Callable
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from silt.block.streams import SeekableStream

MAX_ROWS = 100
MAX_BYTES_READ = 16 * 1024 * 1024
# The footer sits at the end: one read of this many bytes covers it for most files.
TAIL_BYTES = 64 * 1024
# A cell longer than this (a big string or blob) is cut: a preview is for looking at.
MAX_CELL_CHARS = 1000
# Columns shown: the rest are counted ("N more columns"), never read.
MAX_COLUMNS = 200
# A footer (the file's metadata) larger than this is refused before it is read or parsed.
MAX_FOOTER_BYTES = 1024 * 1024
# The first row group's columns to be read may claim at most this much once decompressed.
MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024
# A value Python cannot represent (a timestamp past year 9999), shown when even Arrow's own
# text cast fails.
UNREPRESENTABLE = "<unrepresentable>"

ReadRange = Callable[[int, int], BinaryIO]  # (start, end inclusive) -> a reader of those bytes


class BudgetExceeded(Exception):
    pass


class PreviewRefused(Exception):
    """Why a file is not previewed: the HTTP status and the message the API answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RangedFile(SeekableStream):
    """A seekable read-only file over ranged reads of an object, refusing to read more than
    `budget` bytes in all. The last TAIL_BYTES are fetched once, as the footer lives there."""

    def __init__(self, read_range: ReadRange, size: int, budget: int) -> None:
        self._read_range = read_range
        self._size = size
        self._budget = budget
        self._position = 0
        self.bytes_read = 0
        self._tail_start = max(0, size - TAIL_BYTES)
        self._tail: bytes | None = None

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def _fetch(self, start: int, end: int) -> bytes:
        self.bytes_read += end - start + 1
        if self.bytes_read > self._budget:
            raise BudgetExceeded
        with self._read_range(start, end) as reader:
            return reader.read()

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._position + size)
        if end <= self._position:
            return b""
        start = self._position
        if start >= self._tail_start:
            if self._tail is None:
                self._tail = self._fetch(self._tail_start, self._size - 1)
            data = self._tail[start - self._tail_start : end - self._tail_start]
        else:
            data = self._fetch(start, end - 1)
        self._position += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _cell(value: Any) -> Any:
    """A value as JSON can carry it."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, str):
        return value[:MAX_CELL_CHARS]
    if isinstance(value, bytes):
        return "base64:" + base64.b64encode(value[: MAX_CELL_CHARS // 2]).decode()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | datetime.timedelta):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _cell(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cell(v) for v in value[:MAX_ROWS]]
    return str(value)[:MAX_CELL_CHARS]


def _leaves(field: pa.Field) -> int:
    """How many Parquet leaf columns an Arrow field is stored as."""
    kind = field.type
    if pa.types.is_struct(kind):
        return sum(_leaves(kind.field(i)) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _leaves(kind.key_field) + _leaves(kind.item_field)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaves(kind.value_field)
    return 1


def _column_cells(column: pa.Array) -> list[Any]:
    """A column's values as JSON cells; values Python cannot represent (OverflowError and the
    like) come as Arrow's text for them."""
    try:
        return [_cell(value) for value in column.to_pylist()]
    except (OverflowError, ValueError, pa.ArrowException):
        pass
    try:
        return [_cell(value) for value in pc.cast(column, pa.string()).to_pylist()]
    except (OverflowError, ValueError, pa.ArrowException):
        return [None if valid is False else UNREPRESENTABLE for valid in column.is_valid().to_pylist()]


def _check_footer(source: RangedFile, size: int) -> None:
    if size < 12:
        raise ValueError("too short for a Parquet file")
    source.seek(size - 8)
    tail = source.read(8)
    if tail[4:] != b"PAR1":
        raise ValueError("no Parquet magic at the end")
    footer = int.from_bytes(tail[:4], "little")
    if footer > size - 12:
        raise ValueError(f"a footer of {footer} bytes in a file of {size}")
    if footer > MAX_FOOTER_BYTES:
        raise BudgetExceeded(f"its footer is {footer} bytes, more than {MAX_FOOTER_BYTES}")
    source.seek(0)


def open_checked(source: RangedFile, size: int) -> pq.ParquetFile:
    """The Parquet file over `source`, its footer's claims checked before it is parsed: raises
    BudgetExceeded for a footer too big to read, ValueError for what is no Parquet file."""
    _check_footer(source, size)
    return pq.ParquetFile(source)


def _first_rows(parquet: pq.ParquetFile, fields: list[pa.Field], rows: int, budget: int, used: int) -> list[pa.Array]:
    """The first `rows` rows of the first len(fields) columns, one batch of the first row group."""
    metadata = parquet.metadata
    if metadata.num_row_groups == 0:
        return [pa.array([], field.type) for field in fields]
    first = metadata.row_group(0)
    leaves = list(range(sum(_leaves(field) for field in fields)))
    compressed = sum(first.column(i).total_compressed_size for i in leaves)
    uncompressed = sum(first.column(i).total_uncompressed_size for i in leaves)
    if compressed < 0 or compressed + used > budget:
        raise BudgetExceeded(f"its first row group needs more than {budget // (1024 * 1024)} MiB")
    if uncompressed < 0 or uncompressed > MAX_UNCOMPRESSED_BYTES:
        raise BudgetExceeded(f"its first row group decompresses to {uncompressed} bytes")
    if first.num_rows < 0:
        raise ValueError("a row group with a negative row count")
    batches = parquet.reader.iter_batches(rows, row_groups=[0], column_indices=leaves, use_threads=False)
    batch = next(iter(batches), None)
    if batch is None:
        return [pa.array([], field.type) for field in fields]
    return [batch.column(i).slice(0, rows) for i in range(batch.num_columns)]


def decode(read_range: ReadRange, size: int, rows: int = MAX_ROWS, budget: int = MAX_BYTES_READ) -> dict[str, Any]:
    """{schema: [{name, type}], rows: [[cell, ...]], total_rows, row_groups, columns,
    columns_shown, bytes_read}. Bad input raises PreviewRefused (400); running out of memory
    (the sandbox's limit) raises PreviewRefused (413)."""
    rows = max(1, min(rows, MAX_ROWS))
    source = RangedFile(read_range, size, budget)
    try:
        _check_footer(source, size)
        parquet = pq.ParquetFile(source)
        schema = parquet.schema_arrow
        metadata = parquet.metadata
        fields = list(schema)[:MAX_COLUMNS]
        columns = _first_rows(parquet, fields, rows, budget, source.bytes_read)
        cells = [_column_cells(column) for column in columns]
    except BudgetExceeded as exc:
        reason = str(exc) or f"the footer and first row group need more than {budget // (1024 * 1024)} MiB"
        raise PreviewRefused(400, f"too large to preview: {reason}") from None
    # Before ArrowException: pyarrow's ArrowMemoryError is both.
    except MemoryError:
        raise PreviewRefused(
            413, "too large to preview: its first rows decode to more memory than a preview may use"
        ) from None
    except (pa.ArrowException, OSError, ValueError, OverflowError) as exc:
        raise PreviewRefused(400, f"not a Parquet file: {exc}") from None
    # Column-wise, then zipped: repeated column names each keep their own values.
    shown = len(cells[0]) if cells else 0
    return {
        "schema": [{"name": field.name, "type": str(field.type)} for field in fields],
        "rows": [[column[row] for column in cells] for row in range(shown)],
        "total_rows": metadata.num_rows,
        "row_groups": metadata.num_row_groups,
        "columns": len(schema),
        "columns_shown": len(fields),
        "bytes_read": source.bytes_read,
    }


def preview(read_range: ReadRange, size: int, rows: int = MAX_ROWS, budget: int = MAX_BYTES_READ) -> dict[str, Any]:
    """`decode` in this process, unbounded in memory and time: for trusted files only (the
    server uses preview/sandbox.py). Refusals raise the API's ApiError."""
    from edge.api.errors import ApiError  # not in the sandbox's imports: it needs none of grpc

    try:
        return decode(read_range, size, rows, budget)
    except PreviewRefused as refused:
        raise ApiError(refused.status, refused.message) from None
