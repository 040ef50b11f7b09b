"""Reading the committed layer's Parquet files."""

from __future__ import annotations

from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq


def read_parquet(source: BinaryIO, columns: list[str] | None = None) -> pa.Table:
    """A whole small Parquet file, read from memory through ParquetFile.

    pq.read_table goes through the datasets layer and calls back into the Python file object;
    for the files of the committed layer that costs ~0.5 ms per file, about 8 times the read
    itself, and a path-filtered log reads one metarange per commit.
    """
    return pq.ParquetFile(pa.BufferReader(source.read())).read(columns=columns, use_threads=False)
