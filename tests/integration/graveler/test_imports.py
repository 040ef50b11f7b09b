"""Zero-copy import through graveler's gRPC API: local directories and files on the local
blockstore, S3 prefixes and objects on the S3 blockstore (moto_server), replacing what a branch
had there as lakeFS does, in one commit, cancelable, with progress."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import grpc
import pytest
from pydantic import ValidationError

from engine.features.imports import manager
from engine.features.imports.ingest import IngestJob, IngestResult
from engine.features.imports.manager import STALE_SECONDS
from engine.features.imports.records import CANCELED, stamp
from engine.features.imports.runner import IngestRunner
from engine.graveler import GravelerOptions
from engine.open import import_prefixes, open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.block.s3 import S3Adapter
from silt.config import Config, DatabaseConfig, LocalDatabaseConfig
from silt.errors import ConfigError
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store, open_store
from silt.objects import SOURCE_MTIME_KEY
from tests.integration.graveler.conftest import GravelerEnv, graveler_env
from tests.support.moto import ACCESS_KEY_ID, SECRET_ACCESS_KEY, s3_blockstore_config
from tests.support.wait import wait_until

Location = api.ImportLocation
PREFIX = Location.TYPE_COMMON_PREFIX
OBJECT = Location.TYPE_OBJECT


def code_of(call: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details() or ""


def start_import(stub: Any, repo: str, *locations: Location, branch: str = "main", **fields: Any) -> str:
    request = api.StartImportRequest(repository=repo, branch=branch, locations=list(locations), **fields)
    return str(stub.StartImport(request).id)


def wait_for(stub: Any, repo: str, import_id: str, branch: str = "main") -> api.ImportStatusInfo:
    deadline = time.monotonic() + 30
    while True:
        status = stub.GetImportStatus(api.GetImportStatusRequest(repository=repo, branch=branch, id=import_id))
        if status.completed or status.error or time.monotonic() > deadline:
            return status
        time.sleep(0.02)


def entries(env_stub: Any, repo: str, ref: str) -> dict[str, pb.Entry]:
    page = env_stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, amount=10000))
    return {item.key: item.entry for item in page.items}


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    path = tmp_path / "landing"
    path.mkdir()
    return path


@pytest.fixture
def kv(tmp_path: Path) -> Iterator[Store]:
    # One driver: an import's KV use is its record's set_if and the branch moves every flow shares,
    # which the suites of each driver already cover.
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "kv.db"))))
    yield store
    store.close()


@dataclass
class ImportEnv(GravelerEnv):
    target: str = ""  # graveler's address, for the CLI


@pytest.fixture
def env(kv: Store, tmp_path: Path, landing: Path) -> Iterator[ImportEnv]:
    adapter = LocalAdapter(tmp_path / "data")
    graveler = open_graveler(kv, adapter, GravelerOptions(allowed_import_prefixes=(f"local://{landing}",)))
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield ImportEnv(api_grpc.GravelerServiceStub(channel), graveler, tmp_path / "data", target=f"127.0.0.1:{port}")
    finally:
        channel.close()
        server.stop(None)
        graveler.close()


def tree(root: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)


def test_a_directory_tree_and_a_file_become_one_commit_of_entries_naming_them(env: GravelerEnv, landing: Path) -> None:
    # Names whose key order differs from a naive directory walk: "a-b" < "a/..." < "a0".
    files = {"d/a/x": b"x", "d/a/y/z": b"zz", "d/a-b": b"ab", "d/a0": b"a0", "d/top": b"t", "file.csv": b"1,2\n"}
    tree(landing, files)
    (landing / "d" / ".hidden").write_bytes(b"skipped, as lakeFS skips it")
    (landing / "d" / "link").symlink_to(landing / "file.csv")
    repo = env.new_repo()
    before = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    import_id = start_import(
        env.stub,
        repo,
        Location(type=PREFIX, path=f"local://{landing}/d/", destination="imported"),
        Location(type=OBJECT, path=f"local://{landing}/file.csv", destination="tables/one.csv"),
        message="bring the lake in",
        metadata={"source": "landing"},
    )
    status = wait_for(env.stub, repo, import_id)
    assert status.completed and not status.error, status.error
    assert status.ingested_objects == 6
    commit = status.commit
    assert commit.message == "bring the lake in" and commit.metadata["source"] == "landing"
    assert list(commit.parents) == [before]
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    assert head == commit.id

    def commit_event() -> bool:
        events = env.stub.ListEvents(ev.ListEventsRequest(repository=repo, branch="main")).events
        return any(e.type == ev.COMMIT and e.commit_id == commit.id for e in events)

    wait_until(commit_event, 10, "the import's commit in the branch's history events")
    found = entries(env.stub, repo, "main")
    assert sorted(found) == [
        "imported/a-b",
        "imported/a/x",
        "imported/a/y/z",
        "imported/a0",
        "imported/top",
        "tables/one.csv",
    ]
    one = found["imported/a/y/z"]
    path = landing / "d/a/y/z"
    assert one.physical_address == f"local://{path}"
    assert one.size == 2 and one.etag == hashlib.md5(b"zz").hexdigest()
    assert one.last_modified.ToNanoseconds() == path.stat().st_mtime_ns
    assert one.metadata[SOURCE_MTIME_KEY] == str(path.stat().st_mtime_ns)
    assert found["tables/one.csv"].physical_address == f"local://{landing}/file.csv"
    # Zero copy: the repository's namespace holds only its committed metadata.
    written = [p for p in (env.data_root / repo).rglob("*") if p.is_file()]
    assert written and all("_silt" in p.parts for p in written)


def test_an_import_replaces_what_the_branch_had_there_and_keeps_uncommitted_changes(
    env: GravelerEnv, landing: Path
) -> None:
    tree(landing, {"new/a": b"a", "new/b": b"b", "single": b"s"})
    repo = env.new_repo()
    for key in ("imported/old", "imported/a", "imported-sibling/x", "keep/y", "one/file", "one/file2"):
        env.put(repo, "main", key, key)
    env.commit(repo, "main")
    env.put(repo, "main", "imported/staged", "staged")
    import_id = start_import(
        env.stub,
        repo,
        Location(type=PREFIX, path=f"local://{landing}/new", destination="imported/"),
        Location(type=OBJECT, path=f"local://{landing}/single", destination="one/file"),
    )
    status = wait_for(env.stub, repo, import_id)
    assert status.completed, status.error
    assert status.commit.message == "Import objects"
    committed = entries(env.stub, repo, f"{status.commit.id}")
    # Everything under the prefix is the import's; the object replaced exactly its key.
    assert sorted(committed) == ["imported-sibling/x", "imported/a", "imported/b", "keep/y", "one/file", "one/file2"]
    assert committed["imported/a"].physical_address == f"local://{landing}/new/a"
    assert committed["one/file"].physical_address == f"local://{landing}/single"
    assert committed["one/file2"].etag == "one/file2"
    # The uncommitted write stays uncommitted, on top of the import.
    diff = env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main")).items
    assert [d.key for d in diff] == ["imported/staged"]
    assert env.etag(repo, "main", "imported/staged") == "staged"


def test_later_locations_win_a_key_and_sources_are_checked_before_anything_starts(
    env: GravelerEnv, landing: Path, tmp_path: Path
) -> None:
    tree(landing, {"x/f": b"first", "y/f": b"second!"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"not importable")
    repo = env.new_repo()
    import_id = start_import(
        env.stub,
        repo,
        Location(type=PREFIX, path=f"local://{landing}/x", destination="same"),
        Location(type=PREFIX, path=f"local://{landing}/y", destination="same"),
    )
    assert wait_for(env.stub, repo, import_id).completed
    assert entries(env.stub, repo, "main")["same/f"].size == len(b"second!")

    refused = [
        Location(type=PREFIX, path=f"local://{outside}", destination="x"),
        Location(type=OBJECT, path=f"local://{outside}/secret", destination="x"),
        Location(type=OBJECT, path=f"local://{landing}/../outside/secret", destination="x"),
        Location(type=PREFIX, path=f"local://{landing}/x/f", destination="x"),  # a file, not a directory
        Location(type=PREFIX, path="s3://bucket/prefix/", destination="x"),  # not this blockstore
        Location(type=PREFIX, path=f"local://{repo}", destination="x"),  # relative: the store's own
        Location(type=Location.TYPE_UNSPECIFIED, path=f"local://{landing}/x", destination="x"),
        Location(type=OBJECT, path=f"local://{landing}/x/f", destination=""),
    ]
    for location in refused:

        def refused_start(location: Location = location) -> object:
            return start_import(env.stub, repo, location)

        code, details = code_of(refused_start)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (location, details)
    code, _ = code_of(lambda: start_import(env.stub, repo, refused[0], branch="nope"))
    assert code == grpc.StatusCode.NOT_FOUND
    code, _ = code_of(
        lambda: env.stub.GetImportStatus(api.GetImportStatusRequest(repository=repo, branch="main", id="0"))
    )
    assert code == grpc.StatusCode.NOT_FOUND


def test_local_imports_are_off_unless_enabled(kv: Store, tmp_path: Path, landing: Path) -> None:
    tree(landing, {"f": b"f"})
    envs = graveler_env(kv, tmp_path)  # no import prefixes
    env = next(envs)
    try:
        repo = env.new_repo()
        location = Location(type=OBJECT, path=f"local://{landing}/f", destination="f")
        code, details = code_of(lambda: start_import(env.stub, repo, location))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "import_enabled" in details
    finally:
        envs.close()  # type: ignore[attr-defined]  # a generator, typed as its Iterator


class GatedRunner:
    """The in-process runner, held back until the test opens the gate."""

    def __init__(self, inner: IngestRunner) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1)

    def submit(self, job: IngestJob) -> Future[IngestResult]:
        def later() -> IngestResult:
            self.gate.wait(30)
            return self.inner.submit(job).result()

        return self._pool.submit(later)

    def close(self) -> None:
        self.gate.set()
        self._pool.shutdown(wait=True)
        self.inner.close()


def test_cancel_leaves_the_branch_as_it_was_and_a_completed_import_cannot_be_canceled(
    env: GravelerEnv, landing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager, "BEAT_SECONDS", 0.05)  # read by each beat; the beater starts with the import
    tree(landing, {f"many/{i:03d}": b"x" for i in range(50)})
    runner = GatedRunner(env.graveler.imports.runner)
    env.graveler.imports.runner = runner
    repo = env.new_repo()
    before = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    import_id = start_import(env.stub, repo, Location(type=PREFIX, path=f"local://{landing}/many", destination="m/"))
    status = env.stub.GetImportStatus(api.GetImportStatusRequest(repository=repo, branch="main", id=import_id))
    assert not status.completed and not status.error and status.ingested_objects == 0
    started_at = status.update_time.ToNanoseconds()

    def beaten() -> bool:
        status = env.stub.GetImportStatus(api.GetImportStatusRequest(repository=repo, branch="main", id=import_id))
        return bool(status.update_time.ToNanoseconds() > started_at)

    wait_until(beaten, 10, "a heartbeat of the open import")
    request = api.CancelImportRequest(repository=repo, branch="main", id=import_id)
    env.stub.CancelImport(request)
    env.stub.CancelImport(request)  # again: nothing more to do
    runner.gate.set()
    status = wait_for(env.stub, repo, import_id)
    canceled_at = status.update_time.ToNanoseconds()
    assert not status.completed and CANCELED in status.error
    # Deliberate: no event says "a beat went by and left the record alone"; several beats' time.
    time.sleep(4 * manager.BEAT_SECONDS)
    status = wait_for(env.stub, repo, import_id)
    assert status.update_time.ToNanoseconds() == canceled_at and CANCELED in status.error
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == before
    assert entries(env.stub, repo, "main") == {}

    done = start_import(env.stub, repo, Location(type=PREFIX, path=f"local://{landing}/many", destination="m/"))
    assert wait_for(env.stub, repo, done).ingested_objects == 50
    code, _ = code_of(lambda: env.stub.CancelImport(api.CancelImportRequest(repository=repo, branch="main", id=done)))
    assert code == grpc.StatusCode.ALREADY_EXISTS


def test_an_import_nobody_runs_any_more_reads_as_interrupted(env: GravelerEnv) -> None:
    repo = env.new_repo()
    handle = env.graveler.refs.get_repository(repo)
    old = stamp()
    old.FromNanoseconds(old.ToNanoseconds() - int((STALE_SECONDS + 5) * 1e9))
    env.graveler.imports.records.create(
        handle.partition, pb.ImportRecord(id="abandoned", branch="main", update_time=old)
    )
    status = env.stub.GetImportStatus(api.GetImportStatusRequest(repository=repo, branch="main", id="abandoned"))
    assert not status.completed and "stopped" in status.error


# --- on the S3 blockstore ----------------------------------------------------------------------


@pytest.fixture
def s3env(moto_server: str, tmp_path: Path) -> Iterator[tuple[GravelerEnv, Any]]:
    config = s3_blockstore_config(moto_server)
    config.force_path_style = True
    s3 = boto3.client(
        "s3",
        endpoint_url=moto_server,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        region_name="us-east-1",
    )
    for bucket in ("silt-import-ns", "silt-landing"):
        s3.create_bucket(Bucket=bucket)
    store = open_store(DatabaseConfig(type="mem"))
    options = GravelerOptions(
        allowed_import_prefixes=("s3://silt-landing/data/",), allowed_namespace_roots=("s3://silt-import-ns/",)
    )
    graveler = open_graveler(store, S3Adapter(config), options)
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield GravelerEnv(api_grpc.GravelerServiceStub(channel), graveler, tmp_path), s3
    finally:
        channel.close()
        server.stop(None)
        graveler.close()
        store.close()


def test_an_s3_prefix_and_exactly_one_s3_object(s3env: tuple[GravelerEnv, Any]) -> None:
    env, s3 = s3env
    run = uuid.uuid4().hex[:8]
    base = f"data/{run}"
    keys = [f"{base}/2024/a", f"{base}/2024/b/c", f"{base}/2024-old/d", f"{base}/f", f"{base}/f2", f"{base}/f/g"]
    for key in keys:
        s3.put_object(Bucket="silt-landing", Key=key, Body=key.encode())
    outside = f"elsewhere/{run}"
    s3.put_object(Bucket="silt-landing", Key=outside, Body=b"no")
    repo = f"imp-{run}"
    env.stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"s3://silt-import-ns/{repo}"))
    import_id = start_import(
        env.stub,
        repo,
        # Without a trailing "/", as lakeFS: every key starting with it, named from its last "/".
        Location(type=PREFIX, path=f"s3://silt-landing/{base}/2024", destination="lake"),
        Location(type=OBJECT, path=f"s3://silt-landing/{base}/f", destination="single"),
    )
    status = wait_for(env.stub, repo, import_id)
    assert status.completed, status.error
    found = entries(env.stub, repo, "main")
    assert sorted(found) == ["lake/2024-old/d", "lake/2024/a", "lake/2024/b/c", "single"]
    single = found["single"]
    head = s3.head_object(Bucket="silt-landing", Key=f"{base}/f")
    assert single.physical_address == f"s3://silt-landing/{base}/f"
    assert single.etag == head["ETag"].strip('"') and single.size == len(f"{base}/f")
    assert single.last_modified.seconds == int(head["LastModified"].timestamp())
    assert SOURCE_MTIME_KEY not in single.metadata
    # Zero copy: nothing but Silt's metadata was written into the namespace.
    listed = s3.list_objects_v2(Bucket="silt-import-ns", Prefix=f"{repo}/").get("Contents", [])
    assert listed and all(o["Key"].startswith(f"{repo}/_silt/") for o in listed)

    code, details = code_of(
        lambda: start_import(
            env.stub, repo, Location(type=PREFIX, path=f"s3://silt-landing/{outside}", destination="x")
        )
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "allowed_import_prefixes" in details
    code, _ = code_of(
        lambda: start_import(env.stub, repo, Location(type=PREFIX, path="s3://silt-landing/data", destination="x"))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT  # lists "data*", past the allowed "data/"
    missing = start_import(
        env.stub, repo, Location(type=OBJECT, path=f"s3://silt-landing/{base}/missing", destination="x")
    )
    failed = wait_for(env.stub, repo, missing)
    assert not failed.completed and "import failed" in failed.error and "missing" in failed.error


# --- configuration -------------------------------------------------------------------------------


def test_the_local_blockstore_keys_become_import_prefixes(tmp_path: Path) -> None:
    def config(local: dict[str, Any]) -> Config:
        return Config.model_validate(
            {"blockstore": {"type": "local", "local": {"path": str(tmp_path / "data"), **local}}}
        )

    enabled = config({"import_enabled": True, "allowed_external_prefixes": ["/mnt/landing/", "/srv/x"]})
    assert import_prefixes(enabled) == ("local:///mnt/landing", "local:///srv/x")
    assert import_prefixes(config({"allowed_external_prefixes": ["/mnt/landing"]})) == ()  # not enabled
    for bad in ("relative/dir", "/mnt/../etc", "//mnt", "/"):
        with pytest.raises(ValidationError):
            config({"import_enabled": True, "allowed_external_prefixes": [bad]})
    inside = config({"import_enabled": True, "allowed_external_prefixes": [str(tmp_path / "data" / "repo")]})
    with pytest.raises(ConfigError, match=r"overlaps blockstore\.local\.path"):
        import_prefixes(inside)


def test_a_source_name_silt_cannot_address_fails_the_import_naming_it(env: ImportEnv, landing: Path) -> None:
    tree(landing, {"odd/fine.csv": b"1", "odd/back\\slash.csv": b"2"})
    repo = env.new_repo()
    import_id = start_import(env.stub, repo, Location(type=PREFIX, path=f"local://{landing}/odd", destination="x/"))
    status = wait_for(env.stub, repo, import_id)
    assert not status.completed and "back\\\\slash.csv" in status.error and "backslash" in status.error
    assert entries(env.stub, repo, "main") == {}
