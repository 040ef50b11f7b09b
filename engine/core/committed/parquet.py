"""Reading and writing the committed layer's Parquet files."""

from __future__ import annotations

import itertools
import sys
from array import array
from collections.abc import Sequence
from typing import BinaryIO

import pyarrow as pa
from pyarrow._parquet import ParquetReader  # pyarrow is pinned: its reader's API is stable there

# Arrow's 32-bit offsets: a binary column of more bytes than this needs pa.array's chunking.
_MAX_OFFSET = 2**31 - 1
_BINARY = pa.binary()


def open_parquet(source: BinaryIO) -> ParquetReader:
    """A small Parquet file, read into memory, opened for reading (its footer parsed).

    Through Arrow's reader itself rather than pq.ParquetFile: that wrapper's set-up in Python
    (filesystem resolution, a map of nested column paths) costs more than opening and reading
    a metarange file, and a path-filtered log reads one metarange per commit. pq.read_table
    is slower still (the datasets layer, calling back into the Python file object).
    """
    reader = ParquetReader()
    reader.open(pa.BufferReader(source.read()), pre_buffer=False)
    return reader


def column_indices(reader: ParquetReader, columns: list[str]) -> list[int]:
    """The columns' positions; KeyError names a column the file lacks."""
    return [reader.column_name_idx(name) for name in columns]


def read_parquet(source: BinaryIO, columns: list[str] | None = None) -> pa.Table:
    """A whole small Parquet file (only columns, if given) as a table."""
    reader = open_parquet(source)
    indices = None if columns is None else column_indices(reader, columns)
    return reader.read_all(column_indices=indices, use_threads=False)


def _little_endian(numbers: array[int]) -> pa.Buffer:
    if sys.byteorder != "little":
        numbers.byteswap()
    return pa.py_buffer(numbers)


def binary_array(values: Sequence[bytes], type_: pa.DataType = _BINARY) -> pa.Array:
    """values as a non-null Arrow binary (or string) array, built from its buffers in C.

    The same array pa.array(values, type_) makes, without converting value by value, and
    without pa.array's look for pandas objects, which imports pandas (about 0.3 s) on a
    process's first call: a commit worker's first commit paid it.
    """
    data = b"".join(values)
    if len(data) > _MAX_OFFSET:
        return pa.array(values, type_)
    offsets = array("i", itertools.accumulate(map(len, values), initial=0))
    return pa.Array.from_buffers(type_, len(values), [None, _little_endian(offsets), pa.py_buffer(data)])


def int64_array(values: Sequence[int]) -> pa.Array:
    """values as a non-null Arrow int64 array, built from its buffer (see binary_array)."""
    return pa.Array.from_buffers(pa.int64(), len(values), [None, _little_endian(array("q", values))])
