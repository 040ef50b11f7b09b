"""Ref-neutral paths: a branch's files are named `s3://<repo>/@<branch>/...`, an address read by
the key alone, so a table merged from a branch reads after the branch is deleted, and a branch
forked from main reads after main deleted its keys. pyiceberg's public API, the REST API for
branches, commits and merges, boto3 at the gateway for plain S3 deletes."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
from pyarrow import fs

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory
from tests.e2e.iceberg.test_catalog import SCHEMA, rows
from tests.e2e.iceberg.test_merges import branch_off, commit, ok
from tests.support.gateway_stack import stack_s3_client


def _data_files(table: Any) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


def test_a_merged_table_reads_after_its_branch_is_deleted(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    main = catalog_for(warehouse=f"{repo}.main")
    main.create_namespace("db")
    created = main.create_table("db.t", SCHEMA)
    assert created.location() == f"s3://{repo}/@main/db/t"
    assert created.metadata_location.startswith(f"s3://{repo}/@main/db/t/metadata/")
    created.append(rows(0, 10))
    commit(stack, repo, "main")
    branch_off(stack, repo, "b1")
    on_b1 = catalog_for(warehouse=f"{repo}.b1").load_table("db.t")
    assert on_b1.location() == f"s3://{repo}/@b1/db/t"
    on_b1.append(rows(1000, 100))
    commit(stack, repo, "b1")
    ok(stack, "POST", f"/repositories/{repo}/refs/b1/merge/main", {}, 200)
    ok(stack, "DELETE", f"/repositories/{repo}/branches/b1", None, 204)

    merged = main.load_table("db.t")
    files = _data_files(merged)
    assert any(path.startswith(f"s3://{repo}/@b1/db/t/data/") for path in files), files
    ids = merged.scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == [*range(10), *range(1000, 1100)]


def test_a_branch_reads_after_main_deletes_its_files(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    main = catalog_for(warehouse=f"{repo}.main")
    main.create_namespace("db")
    table = main.create_table("db.t", SCHEMA)
    table.append(rows(0, 5))
    table.append(rows(5, 5))
    commit(stack, repo, "main")
    branch_off(stack, repo, "dev")
    # On main, the data files' keys go (as expire_snapshots with purge deletes them), one by its
    # branch form and one by its ref-neutral form, and main's change is committed.
    s3 = stack_s3_client(stack)
    files = sorted(_data_files(table))
    assert len(files) == 2 and all(path.startswith(f"s3://{repo}/@main/") for path in files)
    first, second = (path.removeprefix(f"s3://{repo}/@main/") for path in files)
    s3.delete_object(Bucket=repo, Key=f"main/{first}")
    s3.delete_object(Bucket=repo, Key=f"@main/{second}")
    assert "Contents" not in s3.list_objects_v2(Bucket=repo, Prefix="main/db/t/data/")
    commit(stack, repo, "main")

    on_dev = catalog_for(warehouse=f"{repo}.dev").load_table("db.t")
    assert sorted(on_dev.scan().to_arrow().column("id").to_pylist()) == list(range(10))


def test_files_named_by_the_old_form_keep_their_paths(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """A data file added by its branch form (as tables written before ref-neutral paths name
    theirs) is read through that branch, next to files written the new way."""
    assert stack.admin is not None
    main = catalog_for(warehouse=f"{repo}.main")
    main.create_namespace("db")
    table = main.create_table("db.t", SCHEMA)
    table.append(rows(0, 3))
    s3fs = fs.S3FileSystem(
        access_key=stack.admin.access_key_id,
        secret_key=stack.admin.secret_access_key.get_secret_value(),
        endpoint_override=stack.endpoints["gateway"],
        region="us-east-1",
    )
    pq.write_table(rows(100, 2), f"{repo}/main/db/t/data/old-form.parquet", filesystem=s3fs)
    table.add_files([f"s3://{repo}/main/db/t/data/old-form.parquet"])
    reloaded = main.load_table("db.t")
    assert f"s3://{repo}/main/db/t/data/old-form.parquet" in _data_files(reloaded)
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 100, 101]
