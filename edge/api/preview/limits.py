"""The bounds of the sandbox's diff and query jobs, shared by the routes (in the server) and the
jobs (in the child) without importing DuckDB into the server."""

from __future__ import annotations

# Bytes read of each side of a table diff, and rows kept: what the UI reports as "compared the
# first ...". 16 MiB of CSV loads and compares in well under a second.
DIFF_BYTES = 16 * 1024 * 1024
DIFF_ROWS = 1_000_000
# Changed rows a diff lists at most (the counts cover all of them).
MAX_LISTED = 500
# Bytes of an object a query reads (whole row groups of a Parquet file), and rows kept.
QUERY_BYTES = 64 * 1024 * 1024
QUERY_ROWS = 5_000_000
PAGE_SIZE = 100
MAX_PAGE = 10_000
