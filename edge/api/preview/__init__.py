"""Objects decoded for people, in a sandboxed child process (sandbox.py): a Parquet object's
first rows (parquet.py), two versions of a table or a text compared (table_diff.py, text_diff.py),
SQL over one table (table_query.py), each job's sample loaded by table_load.py and dispatched by
jobs.py within limits.py's bounds; kinds.py says which of these an object gets."""
