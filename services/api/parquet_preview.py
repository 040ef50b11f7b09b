"""A Parquet object's schema and first rows, read within a byte budget: the footer and the first
row group, never the whole file. The web UI's object page shows them (docs/design/api.md)."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
from collections.abc import Callable
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from services.api.errors import bad_request

MAX_ROWS = 100
MAX_BYTES_READ = 16 * 1024 * 1024
# The footer sits at the end: one read of this many bytes covers it for most files.
TAIL_BYTES = 64 * 1024
# A cell longer than this (a big string or blob) is cut: a preview is for looking at.
MAX_CELL_CHARS = 1000

ReadRange = Callable[[int, int], BinaryIO]  # (start, end inclusive) -> a reader of those bytes


class BudgetExceeded(Exception):
    pass


class RangedFile(io.RawIOBase):
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

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

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


def preview(read_range: ReadRange, size: int, rows: int = MAX_ROWS, budget: int = MAX_BYTES_READ) -> dict[str, Any]:
    """{schema: [{name, type}], rows: [[cell, ...]], total_rows, row_groups, bytes_read}.
    Blocking (ranged reads): run it in a worker thread. Bad input raises the API's 400."""
    source = RangedFile(read_range, size, budget)
    try:
        parquet = pq.ParquetFile(source)
        schema = parquet.schema_arrow
        metadata = parquet.metadata
        if metadata.num_row_groups == 0:
            table = schema.empty_table()
        else:
            first = metadata.row_group(0)
            compressed = sum(first.column(i).total_compressed_size for i in range(first.num_columns))
            if compressed + source.bytes_read > budget:
                raise BudgetExceeded
            table = parquet.read_row_group(0).slice(0, rows)
    except BudgetExceeded:
        raise bad_request(
            f"too large to preview: the footer and first row group need more than {budget // (1024 * 1024)} MiB"
        ) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise bad_request(f"not a Parquet file: {exc}") from None
    return {
        "schema": [{"name": field.name, "type": str(field.type)} for field in schema],
        "rows": [[_cell(value) for value in row.values()] for row in table.to_pylist()],
        "total_rows": metadata.num_rows,
        "row_groups": metadata.num_row_groups,
        "bytes_read": source.bytes_read,
    }
