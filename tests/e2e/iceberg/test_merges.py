"""Table-aware merges: two branches that both appended to one table merge without conflict,
the second by a pull request; changes that do not combine are a 409 naming the table. pyiceberg's
public API for the table, the REST API for branches, commits, tags, merges and pull requests."""

from __future__ import annotations

from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.types import LongType, StringType

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory, api_call
from tests.e2e.iceberg.test_catalog import SCHEMA, rows


def ok(stack: Stack, method: str, path: str, body: Any, status: int) -> Any:
    answer = api_call(stack, method, path, body)
    assert answer.status == status, answer.data
    json_answer = (answer.headers.get("content-type") or "").startswith("application/json")
    return answer.json() if json_answer else answer.data


def commit(stack: Stack, repo: str, branch: str) -> None:
    ok(stack, "POST", f"/repositories/{repo}/branches/{branch}/commits", {"message": f"on {branch}"}, 201)


def branch_off(stack: Stack, repo: str, *names: str) -> None:
    for name in names:
        ok(stack, "POST", f"/repositories/{repo}/branches", {"name": name, "source": "main"}, 201)


def summary_of(table: Table, snapshot_id: int) -> Summary:
    snapshot = table.snapshot_by_id(snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    return snapshot.summary


def appended_on_two_branches(stack: Stack, repo: str, catalog_for: CatalogFactory) -> Catalog:
    """`db.t` with 10 rows (ids 0..9) on main, committed; branches b1 and b2 from it, 100 rows
    (ids 1000..) appended on b1 and 50 (ids 2000..) on b2, each committed. main's catalog."""
    main = catalog_for(warehouse=f"{repo}.main")
    main.create_namespace("db")
    main.create_table("db.t", SCHEMA).append(rows(0, 10))
    commit(stack, repo, "main")
    branch_off(stack, repo, "b1", "b2")
    catalog_for(warehouse=f"{repo}.b1").load_table("db.t").append(rows(1000, 100))
    commit(stack, repo, "b1")
    catalog_for(warehouse=f"{repo}.b2").load_table("db.t").append(rows(2000, 50))
    commit(stack, repo, "b2")
    return main


def test_appends_on_two_branches_merge(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    main = appended_on_two_branches(stack, repo, catalog_for)
    ok(stack, "POST", f"/repositories/{repo}/tags", {"id": "b1-done", "ref": "b1"}, 201)

    ok(stack, "POST", f"/repositories/{repo}/refs/b1/merge/main", {}, 200)
    # The second merge conflicts on the table's pointer as objects; the conflict check says the
    # merge combines the table. It goes through a pull request, whose merge combines the table
    # as a direct merge does.
    check = ok(stack, "GET", f"/repositories/{repo}/refs/b2/merge/main/conflicts", None, 200)
    assert (check["mergeable"], check["conflicts"], check["tables_combined"]) == (True, [], ["db.t"])
    pull = ok(
        stack,
        "POST",
        f"/repositories/{repo}/pulls",
        {"title": "b2", "source_branch": "b2", "destination_branch": "main"},
        201,
    )
    ok(stack, "PUT", f"/repositories/{repo}/pulls/{pull['id']}/merge", None, 200)

    merged = main.load_table("db.t")
    ids = merged.scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == [*range(10), *range(1000, 1100), *range(2000, 2050)]
    history = merged.history()
    assert len(history) == 3
    summaries = [summary_of(merged, entry.snapshot_id) for entry in history]
    assert [summary["added-records"] for summary in summaries] == ["10", "100", "50"]
    assert [summary.operation for summary in summaries] == [Operation.APPEND] * 3
    assert summaries[-1]["total-records"] == "160"
    # Each snapshot reads its rows: the one b1 added, then b2's on top.
    assert merged.scan(snapshot_id=history[1].snapshot_id).to_arrow().num_rows == 110
    # Nothing was staged on main: the combined files are in the merge commit.
    assert ok(stack, "GET", f"/repositories/{repo}/branches/main/diff", None, 200)["results"] == []
    # A tag of b1 reads b1's rows, as b1 had them.
    at_tag = catalog_for().load_table((repo, "b1-done", "db", "t")).scan().to_arrow()
    assert sorted(at_tag.column("id").to_pylist()) == [*range(10), *range(1000, 1100)]

    # Appending on main after the merge goes on from the combined snapshot.
    main.load_table("db.t").append(rows(3000, 1))
    assert main.load_table("db.t").scan().to_arrow().num_rows == 161


def test_schema_changed_on_both_sides_is_a_conflict_naming_the_table(
    stack: Stack, repo: str, catalog_for: CatalogFactory
) -> None:
    main = catalog_for(warehouse=f"{repo}.main")
    main.create_namespace("db")
    main.create_table("db.s", SCHEMA).append(rows(0, 3))
    commit(stack, repo, "main")
    branch_off(stack, repo, "c1", "c2")
    for name, column, kind in (("c1", "score", LongType()), ("c2", "label", StringType())):
        with catalog_for(warehouse=f"{repo}.{name}").load_table("db.s").update_schema() as update:
            update.add_column(column, kind)
        commit(stack, repo, name)
    ok(stack, "POST", f"/repositories/{repo}/refs/c1/merge/main", {}, 200)

    check = ok(stack, "GET", f"/repositories/{repo}/refs/c2/merge/main/conflicts", None, 200)
    assert check["mergeable"] is False
    assert check["tables"] == [{"table": "db.s", "reason": "schema changed on both sides"}]
    refused = api_call(stack, "POST", f"/repositories/{repo}/refs/c2/merge/main", {})
    assert refused.status == 409, refused.data
    body = refused.json()
    assert body["tables"] == [{"table": "db.s", "reason": "schema changed on both sides"}]
    assert "table db.s: schema changed on both sides" in body["message"]
    assert [c["path"] for c in body["conflicts"]] == ["db/s/_iceberg_table.json"]
    assert [f.name for f in main.load_table("db.s").schema().fields] == ["id", "name", "score"]
