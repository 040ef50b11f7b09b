"""The Parquet preview reads the footer and the first row group only, within its byte budget."""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from edge.api.errors import ApiError
from edge.api.preview import parquet


def _parquet(rows: int, row_group_size: int) -> bytes:
    table = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"name-{i}" for i in range(rows)]),
            "when": pa.array([datetime.date(2026, 1, 1)] * rows),
            "blob": pa.array([bytes([i % 256]) * 4 for i in range(rows)]),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=row_group_size)
    return out.getvalue()


class Reads:
    """A ranged reader over bytes that records each range asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.ranges: list[tuple[int, int]] = []

    def __call__(self, start: int, end: int) -> BinaryIO:
        self.ranges.append((start, end))
        return io.BytesIO(self.data[start : end + 1])


def test_schema_and_first_rows_of_the_first_row_group() -> None:
    data = _parquet(rows=50_000, row_group_size=1_000)
    reads = Reads(data)
    answer = parquet.preview(reads, len(data))
    assert answer["schema"] == [
        {"name": "id", "type": "int64"},
        {"name": "name", "type": "string"},
        {"name": "when", "type": "date32[day]"},
        {"name": "blob", "type": "binary"},
    ]
    assert len(answer["rows"]) == parquet.MAX_ROWS
    assert answer["rows"][0] == [0, "name-0", "2026-01-01", "base64:AAAAAA=="]
    assert answer["rows"][99][:2] == [99, "name-99"]
    assert answer["total_rows"] == 50_000 and answer["row_groups"] == 50
    # The footer and one of 50 row groups: far less than the file.
    assert answer["bytes_read"] == sum(end - start + 1 for start, end in reads.ranges)
    assert answer["bytes_read"] < len(data) / 5


def test_a_first_row_group_over_the_budget_is_refused_before_it_is_read() -> None:
    data = _parquet(rows=20_000, row_group_size=20_000)
    reads = Reads(data)
    with pytest.raises(ApiError) as refused:
        parquet.preview(reads, len(data), budget=len(data) // 2)
    assert refused.value.status == 400 and "too large to preview" in refused.value.message
    assert sum(end - start + 1 for start, end in reads.ranges) <= len(data) // 2


@pytest.mark.parametrize("data", [b"", b"a,b\n1,2\n", b"PAR1" + b"x" * 100 + b"PAR1"])
def test_not_parquet_is_a_bad_request(data: bytes) -> None:
    with pytest.raises(ApiError) as refused:
        parquet.preview(Reads(data), len(data))
    assert refused.value.status == 400 and "not a Parquet file" in refused.value.message


def _write(table: pa.Table, **options: object) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return out.getvalue()


def test_a_decompression_bomb_is_decoded_one_batch_at_a_time() -> None:
    # 20M int64 zeros in one row group: a few hundred KiB on disk, 160 MB decoded.
    zeros = pa.table({"z": pa.array(np.zeros(20_000_000, dtype=np.int64))})
    data = _write(zeros, row_group_size=20_000_000, compression="zstd")
    assert len(data) < 2 * 1024 * 1024
    tracemalloc_peak = _peak_arrow_bytes(lambda: parquet.preview(Reads(data), len(data)))
    assert tracemalloc_peak < 40 * 1024 * 1024, tracemalloc_peak


def _peak_arrow_bytes(run: Callable[[], object]) -> int:
    pool = pa.default_memory_pool()
    before = pool.max_memory()
    answer = run()
    assert isinstance(answer, dict) and len(answer["rows"]) == parquet.MAX_ROWS
    return pool.max_memory() - before


def test_only_the_first_columns_are_shown_and_counted() -> None:
    wide = pa.table({f"c{i}": pa.array([i, i + 1]) for i in range(parquet.MAX_COLUMNS + 50)})
    data = _write(wide)
    answer = parquet.preview(Reads(data), len(data))
    assert answer["columns"] == parquet.MAX_COLUMNS + 50
    assert answer["columns_shown"] == len(answer["schema"]) == parquet.MAX_COLUMNS
    assert answer["rows"][1][-1] == parquet.MAX_COLUMNS


def test_repeated_column_names_keep_their_own_values() -> None:
    table = pa.Table.from_arrays([pa.array([1, 2]), pa.array(["x", "y"]), pa.array([3.5, 4.5])], names=["a", "b", "a"])
    data = _write(table)
    answer = parquet.preview(Reads(data), len(data))
    assert [f["name"] for f in answer["schema"]] == ["a", "b", "a"]
    assert answer["rows"] == [[1, "x", 3.5], [2, "y", 4.5]]


def test_values_python_cannot_hold_are_shown_as_text() -> None:
    table = pa.table(
        {
            "ts": pa.array([10**15, None], pa.timestamp("ms")),
            "day": pa.array([2**31 - 1, 0], pa.date32()),
        }
    )
    data = _write(table)
    answer = parquet.preview(Reads(data), len(data))
    first, second = answer["rows"]
    assert isinstance(first[0], str) and first[0] and second[0] is None
    assert isinstance(first[1], str) and second[1] == "1970-01-01"
