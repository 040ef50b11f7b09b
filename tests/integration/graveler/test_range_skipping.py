"""Diff, merge and path-filtered log read only the ranges a change touches, counted through gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.model import MetaRangeId
from engine.graveler import Graveler
from engine.open import open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

# Histories of a thousand entries and more per test.
pytestmark = pytest.mark.slow

# What is counted is ranges, not entries: many small ranges show the skipping as well as many
# large ones, and staging costs per entry (most of a test's time on Cassandra).
ENTRIES = 1500
REPO = "skip"


class Setup:
    def __init__(self, graveler: Graveler, stub: api_grpc.GravelerServiceStub, name: str) -> None:
        self.graveler, self.stub, self.repo = graveler, stub, name

    def range_loads(self) -> int:
        return self.graveler.committed.stats().range_loads


@pytest.fixture
def setup(store: Store, tmp_path: Path) -> Iterator[Setup]:
    # Small ranges (about 95 for 1,500 entries) so that "touched" and "all" differ widely.
    policy = ChunkingPolicy(boundary_modulus=12, min_records=4, max_records=1024)
    graveler = open_graveler(store, LocalAdapter(tmp_path / "data"), policy=policy)
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = api_grpc.GravelerServiceStub(channel)
    name = f"{REPO}-{tmp_path.name[-20:].lower().replace('_', '-')}".rstrip("-")
    stub.CreateRepository(api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}"))

    def stage(i: int) -> None:
        graveler.stage_entry(name, "main", f"data/{i:06d}", pb.Entry(physical_address=f"p/{i}", etag=str(i)))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(stage, range(ENTRIES)))
    stub.Commit(api.CommitRequest(repository=name, branch="main", message="bulk"))
    try:
        yield Setup(graveler, stub, name)
    finally:
        channel.close()
        server.stop(None)
        graveler.close()


def change(s: Setup, branch: str, key: str, etag: str) -> None:
    s.stub.StageEntry(api.StageEntryRequest(repository=s.repo, branch=branch, key=key, entry=pb.Entry(etag=etag)))
    s.stub.Commit(api.CommitRequest(repository=s.repo, branch=branch, message=f"change {key}"))


def test_diff_and_merge_read_only_touched_ranges(setup: Setup) -> None:
    s = setup
    head = s.stub.GetBranch(api.GetBranchRequest(repository=s.repo, name="main"))
    total = len(
        s.graveler.committed.ranges(
            f"local://{s.repo}",
            MetaRangeId(
                s.stub.GetCommit(api.GetCommitRequest(repository=s.repo, commit_id=head.commit_id)).metarange_id
            ),
        )
    )
    assert total > 40, f"setup should produce many ranges, got {total}"

    s.stub.CreateBranch(api.CreateBranchRequest(repository=s.repo, name="feature", source_ref="main"))
    change(s, "feature", "data/001234", "feature")
    change(s, "main", "data/001432", "main")

    before = s.range_loads()
    diff = s.stub.Diff(api.DiffRequest(repository=s.repo, left_ref="main", right_ref="feature"))
    assert [item.key for item in diff.items] == ["data/001234", "data/001432"]
    diff_loads = s.range_loads() - before
    assert diff_loads <= 8, f"diff read {diff_loads} of {total} ranges"

    before = s.range_loads()
    result = s.stub.Merge(api.MergeRequest(repository=s.repo, source_ref="feature", destination_branch="main"))
    assert not result.conflicts
    merge_loads = s.range_loads() - before
    assert merge_loads <= 8, f"merge read {merge_loads} of {total} ranges"


def test_path_filtered_log_skips_unchanged_ranges(setup: Setup) -> None:
    s = setup
    for i in range(10):
        change(s, "main", f"data/{(i * 397) % ENTRIES:06d}", f"v{i}")
    before = s.range_loads()
    log = s.stub.Log(api.LogRequest(repository=s.repo, ref="main", objects=["data/000397"]))
    assert [c.message for c in log.commits] == ["change data/000397", "bulk"]
    loads = s.range_loads() - before
    # 12 commits walked; only commits that rewrote the filtered key's range open a range.
    assert loads <= 6, f"path-filtered log read {loads} ranges"
