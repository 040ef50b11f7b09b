"""lakefs-spec (fsspec) against the REST API: pandas and PyArrow read and write Parquet and CSV by
`lakefs://repo/ref/path` URL, directory listings, file transfers and a versioning transaction."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lakefs
import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type information
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakefs_spec import LakeFSFileSystem

from silt.namespaces import parse_namespace
from tests.e2e.api.conftest import Api


@pytest.fixture(scope="module")
def options(api: Api) -> dict[str, Any]:
    """What pandas passes to the filesystem as `storage_options`."""
    admin = api.stack.admin
    return {
        "host": api.stack.endpoint,
        "username": admin.access_key_id,
        "password": admin.secret_access_key.get_secret_value(),
    }


@pytest.fixture(scope="module")
def fs(options: dict[str, Any]) -> LakeFSFileSystem:
    return LakeFSFileSystem(**options)


@pytest.fixture
def repo_name(fs: LakeFSFileSystem) -> Iterator[str]:
    name = f"spec-{secrets.token_hex(5)}"
    repo = lakefs.Repository(name, client=fs.client).create(storage_namespace=f"local://{name}")
    yield name
    repo.delete()


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"id": [1, 2, 3], "name": ["ada", "bob", "cy"], "score": [0.5, 1.25, -3.0]})


def test_pandas_writes_and_reads_parquet_and_csv(options: dict[str, Any], repo_name: str) -> None:
    frame = _frame()
    parquet_url = f"lakefs://{repo_name}/main/tables/scores.parquet"
    csv_url = f"lakefs://{repo_name}/main/tables/scores.csv"
    frame.to_parquet(parquet_url, storage_options=options, index=False)
    frame.to_csv(csv_url, storage_options=options, index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(parquet_url, storage_options=options), frame)
    pd.testing.assert_frame_equal(pd.read_csv(csv_url, storage_options=options), frame)


def test_pyarrow_reads_parquet_by_url_at_a_commit(fs: LakeFSFileSystem, repo_name: str) -> None:
    table = pa.table({"k": list(range(1000)), "v": [f"row-{i}" for i in range(1000)]})
    with fs.open(f"lakefs://{repo_name}/main/big/part-0.parquet", "wb") as out:
        pq.write_table(table, out, row_group_size=100)
    commit = lakefs.Branch(repo_name, "main", client=fs.client).commit("parquet in")
    # PyArrow reads the footer first with ranged reads: Range/206 through the filesystem.
    read = pq.read_table(f"{repo_name}/{commit.id}/big/part-0.parquet", filesystem=fs)
    assert read.equals(table)
    first_group = pq.ParquetFile(fs.open(f"lakefs://{repo_name}/main/big/part-0.parquet", "rb")).read_row_group(0)
    assert first_group.column("k").to_pylist() == list(range(100))


def test_listing_info_transfers_and_removal(fs: LakeFSFileSystem, repo_name: str, tmp_path: Path) -> None:
    for i in range(3):
        fs.pipe(f"lakefs://{repo_name}/main/dir/f{i}.txt", f"content {i}".encode())
    fs.pipe(f"lakefs://{repo_name}/main/dir/sub/deep.txt", b"deep")
    names = fs.ls(f"lakefs://{repo_name}/main/dir/", detail=False, refresh=True)
    assert sorted(names) == [f"{repo_name}/main/dir/f{i}.txt" for i in range(3)] + [f"{repo_name}/main/dir/sub/"]
    info = fs.info(f"lakefs://{repo_name}/main/dir/f1.txt")
    assert info["type"] == "file" and info["size"] == 9
    assert info["checksum"] == hashlib.md5(b"content 1").hexdigest()
    assert fs.info(f"lakefs://{repo_name}/main/dir/sub")["type"] == "directory"
    assert fs.exists(f"lakefs://{repo_name}/main/dir/sub") and not fs.exists(f"lakefs://{repo_name}/main/nope")

    local = tmp_path / "up.bin"
    local.write_bytes(secrets.token_bytes(70_000))
    fs.put_file(str(local), f"lakefs://{repo_name}/main/up.bin")
    fs.get_file(f"lakefs://{repo_name}/main/up.bin", str(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == local.read_bytes()
    assert fs.cat_file(f"lakefs://{repo_name}/main/up.bin", start=10, end=20) == local.read_bytes()[10:20]

    fs.rm(f"lakefs://{repo_name}/main/dir/", recursive=True)
    assert not fs.exists(f"lakefs://{repo_name}/main/dir/f0.txt")
    assert fs.ls(f"lakefs://{repo_name}/main/", detail=False, refresh=True) == [f"{repo_name}/main/up.bin"]
    with pytest.raises(FileNotFoundError):
        fs.open(f"lakefs://{repo_name}/main/dir/f0.txt", "rb")


def test_transaction_commits_tags_and_merges(fs: LakeFSFileSystem, options: dict[str, Any], repo_name: str) -> None:
    frame = _frame()
    with fs.transaction(repo_name, "main") as tx:
        frame.to_csv(f"lakefs://{repo_name}/{tx.branch.id}/t.csv", storage_options=options, index=False)
        made = tx.commit(message="csv from a transaction")
        tx.tag(made, "release")
    # The transaction's branch was merged into main and deleted.
    pd.testing.assert_frame_equal(pd.read_csv(f"lakefs://{repo_name}/main/t.csv", storage_options=options), frame)
    pd.testing.assert_frame_equal(pd.read_csv(f"lakefs://{repo_name}/release/t.csv", storage_options=options), frame)
    assert [b.id for b in lakefs.Repository(repo_name, client=fs.client).branches()] == ["main"]


def test_a_repository_under_the_default_namespace_prefix(fs: LakeFSFileSystem) -> None:
    """What lakefs-spec's own test suite does to make its repository: the server's prefix, a
    slash and the name must be a namespace the server accepts."""
    prefix = fs.client.storage_config.default_namespace_prefix
    assert prefix
    name = f"spec-prefix-{secrets.token_hex(4)}"
    repo = lakefs.Repository(name, client=fs.client).create(storage_namespace=f"{prefix}/{name}")
    try:
        # Stored in canonical form: "local:///x" names "local://x".
        assert repo.properties.storage_namespace == str(parse_namespace(f"{prefix}/{name}"))
        fs.pipe(f"lakefs://{name}/main/x.txt", b"x")
        assert fs.cat(f"lakefs://{name}/main/x.txt") == b"x"
    finally:
        repo.delete()


def test_writing_identical_bytes_again_changes_nothing(fs: LakeFSFileSystem, repo_name: str, tmp_path: Path) -> None:
    """As lakeFS compares objects by content (size, checksum, metadata, content type), a file put
    again unchanged leaves nothing to commit or merge: the branch's head stays."""
    local = tmp_path / "same.bin"
    local.write_bytes(b"the same bytes")
    main = lakefs.Branch(repo_name, "main", client=fs.client)
    fs.put_file(str(local), f"lakefs://{repo_name}/main/same.bin")
    head = main.commit("first put").get_commit()
    fs.put_file(str(local), f"lakefs://{repo_name}/main/same.bin", precheck=False)
    assert list(main.uncommitted()) == []
    with fs.transaction(repo_name, "main") as tx:
        fs.put_file(str(local), f"lakefs://{repo_name}/{tx.branch.id}/same.bin", precheck=False)
        tx.commit(message="nothing new")
    assert main.get_commit() == head
