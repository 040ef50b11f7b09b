"""lakeFS's import API (importStart, importStatus, importCancel) through lakefs-sdk, on a stack
whose local blockstore imports from a landing directory and on one whose S3 blockstore (moto)
imports from a landing bucket: every imported object reads back through S3 and the REST API, no
byte is copied into the namespace, and a source that changes after the import is never served."""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import lakefs
import lakefs_sdk
import pytest
from botocore.exceptions import ClientError
from lakefs.client import Client
from lakefs_sdk.exceptions import ApiException

from tests.e2e.api.conftest import Api, error_message, json_post
from tests.e2e.conftest import S3_DATA, S3_LANDING, Silt
from tests.support.moto import moto_client
from tests.support.wait import wait_until

TREE = {
    "events/2024/01/a.json": b'{"a": 1}\n',
    "events/2024/01/b.json": b'{"b": 2}\n',
    "events/2024-02/c.json": b'{"c": 3}\n',
    "events/top.csv": b"x,y\n1,2\n",
    "model.bin": secrets.token_bytes(300_000),  # over the edge's one-piece read size
}


def import_and_wait(
    client: lakefs_sdk.ApiClient, repo: str, paths: list[lakefs_sdk.ImportLocation], **commit: Any
) -> lakefs_sdk.ImportStatus:
    imports = lakefs_sdk.ImportApi(client)
    commit.setdefault("message", "")
    creation = lakefs_sdk.ImportCreation(paths=paths, commit=lakefs_sdk.CommitCreation(**commit))
    started = imports.import_start(repo, "main", creation)
    deadline = time.monotonic() + 60
    while True:
        status = imports.import_status(repo, "main", started.id)
        if status.completed or status.error or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def location(kind: str, path: str, destination: str) -> lakefs_sdk.ImportLocation:
    return lakefs_sdk.ImportLocation(type=kind, path=path, destination=destination)


def new_repo(client: lakefs_sdk.ApiClient, namespace: str) -> str:
    name = f"i-{secrets.token_hex(5)}"
    creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=namespace.format(repo=name))
    lakefs_sdk.RepositoriesApi(client).create_repository(creation)
    return name


def read_both_ways(api: Api, repo: str, key: str) -> tuple[bytes, bytes]:
    s3 = api.stack.client()
    over_s3 = s3.get_object(Bucket=repo, Key=f"main/{key}")["Body"].read()
    over_rest = lakefs_sdk.ObjectsApi(api.sdk()).get_object(repo, "main", key)
    return over_s3, bytes(over_rest)


def refused_as_changed(api: Api, repo: str, key: str, source: str) -> None:
    """A read of key answers that its source changed, naming it, over S3 and the REST API."""
    with pytest.raises(ClientError) as over_s3:
        api.stack.client().get_object(Bucket=repo, Key=f"main/{key}")
    error = over_s3.value.response["Error"]
    assert over_s3.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert error["Code"] == "NoSuchKey" and source in error["Message"] and "since it was imported" in error["Message"]
    response = api.request("GET", f"/repositories/{repo}/refs/main/objects?path={key}")
    assert source in error_message(response, 410)


# --- the local blockstore ------------------------------------------------------------------------


def test_import_a_directory_tree_and_read_it_back_everywhere(import_api: Api, import_landing: Path) -> None:
    api, client = import_api, import_api.sdk()
    source = import_landing / uuid.uuid4().hex
    for name, content in TREE.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(content)
    config = lakefs_sdk.ConfigApi(client).get_config()
    assert config.storage_config is not None and config.storage_config.import_support is True
    repo = new_repo(client, "local://{repo}")
    status = import_and_wait(
        client,
        repo,
        [
            location("common_prefix", f"local://{source}/events/", "lake/events/"),
            location("object", f"local://{source}/model.bin", "models/current.bin"),
        ],
        metadata={"imported_by": "test"},
    )
    assert status.completed and status.error is None and status.ingested_objects == len(TREE)
    assert status.commit is not None and status.commit.message == "Import objects"
    assert status.commit.metadata == {"imported_by": "test"} and status.commit.committer == "admin"
    assert status.update_time.tzinfo is not None
    for name, content in TREE.items():
        key = "models/current.bin" if name == "model.bin" else "lake/" + name
        assert read_both_ways(api, repo, key) == (content, content), key
    ranged = api.stack.client().get_object(Bucket=repo, Key="main/models/current.bin", Range="bytes=1000-299999")
    assert ranged["Body"].read() == TREE["model.bin"][1000:]
    stat = lakefs_sdk.ObjectsApi(client).stat_object(repo, "main", "lake/events/top.csv")
    assert stat.physical_address == f"local://{source}/events/top.csv" and stat.size_bytes == len(
        TREE["events/top.csv"]
    )
    # Zero copy: the namespace holds Silt's metadata only, smaller than the data it names.
    namespace = api.stack.stack.data_dir / "data" / repo
    written = [p for p in namespace.rglob("*") if p.is_file()]
    assert written and all("_silt" in p.relative_to(namespace).parts for p in written)
    assert sum(p.stat().st_size for p in written) < len(TREE["model.bin"])
    repository = lakefs_sdk.RepositoriesApi(client).get_repository_metadata(repo)
    assert repository.get(".lakefs.last.import.timestamp") == str(status.commit.creation_date)

    # A source changed (same size, new bytes and time) or gone is never served in the entry's place.
    (source / "events/top.csv").write_bytes(b"x,y\n9,9\n")
    os.utime(source / "events/top.csv", ns=(time.time_ns(), time.time_ns() + 10**9))
    refused_as_changed(api, repo, "lake/events/top.csv", f"local://{source}/events/top.csv")
    (source / "model.bin").unlink()
    refused_as_changed(api, repo, "models/current.bin", f"local://{source}/model.bin")
    assert read_both_ways(api, repo, "lake/events/2024-02/c.json")[0] == TREE["events/2024-02/c.json"]


def test_imports_are_checked_before_they_start(import_api: Api, import_landing: Path, tmp_path: Path) -> None:
    api, client = import_api, import_api.sdk()
    repo = new_repo(client, "local://{repo}")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    cases = [
        (f"local://{outside}", "allowed_external_prefixes"),
        (f"local://{import_landing}/../etc", "not a plain absolute path"),
        ("s3://bucket/prefix/", "s3 blockstore"),
        (f"local://{repo}/data", "overlaps the repository's storage namespace"),
        ("local://other-store-dir", "local:// and an absolute path"),
    ]
    for path, says in cases:
        body = {"paths": [{"type": "common_prefix", "path": path, "destination": "x/"}], "commit": {"message": "m"}}
        response = json_post(api, f"/repositories/{repo}/branches/main/import", body)
        assert says in error_message(response, 400), path
    body = {
        "paths": [{"type": "all", "path": f"local://{import_landing}", "destination": ""}],
        "commit": {"message": "m"},
    }
    assert "type" in error_message(json_post(api, f"/repositories/{repo}/branches/main/import", body), 400)
    reader = json_post(
        api,
        f"/repositories/{repo}/branches/main/import",
        {"paths": [], "commit": {"message": "m"}},
        creds=api.stack.reader,
    )
    assert reader.status == 403
    imports = lakefs_sdk.ImportApi(client)
    with pytest.raises(ApiException) as missing:
        imports.import_status(repo, "main", "0123456789abcdef0123")
    assert missing.value.status == 404
    # An import of nothing is an (empty) commit, as lakeFS's; a completed import cannot be canceled.
    empty = import_and_wait(client, repo, [], message="nothing yet")
    assert empty.completed and empty.ingested_objects == 0 and empty.commit is not None
    started = imports.import_start(
        repo, "main", lakefs_sdk.ImportCreation(paths=[], commit=lakefs_sdk.CommitCreation(message="m"))
    )
    wait_until(lambda: imports.import_status(repo, "main", started.id).completed, 30, "the empty import completing")
    with pytest.raises(ApiException) as done:
        imports.import_cancel(repo, "main", started.id)
    assert done.value.status == 409 and json.loads(done.value.body)["message"]


# --- the S3 blockstore ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_store(moto_server: str) -> Any:
    return moto_client(moto_server)


@pytest.mark.s3
def test_import_an_s3_prefix_and_read_it_back_everywhere(s3_api: Api, s3_store: Any) -> None:
    api, client = s3_api, s3_api.sdk()
    base = f"exports/{uuid.uuid4().hex}"
    for name, content in TREE.items():
        s3_store.put_object(Bucket=S3_LANDING, Key=f"{base}/{name}", Body=content)
    repo = new_repo(client, f"s3://{S3_DATA}/{{repo}}")
    status = import_and_wait(
        client,
        repo,
        [
            location("common_prefix", f"s3://{S3_LANDING}/{base}/events/", "lake/events/"),
            location("object", f"s3://{S3_LANDING}/{base}/model.bin", "models/current.bin"),
        ],
        message="from the export bucket",
    )
    assert status.completed and status.error is None and status.ingested_objects == len(TREE)
    assert status.commit is not None and status.commit.message == "from the export bucket"
    for name, content in TREE.items():
        key = "models/current.bin" if name == "model.bin" else "lake/" + name
        assert read_both_ways(api, repo, key) == (content, content), key
    ranged = api.stack.client().get_object(Bucket=repo, Key="main/models/current.bin", Range="bytes=7-299999")
    assert ranged["Body"].read() == TREE["model.bin"][7:]
    listed = s3_store.list_objects_v2(Bucket=S3_DATA, Prefix=f"{repo}/").get("Contents", [])
    assert listed and all(item["Key"].startswith(f"{repo}/_silt/") for item in listed)
    assert sum(item["Size"] for item in listed) < len(TREE["model.bin"])

    # Copied into another repository through the gateway: the checked source is the copy's bytes.
    other = new_repo(client, f"s3://{S3_DATA}/{{repo}}")
    gateway = api.stack.client()
    gateway.copy_object(Bucket=other, Key="main/copy.csv", CopySource=f"{repo}/main/lake/events/top.csv")
    assert gateway.get_object(Bucket=other, Key="main/copy.csv")["Body"].read() == TREE["events/top.csv"]

    s3_store.put_object(Bucket=S3_LANDING, Key=f"{base}/events/top.csv", Body=b"rewritten!")
    refused_as_changed(api, repo, "lake/events/top.csv", f"s3://{S3_LANDING}/{base}/events/top.csv")
    with pytest.raises(ClientError):
        gateway.copy_object(Bucket=other, Key="main/again.csv", CopySource=f"{repo}/main/lake/events/top.csv")

    outside = json_post(
        api,
        f"/repositories/{repo}/branches/main/import",
        {
            "paths": [{"type": "common_prefix", "path": f"s3://{S3_LANDING}/other/", "destination": ""}],
            "commit": {"message": "m"},
        },
    )
    assert "allowed_import_prefixes" in error_message(outside, 400)


def test_the_lakefs_clients_import_manager(import_api: Api, import_landing: Path) -> None:
    source = import_landing / uuid.uuid4().hex
    (source / "d").mkdir(parents=True)
    for index in range(3):
        (source / "d" / f"f{index}").write_text(str(index))
    (source / "one").write_text("one")
    admin = import_api.stack.admin
    client = Client(
        host=import_api.stack.endpoint,
        username=admin.access_key_id,
        password=admin.secret_access_key.get_secret_value(),
    )
    name = f"i-{secrets.token_hex(5)}"
    repository = lakefs.Repository(name, client=client).create(storage_namespace=f"local://{name}")
    branch = repository.branch("landing").create("main")
    manager = branch.import_data(commit_message="through lakefs", metadata={"by": "wrapper"})
    manager.prefix(f"local://{source}/d/", "d/").object(f"local://{source}/one", "x/one")
    result = manager.run(poll_interval=timedelta(milliseconds=50))
    assert result.completed and result.ingested_objects == 4
    assert result.commit is not None and result.commit.metadata == {"by": "wrapper"}
    assert [o.path for o in branch.objects()] == ["d/f0", "d/f1", "d/f2", "x/one"]
    assert branch.object("x/one").reader().read() == b"one"


def test_silt_import_over_the_rest_api_waits_for_the_commit_and_reports_progress(
    import_api: Api, import_landing: Path, tmp_path: Path
) -> None:
    """`silt import` with lakectl's flags: started, followed and committed through the REST API
    alone (graveler's gRPC endpoint is unreachable from the CLI)."""
    source = import_landing / uuid.uuid4().hex
    for i in range(300):
        (source / "cli" / f"{i:04d}.csv").parent.mkdir(parents=True, exist_ok=True)
        (source / "cli" / f"{i:04d}.csv").write_bytes(b"a,b\n")
    (source / "one.bin").write_bytes(b"1")
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("SILT_", "AWS_", "LAKECTL_"))}
    env.update(import_api.stack.stack.env_for_clients())
    env.update(
        SILT_GRAVELER_ENDPOINT="127.0.0.1:1", SILT_AUTH_ENDPOINT="127.0.0.1:1", SILT_PROGRESS_INTERVAL_SECONDS="0"
    )
    silt = Silt(env, tmp_path)
    repo = new_repo(import_api.sdk(), "local://{repo}")
    done = silt("import", "--from", f"local://{source}/cli/", "--to", f"lakefs://{repo}/main/csv/", "-m", "csv in")
    assert "Imported 300 objects into main: commit" in done.out
    assert "silt: importing:" in done.err  # a line per interval off a terminal
    as_json = silt(
        "import", "--json", "--object", "--from", f"local://{source}/one.bin", "--to", f"lakefs://{repo}/main/x/one"
    ).json()
    assert as_json["ingested_objects"] == 1 and as_json["commit"]["message"]
    assert [c["message"] for c in silt("log", f"lakefs://{repo}/main", "--amount", "2", "--json").json()][1] == "csv in"
    stat = silt("fs", "stat", f"lakefs://{repo}/main/x/one", "--json").json()
    assert stat["physical_address"] == f"local://{source}/one.bin"
    refused = silt("import", "--from", "local:///etc", "--to", f"lakefs://{repo}/main/etc/", ok=False)
    assert refused.code == 2 and "allowed_external_prefixes" in refused.err
