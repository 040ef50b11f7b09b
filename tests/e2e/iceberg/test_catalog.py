"""The Iceberg REST catalog through pyiceberg's public API only."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory, api_call

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids], pa.string())})


def test_namespaces_nested_properties_and_drop(repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for()
    catalog.create_namespace((repo, "main", "sales"), {"owner": "ana"})
    catalog.create_namespace((repo, "main", "sales", "eu"))
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace((repo, "main", "sales"))
    with pytest.raises(BadRequestError, match="parent namespace does not exist"):
        catalog.create_namespace((repo, "main", "nowhere", "child"))

    assert catalog.list_namespaces((repo, "main")) == [(repo, "main", "sales")]
    assert catalog.list_namespaces((repo, "main", "sales")) == [(repo, "main", "sales", "eu")]
    assert catalog.namespace_exists((repo, "main", "sales", "eu"))
    assert not catalog.namespace_exists((repo, "main", "marketing"))

    summary = catalog.update_namespace_properties(
        (repo, "main", "sales"), removals={"owner", "gone"}, updates={"tier": "1"}
    )
    assert summary.removed == ["owner"] and summary.missing == ["gone"] and summary.updated == ["tier"]
    assert catalog.load_namespace_properties((repo, "main", "sales")) == {"tier": "1"}

    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace((repo, "main", "sales"))
    catalog.drop_namespace((repo, "main", "sales", "eu"))
    catalog.drop_namespace((repo, "main", "sales"))
    assert catalog.list_namespaces((repo, "main")) == []
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties((repo, "main", "sales"))


def test_create_append_load_and_errors(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", SCHEMA)
    assert table.location() == f"s3://{repo}/@main/db/events"  # a branch's: ref-neutral
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("db.events", SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table("nodb.events", SCHEMA)

    table.append(rows(0, 10))
    table.append(rows(10, 5))

    loaded = catalog.load_table("db.events")
    assert loaded.scan().to_arrow().num_rows == 15
    assert len(loaded.history()) == 2
    assert catalog.table_exists("db.events")
    assert not catalog.table_exists("db.missing")
    assert catalog.list_tables("db") == [("db", "events")]
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.missing")
    # The catalog's files and the data are objects on the branch, staged (not committed).
    changes = api_call(stack, "GET", f"/repositories/{repo}/branches/main/diff?amount=1000").json()["results"]
    paths = {change["path"] for change in changes}
    assert {"db/_iceberg_namespace.json", "db/events/_iceberg_table.json"} <= paths
    assert any(p.startswith("db/events/metadata/") and p.endswith(".metadata.json") for p in paths)
    assert any(p.startswith("db/events/data/") and p.endswith(".parquet") for p in paths)


def test_concurrent_commits_one_wins(repo: str, catalog_for: CatalogFactory) -> None:
    """Two clients commit over the same snapshot: one commit wins, the other's requirement fails
    (CommitFailedException), and nothing the loser wrote becomes the table's state."""
    first, second = catalog_for(warehouse=f"{repo}.main"), catalog_for(warehouse=f"{repo}.main")
    first.create_namespace("db")
    # pyiceberg retries a failed commit on a refreshed table unless told not to.
    first.create_table("db.t", SCHEMA, properties={"commit.retry.num-retries": "0"}).append(rows(0, 3))
    mine, theirs = first.load_table("db.t"), second.load_table("db.t")
    mine.append(rows(3, 2))
    with pytest.raises(CommitFailedException, match="has changed"):
        theirs.append(rows(100, 7))
    assert first.load_table("db.t").scan().to_arrow().num_rows == 5
    # Refreshed, the second client commits on top of the first's.
    theirs.refresh().append(rows(100, 7))
    assert second.load_table("db.t").scan().to_arrow().num_rows == 12

    # With its retries, pyiceberg's append over a stale table lands after the other's.
    first.create_table("db.retried", SCHEMA).append(rows(0, 1))
    mine, theirs = first.load_table("db.retried"), second.load_table("db.retried")
    mine.append(rows(1, 1))
    theirs.append(rows(2, 1))
    assert first.load_table("db.retried").scan().to_arrow().num_rows == 3


def test_racing_commits_from_one_snapshot_exactly_one_wins(repo: str, catalog_for: CatalogFactory) -> None:
    """Four clients append at once over the same snapshot, without pyiceberg's retries: whichever
    way their requests interleave (the requirement check or the pointer's conditional staging
    refuses the losers), exactly one commit lands."""
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    catalog.create_table("db.race", SCHEMA, properties={"commit.retry.num-retries": "0"}).append(rows(0, 1))
    tables = [catalog_for(warehouse=f"{repo}.main").load_table("db.race") for _ in range(4)]
    start = threading.Barrier(len(tables))

    def append(index: int) -> str:
        start.wait()
        try:
            tables[index].append(rows(100 * (index + 1), index + 1))
        except CommitFailedException:
            return "refused"
        return "landed"

    with ThreadPoolExecutor(len(tables)) as pool:
        outcomes = list(pool.map(append, range(len(tables))))
    assert sorted(outcomes) == ["landed", "refused", "refused", "refused"]
    winner = outcomes.index("landed")
    assert catalog.load_table("db.race").scan().to_arrow().num_rows == 1 + winner + 1


def test_schema_evolution_and_stage_create(repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    # A staged create writes nothing until its transaction commits (assert-create).
    transaction = catalog.create_table_transaction("db.staged", SCHEMA, properties={"owner": "ana"})
    assert not catalog.table_exists("db.staged")
    transaction.append(rows(0, 4))
    transaction.commit_transaction()
    staged = catalog.load_table("db.staged")
    assert staged.properties["owner"] == "ana"
    assert staged.scan().to_arrow().num_rows == 4

    with staged.update_schema() as update:
        update.add_column("score", LongType())
    evolved = catalog.load_table("db.staged")
    assert [f.name for f in evolved.schema().fields] == ["id", "name", "score"]
    assert evolved.schema().schema_id == 1
    # A client still holding the old schema is refused: assert-current-schema-id.
    stale = catalog.load_table("db.staged")
    with evolved.update_schema() as update:
        update.add_column("level", LongType())
    with pytest.raises(CommitFailedException, match="schema"), stale.update_schema() as late:
        late.add_column("other", StringType())
    assert [f.name for f in catalog.load_table("db.staged").schema().fields] == ["id", "name", "score", "level"]


def test_rename_drop_purge_and_register(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    catalog.create_namespace("archive")
    table = catalog.create_table("db.t", SCHEMA)
    table.append(rows(0, 6))
    metadata_location = catalog.load_table("db.t").metadata_location

    renamed = catalog.rename_table("db.t", "archive.t2")
    assert renamed.scan().to_arrow().num_rows == 6
    assert not catalog.table_exists("db.t")
    with pytest.raises(NoSuchTableError):
        catalog.rename_table("db.t", "db.t3")
    catalog.create_table("db.other", SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table("db.other", "archive.t2")
    # The old name is free again (its pointer a tombstone), and the namespace lists only tables.
    catalog.create_table("db.t", SCHEMA)
    assert sorted(catalog.list_tables("db")) == [("db", "other"), ("db", "t")]
    catalog.drop_table("db.t")

    registered = catalog.register_table("db.again", metadata_location)
    assert registered.scan().to_arrow().num_rows == 6
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table("db.again", metadata_location)

    catalog.drop_table("archive.t2")
    assert not catalog.table_exists("archive.t2")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table("archive.t2")
    # Dropped without purge, the files stay: db.again still reads them.
    assert catalog.load_table("db.again").scan().to_arrow().num_rows == 6

    catalog.purge_table("db.other")
    listed = api_call(stack, "GET", f"/repositories/{repo}/refs/main/objects/ls?prefix=db/other/").json()
    assert listed["results"] == []


def test_branch_isolation(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """A table created on main, a Silt branch from it, an append on the branch: main unchanged,
    and the branch's data files are written on the branch."""
    main = catalog_for()
    main.create_namespace((repo, "main", "db"))
    # A write path in the repository is served through the ref, as the location is (on a branch
    # in the ref-neutral form).
    write_path = {"write.data.path": f"s3://{repo}/main/db/t/files"}
    main.create_table((repo, "main", "db", "t"), SCHEMA, properties=write_path).append(rows(0, 10))
    committed = api_call(stack, "POST", f"/repositories/{repo}/branches/main/commits", {"message": "table"})
    assert committed.status == 201, committed.data
    branched = api_call(stack, "POST", f"/repositories/{repo}/branches", {"name": "dev", "source": "main"})
    assert branched.status == 201, branched.data

    on_dev = main.load_table((repo, "dev", "db", "t"))
    assert on_dev.location() == f"s3://{repo}/@dev/db/t"
    assert on_dev.properties["write.data.path"] == f"s3://{repo}/@dev/db/t/files"
    on_dev.append(rows(10, 5))
    # Everything the append wrote (data, manifests, metadata) was staged on dev, nothing on main.
    on_main = api_call(stack, "GET", f"/repositories/{repo}/branches/main/diff?amount=1000").json()["results"]
    assert on_main == []

    assert main.load_table((repo, "dev", "db", "t")).scan().to_arrow().num_rows == 15
    assert main.load_table((repo, "main", "db", "t")).scan().to_arrow().num_rows == 10
    changes = api_call(stack, "GET", f"/repositories/{repo}/branches/dev/diff?amount=1000").json()["results"]
    assert any(c["path"].startswith("db/t/files/") for c in changes)
    assert "db/t/_iceberg_table.json" in {c["path"] for c in changes}

    # Committed on the branch and merged into main (only the branch changed the table), main
    # reads the branch's rows.
    committed = api_call(stack, "POST", f"/repositories/{repo}/branches/dev/commits", {"message": "append"})
    assert committed.status == 201, committed.data
    merged = api_call(stack, "POST", f"/repositories/{repo}/refs/dev/merge/main", {})
    assert merged.status == 200, merged.data
    assert main.load_table((repo, "main", "db", "t")).scan().to_arrow().num_rows == 15

    # A tag is a read-only ref: readable, never written.
    tagged = api_call(stack, "POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": "main~1"})
    assert tagged.status == 201, tagged.data
    assert main.load_table((repo, "v1", "db", "t")).scan().to_arrow().num_rows == 10
    with pytest.raises(ForbiddenError, match="read-only"):
        main.create_namespace((repo, "v1", "other"))


def test_lakefs_relative_uri(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """lakeFS's relative form: the catalog's URI names the repository and ref."""
    relative = catalog_for(uri=f"{stack.endpoints['gateway']}/iceberg/relative_to/{repo}.main/api")
    relative.create_namespace("db")
    relative.create_table("db.t", SCHEMA).append(rows(0, 2))
    assert relative.list_namespaces() == [("db",)]
    assert catalog_for().load_table((repo, "main", "db", "t")).scan().to_arrow().num_rows == 2


def test_lakefs_prefix_and_paged_lists(repo: str, catalog_for: CatalogFactory) -> None:
    """lakeFS's examples configure `prefix: lakefs` with absolute names; lists page."""
    catalog = catalog_for(prefix="lakefs", **{"rest-page-size": "2"})
    for name in ("a", "b", "c", "d", "e"):
        catalog.create_namespace((repo, "main", name))
    assert catalog.list_namespaces((repo, "main")) == [(repo, "main", n) for n in "abcde"]
    for name in ("t1", "t2", "t3"):
        catalog.create_table((repo, "main", "a", name), SCHEMA)
    assert catalog.list_tables((repo, "main", "a")) == [(repo, "main", "a", n) for n in ("t1", "t2", "t3")]


def test_table_level_diff_between_refs(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """GET .../refs/{left}/diff/{right}/tables: per table, snapshots, rows and schema changes."""
    main = catalog_for(warehouse=f"{repo}.main")
    main.create_namespace("db")
    events = main.create_table("db.events", Schema(*SCHEMA.fields, NestedField(3, "n", IntegerType(), required=False)))
    events.append(rows(0, 3).append_column("n", pa.array([1, 2, 3], pa.int32())))
    main.create_table("db.gone", SCHEMA)
    main.create_table("db.same", SCHEMA)
    assert api_call(stack, "POST", f"/repositories/{repo}/branches/main/commits", {"message": "base"}).status == 201
    assert api_call(stack, "POST", f"/repositories/{repo}/branches", {"name": "dev", "source": "main"}).status == 201

    dev = catalog_for(warehouse=f"{repo}.dev")
    changed = dev.load_table("db.events")
    base_snapshots = {s.snapshot_id for s in changed.snapshots()}
    changed.append(rows(10, 4).append_column("n", pa.array([4, 5, 6, 7], pa.int32())))
    changed.delete("id = 0")
    with changed.update_schema() as update:
        update.add_column("score", DoubleType())
        update.rename_column("name", "label")
        update.update_column("n", LongType())
    dev.drop_table("db.gone")
    dev.create_table("db.added", SCHEMA).append(rows(0, 2))
    assert api_call(stack, "POST", f"/repositories/{repo}/branches/dev/commits", {"message": "dev"}).status == 201

    answer = api_call(stack, "GET", f"/repositories/{repo}/refs/main/diff/dev/tables")
    assert answer.status == 200, answer.data
    body = answer.json()
    tables = {t["table"]: t for t in body["results"]}
    assert set(tables) == {"db.added", "db.events", "db.gone"}  # db.same is unchanged
    assert tables["db.added"]["type"] == "added" and tables["db.added"]["left"] is None
    assert tables["db.added"]["rows_added"] == 2
    assert tables["db.gone"]["type"] == "removed" and tables["db.gone"]["right"] is None

    diff = tables["db.events"]
    assert diff["type"] == "changed"
    # As pyiceberg's own snapshots of the table on dev count them.
    new = [s for s in dev.load_table("db.events").snapshots() if s.snapshot_id not in base_snapshots]
    assert diff["snapshots_added_count"] == len(new) == 2
    assert [s["snapshot_id"] for s in diff["snapshots_added"]] == [s.snapshot_id for s in new]
    assert diff["rows_added"] == sum(int(s.summary.get("added-records") or 0) for s in new if s.summary) >= 4
    assert diff["rows_deleted"] == sum(int(s.summary.get("deleted-records") or 0) for s in new if s.summary) >= 1
    assert diff["snapshots_removed_count"] == 0
    assert diff["left"]["total_records"] == 3 and diff["right"]["total_records"] == 6
    changes = {(c["change"], c["name"]) for c in diff["schema_changes"]}
    assert changes == {("added", "score"), ("renamed", "label"), ("type_changed", "n")}
    type_change = next(c for c in diff["schema_changes"] if c["change"] == "type_changed")
    assert (type_change["previous_type"], type_change["type"]) == ("int", "long")

    # Pages of tables, the next one after the last key a page scanned.
    first = api_call(stack, "GET", f"/repositories/{repo}/refs/main/diff/dev/tables?amount=1&type=two_dot").json()
    assert len(first["results"]) == 1 and first["pagination"]["has_more"]
    after = first["pagination"]["next_offset"]
    rest = api_call(stack, "GET", f"/repositories/{repo}/refs/main/diff/dev/tables?amount=10&after={after}").json()
    assert {t["table"] for t in first["results"] + rest["results"]} == set(tables)
    # Typed errors: an unknown ref, a page size out of range.
    assert api_call(stack, "GET", f"/repositories/{repo}/refs/main/diff/nope/tables").status == 404
    assert api_call(stack, "GET", f"/repositories/{repo}/refs/main/diff/dev/tables?amount=0").status == 400
