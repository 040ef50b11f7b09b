"""lakeFS's GC preparation and metadata calls through lakefs-sdk on the real stack: the files
they name are read back from the store and checked against the repository's commits (expired
or not under its GC rules), its staged objects and its committed metadata; bad ids and callers
without the rights are refused as lakeFS refuses them."""

from __future__ import annotations

import csv
import io
import secrets
import tempfile
import time
from pathlib import Path

import lakefs_sdk
import pyarrow.parquet as pq
import pytest
import urllib3
import yaml
from lakefs_sdk.exceptions import ApiException

from tests.e2e.api.conftest import Api


@pytest.fixture(scope="module")
def store_root(api: Api) -> Path:
    """The local blockstore's directory: `local://<repo>/<key>` is `<root>/<repo>/<key>`."""
    config = yaml.safe_load(api.stack.stack.config_path.read_text())
    return Path(config["blockstore"]["local"]["path"])


def _file(store_root: Path, uri: str) -> Path:
    assert uri.startswith("local://"), uri
    return store_root / uri.removeprefix("local://")


def _upload(client: lakefs_sdk.ApiClient, repo: str, branch: str, path: str) -> lakefs_sdk.ObjectStats:
    # The SDK uploads a file by its name.
    with tempfile.NamedTemporaryFile(suffix=".txt") as local:
        local.write(path.encode())
        local.flush()
        return lakefs_sdk.ObjectsApi(client).upload_object(repo, branch, path, content=local.name)


def _commit(client: lakefs_sdk.ApiClient, repo: str, branch: str, path: str) -> str:
    _upload(client, repo, branch, path)
    commit = lakefs_sdk.CommitsApi(client).commit(repo, branch, lakefs_sdk.CommitCreation(message=path))
    return str(commit.id)


def _history(client: lakefs_sdk.ApiClient, repo: str, *refs: str) -> dict[str, str]:
    """commit id -> metarange id of every commit reachable from refs."""
    found: dict[str, str] = {}
    for ref in refs:
        for commit in lakefs_sdk.RefsApi(client).log_commits(repo, ref, amount=1000).results:
            found[commit.id] = commit.meta_range_id
    return found


def _with_history(client: lakefs_sdk.ApiClient, repo: str) -> tuple[str, str]:
    """main: c1, c2, c3; keep: from c1, then k1. GC rules: 0 days, 10 on keep: only c2 expires.
    Returns (c1, c2)."""
    c1 = _commit(client, repo, "main", "a")
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="keep", source=c1))
    c2 = _commit(client, repo, "main", "b")
    _commit(client, repo, "main", "c")
    _commit(client, repo, "keep", "k")
    rules = lakefs_sdk.GarbageCollectionRules(
        default_retention_days=0, branches=[lakefs_sdk.GarbageCollectionRule(branch_id="keep", retention_days=10)]
    )
    lakefs_sdk.RepositoriesApi(client).set_gc_rules(repo, rules)
    return c1, c2


def _rows(data: bytes) -> tuple[list[str], dict[str, tuple[str, str]]]:
    text = data.decode()
    rows = {r["commit_id"]: (r["expired"], r["metarange_id"]) for r in csv.DictReader(io.StringIO(text))}
    return text.splitlines()[0].split(","), rows


def _check_commits_file(
    api: Api, client: lakefs_sdk.ApiClient, store_root: Path, repo: str, c2: str, answer: object
) -> None:
    prepared = lakefs_sdk.GarbageCollectionPrepareResponse.parse_obj(answer)
    run = prepared.run_id
    assert prepared.gc_commits_location == f"local://{repo}/_silt/gc/{run}/commits.csv"
    assert prepared.gc_addresses_location == f"local://{repo}/_silt/gc/{run}/addresses/"
    data = _file(store_root, prepared.gc_commits_location).read_bytes()
    header, rows = _rows(data)
    assert header == ["commit_id", "expired", "metarange_id"]
    history = _history(client, repo, "main", "keep")
    assert {c: m for c, (_, m) in rows.items()} == history
    assert {c for c, (expired, _) in rows.items() if expired == "true"} == {c2}
    # The presigned URL reads the same file (the edge signs and serves it on the local store).
    assert prepared.gc_commits_presigned_url
    fetched = api.http.request("GET", prepared.gc_commits_presigned_url, retries=False)
    assert fetched.status == 200 and fetched.data == data


def test_prepare_commits_writes_lakefs_commits_csv(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, store_root: Path
) -> None:
    _, c2 = _with_history(client, repo)
    prepared = lakefs_sdk.InternalApi(client).prepare_garbage_collection_commits(repo)
    _check_commits_file(api, client, store_root, repo, c2, prepared.to_dict())
    # Silt's own export of the run lies beside it.
    assert _file(store_root, f"local://{repo}/_silt/gc/{prepared.run_id}/commits.parquet").is_file()


def test_prepare_commits_without_rules_is_404(client: lakefs_sdk.ApiClient, repo: str) -> None:
    """lakeFS's GC client takes 404 to mean "no rules: keep every commit"."""
    internal = lakefs_sdk.InternalApi(client)
    for call in (internal.prepare_garbage_collection_commits, internal.prepare_garbage_collection_commits_async):
        with pytest.raises(ApiException) as missing:
            call(repo)
        assert missing.value.status == 404
    with pytest.raises(ApiException) as no_repo:
        internal.prepare_garbage_collection_commits(f"none-{secrets.token_hex(4)}")
    assert no_repo.value.status == 404


def test_prepare_commits_async_and_its_status(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, store_root: Path
) -> None:
    _, c2 = _with_history(client, repo)
    internal = lakefs_sdk.InternalApi(client)
    task = internal.prepare_garbage_collection_commits_async(repo)
    deadline = time.monotonic() + 30
    status = internal.prepare_garbage_collection_commits_status(repo, task.id)
    while not status.completed and time.monotonic() < deadline:
        time.sleep(0.2)
        status = internal.prepare_garbage_collection_commits_status(repo, task.id)
    assert status.task_id == task.id and status.completed and status.error is None, status
    assert status.update_time is not None and status.result is not None
    _check_commits_file(api, client, store_root, repo, c2, status.result.to_dict())
    for unknown in ("0" * 20, "nosuchtask", "x" * 64):
        with pytest.raises(ApiException) as missing:
            internal.prepare_garbage_collection_commits_status(repo, unknown)
        assert missing.value.status == 404, unknown
    missing_id = api.request("GET", f"/repositories/{repo}/gc/prepare_commits/status")
    assert missing_id.status == 400


def test_prepare_uncommitted_lists_staged_addresses(client: lakefs_sdk.ApiClient, repo: str, store_root: Path) -> None:
    internal = lakefs_sdk.InternalApi(client)
    nothing = internal.prepare_garbage_collection_uncommitted(repo)
    assert nothing.gc_uncommitted_location == "" and nothing.run_id and nothing.continuation_token is None
    _commit(client, repo, "main", "committed")
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    staged = [_upload(client, repo, "main", "x"), _upload(client, repo, "dev", "y"), _upload(client, repo, "dev", "z")]
    lakefs_sdk.ObjectsApi(client).delete_object(repo, "dev", "committed")  # a tombstone: no address

    answer = internal.prepare_garbage_collection_uncommitted(repo, lakefs_sdk.PrepareGCUncommittedRequest())
    assert answer.continuation_token is None
    assert answer.gc_uncommitted_location == f"local://{repo}/_silt/gc/{answer.run_id}/uncommitted/"
    folder = _file(store_root, answer.gc_uncommitted_location)
    # Spark reads the folder; it skips hidden files such as the local store's etag files.
    files = [p for p in folder.iterdir() if not p.name.startswith((".", "_"))]
    assert len(files) == 1
    table = pq.read_table(files[0])
    assert table.schema.names == ["physical_address", "creation_date"]
    addresses = table.column("physical_address").to_pylist()
    # Relative to the storage namespace, as lakeFS writes them.
    assert sorted(f"local://{repo}/{a}" for a in addresses) == sorted(s.physical_address for s in staged)
    assert all(created > 0 for created in table.column("creation_date").to_pylist())

    with pytest.raises(ApiException) as bad_token:
        internal.prepare_garbage_collection_uncommitted(
            repo, lakefs_sdk.PrepareGCUncommittedRequest(continuation_token="x")
        )
    assert bad_token.value.status == 400


def test_metaranges_and_ranges(api: Api, client: lakefs_sdk.ApiClient, repo: str, store_root: Path) -> None:
    commit_id = _commit(client, repo, "main", "a")
    metarange = lakefs_sdk.CommitsApi(client).get_commit(repo, commit_id).meta_range_id
    metadata = lakefs_sdk.MetadataApi(client)
    answer = metadata.get_meta_range_with_http_info(repo, metarange)
    assert answer.status_code == 200 and answer.data is not None and answer.headers is not None
    location = f"_silt/metaranges/{metarange}"
    assert answer.data.location == location and answer.headers["Location"] == location
    on_disk = (store_root / repo / location).read_bytes()

    internal = lakefs_sdk.InternalApi(client)
    streamed = internal.get_metadata_object(repo, metarange, "meta_range")
    assert bytes(streamed) == on_disk
    range_ids = pq.read_table(io.BytesIO(on_disk)).column("range_id").to_pylist()
    assert range_ids
    for range_id in range_ids:
        got = metadata.get_range_with_http_info(repo, range_id)
        assert got.data is not None and got.headers is not None
        assert got.data.location == f"_silt/ranges/{range_id}" == got.headers["Location"]
        range_bytes = bytes(internal.get_metadata_object(repo, range_id, "range"))
        assert range_bytes == (store_root / repo / got.data.location).read_bytes()
        # Silt's Parquet, not lakeFS's SSTable: the committed entry's key is in it.
        assert b"a" in pq.read_table(io.BytesIO(range_bytes)).column("key").to_pylist()

    redirect = api.request("GET", f"/repositories/{repo}/metadata/object/meta_range/{metarange}?presign=true")
    assert redirect.status == 302
    fetched = api.http.request("GET", redirect.headers["Location"], retries=False)
    assert fetched.status == 200 and fetched.data == on_disk


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/metadata/meta_range/{unknown}", 404),
        ("/metadata/range/{unknown}", 404),
        ("/metadata/object/range/{unknown}", 404),
        ("/metadata/meta_range/..%2F..%2Fetc", 404),  # decoded to more segments: no route at all
        ("/metadata/meta_range/%2E%2E", 400),  # `..` as an id: refused before it names a key
        ("/metadata/range/ABCDEF", 400),
        ("/metadata/range/{too_long}", 400),
        ("/metadata/object/bogus/{unknown}", 400),
        ("/metadata/object/range/..", 404),  # a path a router folds away: never a key
    ],
)
def test_metadata_refuses_bad_and_unknown_ids(api: Api, repo: str, path: str, status: int) -> None:
    filled = path.format(unknown="0" * 64, too_long="a" * 65)
    response = api.request("GET", f"/repositories/{repo}{filled}")
    assert response.status == status, (filled, response.status, response.data)
    if response.headers.get("content-type", "").startswith("application/json"):
        assert b"message" in response.data


def test_who_may_prepare_and_read(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    """Analysts (ReadRepo) read metadata but may not prepare GC (PrepareGC: administrators)."""
    c1, _ = _with_history(client, repo)
    reader = api.sdk(api.stack.reader)
    internal = lakefs_sdk.InternalApi(reader)
    calls = (
        lambda: internal.prepare_garbage_collection_commits(repo),
        lambda: internal.prepare_garbage_collection_commits_async(repo),
        lambda: internal.prepare_garbage_collection_commits_status(repo, "0" * 20),
        lambda: internal.prepare_garbage_collection_uncommitted(repo),
    )
    for call in calls:
        with pytest.raises(ApiException) as refused:
            call()
        assert refused.value.status == 403
    metarange = lakefs_sdk.CommitsApi(client).get_commit(repo, c1).meta_range_id
    assert lakefs_sdk.MetadataApi(reader).get_meta_range(repo, metarange).location.endswith(metarange)
    anonymous = api.request("GET", f"/repositories/{repo}/metadata/meta_range/{metarange}", headers={})
    assert anonymous.status == 401
    other = api.http.request(
        "GET",
        f"{api.base}/repositories/{repo}/metadata/meta_range/{metarange}",
        headers=urllib3.make_headers(basic_auth="AKIANOSUCHKEY:wrong"),
        retries=False,
    )
    assert other.status == 401
