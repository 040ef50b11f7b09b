"""How two samples of a table pair their rows (edge/api/preview/table_diff.py): on a detected
key, on content with order as the fallback, or by position, in DuckDB as the sandbox runs it."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from edge.api.preview.table_diff import LEFT, RIGHT, compare, detect_key


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    yield connection
    connection.close()


def _tables(con: duckdb.DuckDBPyConnection, columns: str, left: list[str], right: list[str]) -> dict[str, str]:
    for table, rows in ((LEFT, left), (RIGHT, right)):
        con.execute(f"CREATE TABLE {table} ({columns})")
        if rows:
            con.execute(f"INSERT INTO {table} VALUES {', '.join(rows)}")
    return {
        str(row[0]): str(row[1])
        for row in con.execute(f"SELECT name, type FROM pragma_table_info('{LEFT}')").fetchall()
    }


CITIES = ["('oslo', 7)", "('lima', 20)", "('rome', 15)", "('kyiv', 9)"]


def test_a_deleted_row_without_a_key_is_one_change_on_content(con: duckdb.DuckDBPyConnection) -> None:
    types = _tables(con, "city VARCHAR, temp INTEGER", CITIES, [CITIES[0], *CITIES[2:]])
    assert detect_key(con, types, types) is None
    result = compare(con, types, types, None, 100, "content")
    assert result["counts"] == {"added": 0, "removed": 1, "changed": 0, "unchanged": 3}
    assert result["rows"] == [{"change": "removed", "position": 1, "left": ["lima", "20"]}]


def test_by_position_the_same_deletion_shifts_every_later_row(con: duckdb.DuckDBPyConnection) -> None:
    types = _tables(con, "city VARCHAR, temp INTEGER", CITIES, [CITIES[0], *CITIES[2:]])
    result = compare(con, types, types, None, 100, "position")
    assert result["counts"] == {"added": 0, "removed": 1, "changed": 2, "unchanged": 1}


def test_on_content_an_edited_row_pairs_with_its_old_self_and_copies_count(con: duckdb.DuckDBPyConnection) -> None:
    left = [*CITIES, CITIES[0]]  # oslo twice
    right = [CITIES[0], "('lima', 21)", *CITIES[2:]]  # one oslo fewer, lima edited
    types = _tables(con, "city VARCHAR, temp INTEGER", left, right)
    result = compare(con, types, types, None, 100, "content")
    assert result["counts"] == {"added": 0, "removed": 1, "changed": 1, "unchanged": 3}
    changed = next(row for row in result["rows"] if row["change"] == "changed")
    assert changed["left"] == ["lima", "20"] and changed["right"] == ["lima", "21"] and changed["columns"] == ["temp"]


def test_a_unique_id_like_column_is_detected_and_a_repeated_one_is_not(con: duckdb.DuckDBPyConnection) -> None:
    rows = ["(1, 10, 'a')", "(2, 10, 'b')", "(3, 11, 'c')"]
    types = _tables(con, "order_id INTEGER, customer_id INTEGER, note VARCHAR", rows, [rows[0], rows[2]])
    # customer_id repeats 10: not a key; order_id is.
    assert detect_key(con, types, types) == "order_id"
    result = compare(con, types, types, "order_id", 100, "key")
    assert result["counts"] == {"added": 0, "removed": 1, "changed": 0, "unchanged": 2}


def test_id_comes_before_other_id_like_names_and_empty_values_disqualify(con: duckdb.DuckDBPyConnection) -> None:
    types = _tables(
        con, "user_key INTEGER, id INTEGER, ref_id INTEGER", ["(1, 5, NULL)", "(2, 6, 1)"], ["(1, 5, NULL)"]
    )
    assert detect_key(con, types, types) == "id"
    con.execute(f"UPDATE {RIGHT} SET id = NULL")
    assert detect_key(con, types, types) == "user_key"
