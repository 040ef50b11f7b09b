"""Two samples of a table (CSV, TSV or Parquet; preview/table_load.py) compared in DuckDB, in the
sandbox's child: the schema change (columns added, removed, of another type) and the rows
added, removed and changed. Rows are matched (MATCHES) on a key column, the one asked for or
else one detected (a column named like an id, unique and never empty on both sides); without
one, on their content (equal rows pair up, and the rest pair by their order among the rest, so
a deleted row is one change, not every row after it); or, when asked, by position. Counts cover
the whole samples; at most `limit` changed rows are listed, in key (or position) order."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import duckdb

from edge.api.preview.limits import DIFF_ROWS
from edge.api.preview.parquet import MAX_CELL_CHARS, ReadRange
from edge.api.preview.table_load import JobRefused, Sample, columns, load, quoted

LEFT, RIGHT = "left_rows", "right_rows"

Match = Literal["key", "content", "position"]
# What a caller may ask for: "auto" is a detected key, else content.
MATCHES = ("auto", "content", "position")
# Column names that say "identifier": id, key, uuid, pk, and names ending in one (order_id,
# customer-key, userId).
_ID_LIKE = re.compile(r"^(id|key|uuid|pk)$|[_\-\s.](id|key|uuid)$|[a-z0-9](Id|ID|Key|Uuid)$")


def _schema_change(left: list[dict[str, str]], right: list[dict[str, str]]) -> dict[str, Any]:
    left_types = {column["name"]: column["type"] for column in left}
    right_types = {column["name"]: column["type"] for column in right}
    return {
        "left": left,
        "right": right,
        "added": [column for column in right if column["name"] not in left_types],
        "removed": [column for column in left if column["name"] not in right_types],
        "changed": [
            {"name": name, "left": left_types[name], "right": kind}
            for name, kind in right_types.items()
            if name in left_types and left_types[name] != kind
        ],
    }


def _text(name: str, side: str) -> str:
    return f"CAST({side}.{quoted(name)} AS VARCHAR)"


def _value(name: str, side: str, same_type: bool) -> str:
    """A column's value as compared: itself when both sides have the same type, else its text
    (an int column that became double compares 10 with "10.0", and so shows as changed)."""
    return f"{side}.{quoted(name)}" if same_type else _text(name, side)


def _check_key(con: duckdb.DuckDBPyConnection, table: str, key: str, side: str) -> None:
    row = con.execute(f"SELECT count(*) - count(DISTINCT {quoted(key)}) FROM {table}").fetchone()
    repeated = int(row[0]) if row else 0
    if repeated:
        raise JobRefused(
            400, f"the key column {key!r} is not unique on the {side} side ({repeated} repeated or empty values)"
        )


def _unique(con: duckdb.DuckDBPyConnection, table: str, key: str) -> bool:
    row = con.execute(f"SELECT count(*) - count(DISTINCT {quoted(key)}) FROM {table}").fetchone()
    return row is not None and int(row[0]) == 0


def detect_key(con: duckdb.DuckDBPyConnection, left: dict[str, str], right: dict[str, str]) -> str | None:
    """The column rows are matched on when none is asked for: one both sides have, named like an
    identifier (`id` first, then in the left side's order), with a value in every row and no
    value twice on either side; None when no column qualifies."""
    named = [name for name in left if name in right and _ID_LIKE.search(name)]
    named.sort(key=lambda name: name.lower() != "id")
    for name in named:
        if _unique(con, LEFT, name) and _unique(con, RIGHT, name):
            return name
    return None


def _content_pairs(con: duckdb.DuckDBPyConnection, common: list[str], same: dict[str, bool]) -> None:
    """PAIRED (lr, rr): equal rows paired (the n-th copy of a row with the n-th copy), then the
    remaining rows of each side paired by their order among the remaining (a row edited in
    place is one changed row); the rest have no partner."""
    for table, alias, side in ((LEFT, "lc", "l"), (RIGHT, "rc", "r")):
        values = ", ".join(
            f"{quoted(name) if same[name] else f'CAST({quoted(name)} AS VARCHAR)'} AS v{i}"
            for i, name in enumerate(common)
        )
        partition = ", ".join(f"v{i}" for i in range(len(common)))
        con.execute(
            f"""CREATE TEMP TABLE {alias} AS
                SELECT *, row_number() OVER (PARTITION BY {partition} ORDER BY {side}r) AS n
                FROM (SELECT rowid AS {side}r, {values} FROM {table})"""
        )
    equal = " AND ".join(f"lc.v{i} IS NOT DISTINCT FROM rc.v{i}" for i in range(len(common)))
    con.execute(f"CREATE TEMP TABLE same_rows AS SELECT lc.lr, rc.rr FROM lc JOIN rc ON lc.n = rc.n AND {equal}")
    con.execute(
        """CREATE TEMP TABLE paired AS
           SELECT lr, rr FROM same_rows
           UNION ALL
           SELECT lu.lr, ru.rr
           FROM (SELECT lr, row_number() OVER (ORDER BY lr) AS k FROM lc ANTI JOIN same_rows USING (lr)) lu
           FULL OUTER JOIN (SELECT rr, row_number() OVER (ORDER BY rr) AS k FROM rc ANTI JOIN same_rows USING (rr)) ru
           ON lu.k = ru.k"""
    )


def _cells(values: tuple[Any, ...]) -> list[str | None]:
    return [None if value is None else str(value)[:MAX_CELL_CHARS] for value in values]


def compare(
    con: duckdb.DuckDBPyConnection,
    left: dict[str, str],
    right: dict[str, str],
    key: str | None,
    limit: int,
    match: Match = "position",
) -> dict[str, Any]:
    """Counts and the first `limit` differing rows of LEFT against RIGHT; `left` and `right` are
    each side's columns (name: type, in order). Rows are matched on `key` when there is one,
    else as `match` says."""
    common = [name for name in left if name in right]
    same = {name: left[name] == right[name] for name in common}
    tests = [f"{_value(name, 'l', same[name])} IS DISTINCT FROM {_value(name, 'r', same[name])}" for name in common]
    differs = " OR ".join(tests) or "false"
    if key is not None:
        for table, names, side in ((LEFT, left, "left"), (RIGHT, right, "right")):
            if key not in names:
                raise JobRefused(400, f"no key column {key!r} on the {side} side")
            _check_key(con, table, key, side)
        join = f"{_value(key, 'l', same[key])} = {_value(key, 'r', same[key])}"
        order = f"coalesce({_value(key, 'l', same[key])}, {_value(key, 'r', same[key])})"
    else:
        join = "l.rowid = r.rowid"
        order = "coalesce(l.rowid, r.rowid)"
    # The join once, into a table both the counts and the listing read.
    if key is None and match == "content" and common:
        _content_pairs(con, common, same)
        con.execute(
            f"""CREATE TEMP TABLE pairs AS
                SELECT p.lr, p.rr, ({differs}) AS differs, coalesce(p.rr, p.lr) AS ord
                FROM paired p LEFT JOIN {LEFT} l ON l.rowid = p.lr LEFT JOIN {RIGHT} r ON r.rowid = p.rr"""
        )
    else:
        con.execute(
            f"""CREATE TEMP TABLE pairs AS
                SELECT l.rowid AS lr, r.rowid AS rr, ({differs}) AS differs, {order} AS ord
                FROM {LEFT} l FULL OUTER JOIN {RIGHT} r ON {join}"""
        )
    counted = con.execute(
        """SELECT count(*) FILTER (WHERE lr IS NULL), count(*) FILTER (WHERE rr IS NULL),
                  count(*) FILTER (WHERE lr IS NOT NULL AND rr IS NOT NULL AND differs),
                  count(*) FILTER (WHERE lr IS NOT NULL AND rr IS NOT NULL AND NOT differs)
           FROM pairs"""
    ).fetchone()
    assert counted is not None
    left_names, right_names = list(left), list(right)
    left_cells = ", ".join(_text(name, "l") for name in left_names) or "NULL"
    right_cells = ", ".join(_text(name, "r") for name in right_names) or "NULL"
    listed = con.execute(
        f"""SELECT p.lr, p.rr, {left_cells}, {right_cells}
            FROM (SELECT * FROM pairs WHERE lr IS NULL OR rr IS NULL OR differs ORDER BY ord LIMIT {int(limit)}) p
            LEFT JOIN {LEFT} l ON l.rowid = p.lr LEFT JOIN {RIGHT} r ON r.rowid = p.rr
            ORDER BY p.ord"""
    ).fetchall()
    rows = []
    width = max(len(left_names), 1)
    for found in listed:
        left_row, right_row = _cells(found[2 : 2 + width]), _cells(found[2 + width :])
        if found[0] is None:
            rows.append({"change": "added", "position": found[1], "right": right_row})
        elif found[1] is None:
            rows.append({"change": "removed", "position": found[0], "left": left_row})
        else:
            changed = [
                name for name in common if left_row[left_names.index(name)] != right_row[right_names.index(name)]
            ]
            rows.append(
                {"change": "changed", "position": found[1], "left": left_row, "right": right_row, "columns": changed}
            )
    return {
        "counts": {
            "added": int(counted[0]),
            "removed": int(counted[1]),
            "changed": int(counted[2]),
            "unchanged": int(counted[3]),
        },
        "rows": rows,
    }


def diff(
    con: duckdb.DuckDBPyConnection,
    fmt: str,
    left: tuple[ReadRange, int] | None,
    right: tuple[ReadRange, int] | None,
    key: str | None,
    limit: int,
    budget: int,
    workdir: Path,
    match: str = "auto",
) -> dict[str, Any]:
    """{format, key, match, key_detected, schema: {left, right, added, removed, changed},
    counts, rows, sample: {left, right, limit_bytes, limit_rows}}. `match` (MATCHES) applies
    when no key is asked for. A side that is None (the object is absent there) compares as a
    table with no rows and no columns."""
    samples: dict[str, Sample | None] = {}
    for table, side, source in ((LEFT, "left", left), (RIGHT, "right", right)):
        samples[side] = None
        if source is not None:
            samples[side] = load(con, table, fmt, source[0], source[1], budget, DIFF_ROWS, workdir)
    left_schema = columns(con, LEFT) if left else []
    right_schema = columns(con, RIGHT) if right else []
    # An absent side: an empty table of the other side's columns, so the rows all compare added
    # (or removed); the schema still reports the side as having no columns.
    if not left:
        con.execute(f"CREATE TABLE {LEFT} AS SELECT * FROM {RIGHT} LIMIT 0")
    if not right:
        con.execute(f"CREATE TABLE {RIGHT} AS SELECT * FROM {LEFT} LIMIT 0")
    left_types = {column["name"]: column["type"] for column in (left_schema or right_schema)}
    right_types = {column["name"]: column["type"] for column in (right_schema or left_schema)}
    if key is not None and (not left or not right):
        key = key if key in left_types else None
    detected = False
    how: Match = "key" if key is not None else "position"
    if key is None and match == "auto" and left and right:
        key = detect_key(con, left_types, right_types)
        detected = key is not None
    if key is not None:
        how = "key"
    elif match in ("auto", "content") and left and right and any(name in right_types for name in left_types):
        how = "content"
    result = compare(con, left_types, right_types, key, limit, how)
    return {
        "format": fmt,
        "key": key,
        "match": how,
        "key_detected": detected,
        "schema": _schema_change(left_schema, right_schema),
        **result,
        "sample": {
            "left": samples["left"].as_json() if samples["left"] else None,
            "right": samples["right"].as_json() if samples["right"] else None,
            "limit_bytes": budget,
            "limit_rows": DIFF_ROWS,
        },
    }
