"""Reading and writing the committed layer's Parquet files."""

from __future__ import annotations

import itertools
import sys
from array import array
from collections.abc import Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

# Arrow's 32-bit offsets: a binary column of more bytes than this needs pa.array's chunking.
_MAX_OFFSET = 2**31 - 1
_BINARY = pa.binary()


def read_parquet(source: BinaryIO, columns: list[str] | None = None) -> pa.Table:
    """A whole small Parquet file, read from memory through ParquetFile.

    pq.read_table goes through the datasets layer and calls back into the Python file object;
    for the files of the committed layer that costs ~0.5 ms per file, about 8 times the read
    itself, and a path-filtered log reads one metarange per commit.
    """
    return pq.ParquetFile(pa.BufferReader(source.read())).read(columns=columns, use_threads=False)


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
