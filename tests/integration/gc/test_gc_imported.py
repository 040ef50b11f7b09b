"""Garbage collection never deletes an imported object: it deletes only what Silt wrote into the
repository's namespace, whatever the retention says of the commits that name the import, and an
expiry by last access removes the entry, never the source."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.graveler import GravelerOptions
from jobs.gc.job import GCOptions, run_gc
from silt.config import BlockstoreConfig, LocalBlockstoreConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv, served_gc_env

DAY = 86_400
RULE = pb.LastAccessRule(branch="main", prefixes=["lake/logs/"], days=30)


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    root = tmp_path / "landing"
    old = time.time() - 60 * DAY
    for name in ("logs/old.txt", "logs/kept.txt", "data/x.parquet"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())
        os.utime(root / name, (old, old))
    return root


@pytest.fixture
def env(tmp_path: Path, landing: Path) -> Iterator[GCEnv]:
    blockstore = BlockstoreConfig(
        type="local",
        local=LocalBlockstoreConfig(
            path=str(tmp_path / "data"), import_enabled=True, allowed_external_prefixes=[str(landing)]
        ),
    )
    options = GravelerOptions(allowed_import_prefixes=(f"local://{landing}",))
    with served_gc_env(tmp_path, blockstore, options) as served:
        yield served


def _import(env: GCEnv, repo: str, landing: Path) -> None:
    location = api.ImportLocation(
        type=api.ImportLocation.TYPE_COMMON_PREFIX, path=f"local://{landing}", destination="lake"
    )
    started = env.stub.StartImport(api.StartImportRequest(repository=repo, branch="main", locations=[location]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = env.stub.GetImportStatus(api.GetImportStatusRequest(repository=repo, branch="main", id=started.id))
        if status.completed or status.error:
            break
        time.sleep(0.05)
    assert status.completed, status.error


def test_gc_and_last_access_expiry_never_delete_imported_sources(spark: Any, env: GCEnv, landing: Path) -> None:
    repo = env.new_repo(default_days=None)
    rules = pb.GCRules(default_retention_days=0, last_access_rules=[RULE])
    env.stub.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=rules))
    _import(env, repo, landing)
    before = {path: path.read_bytes() for path in landing.rglob("*") if path.is_file()}

    # Expiry by last access deletes the old imported log from the branch, in a commit.
    prepared = env.stub.PrepareLastAccess(api.PrepareLastAccessRequest(repository=repo, branch="main"))
    expired = env.stub.ExpireEntries(
        api.ExpireEntriesRequest(
            repository=repo,
            branch="main",
            rule=RULE,
            entries=[api.ExpiredEntry(key="lake/logs/old.txt", physical_address=f"local://{landing}/logs/old.txt")],
            run_id=prepared.run_id,
        )
    )
    assert expired.expired == 1
    # Every other imported entry leaves the branch too, so only expired commits name them.
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="lake/data/x.parquet"))
    env.put(repo, "main", "lake/logs/kept.txt", b"overwritten by an upload")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="drop the import"))
    orphan = env.upload(repo, b"written into the namespace, never staged")

    summary = run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))
    assert summary.objects["unreferenced"] == 1 and not env.exists(repo, orphan)
    assert {path: path.read_bytes() for path in landing.rglob("*") if path.is_file()} == before
