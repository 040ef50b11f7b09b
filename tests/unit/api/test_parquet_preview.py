"""The Parquet preview reads the footer and the first row group only, within its byte budget."""

from __future__ import annotations

import datetime
import io
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from services.api import parquet_preview
from services.api.errors import ApiError


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
    answer = parquet_preview.preview(reads, len(data))
    assert answer["schema"] == [
        {"name": "id", "type": "int64"},
        {"name": "name", "type": "string"},
        {"name": "when", "type": "date32[day]"},
        {"name": "blob", "type": "binary"},
    ]
    assert len(answer["rows"]) == parquet_preview.MAX_ROWS
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
        parquet_preview.preview(reads, len(data), budget=len(data) // 2)
    assert refused.value.status == 400 and "too large to preview" in refused.value.message
    assert sum(end - start + 1 for start, end in reads.ranges) <= len(data) // 2


@pytest.mark.parametrize("data", [b"", b"a,b\n1,2\n", b"PAR1" + b"x" * 100 + b"PAR1"])
def test_not_parquet_is_a_bad_request(data: bytes) -> None:
    with pytest.raises(ApiError) as refused:
        parquet_preview.preview(Reads(data), len(data))
    assert refused.value.status == 400 and "not a Parquet file" in refused.value.message
