"""A GC run on the S3 adapter: Spark reads the committed layer over s3a:// from moto_server."""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.graveler import GravelerOptions
from engine.open import open_graveler
from jobs.gc.job import GCOptions, run_gc
from services.graveler.server import start
from silt.block.s3 import S3Adapter
from silt.config import BlockstoreConfig, DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from tests.support.moto import s3_blockstore_config


@pytest.fixture
def s3_env(moto_server: str, tmp_path: Path) -> Iterator[tuple[api_grpc.GravelerServiceStub, S3Adapter, Any, str]]:
    blockstore = BlockstoreConfig(type="s3", s3=s3_blockstore_config(moto_server))
    adapter = S3Adapter(blockstore.s3)
    bucket = f"silt-gc-{uuid.uuid4().hex[:16]}"
    adapter.client.create_bucket(Bucket=bucket)
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "kv.db"))))
    options = GravelerOptions(allowed_namespace_roots=(f"s3://{bucket}/repos/",))
    graveler = open_graveler(store, adapter, options)
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield api_grpc.GravelerServiceStub(channel), adapter, blockstore, bucket
    finally:
        channel.close()
        server.stop(None)
        graveler.close()
        store.close()


def test_gc_on_s3(spark: Any, s3_env: tuple[api_grpc.GravelerServiceStub, S3Adapter, Any, str]) -> None:
    stub, adapter, blockstore, bucket = s3_env
    namespace = f"s3://{bucket}/repos/repo1"
    stub.CreateRepository(api.CreateRepositoryRequest(name="repo1", storage_namespace=namespace))
    stub.SetGCRules(api.SetGCRulesRequest(repository="repo1", rules=pb.GCRules(default_retention_days=0)))

    def upload(content: bytes) -> str:
        address = f"data/{uuid.uuid4().hex}"
        adapter.put(namespace, address, io.BytesIO(content), len(content))
        return address

    def stage(key: str, content: bytes) -> str:
        address = upload(content)
        # The ETag makes "new a" a change of "a" (an entry's identity is its content, not its address).
        entry = pb.Entry(physical_address=address, size=len(content), etag=hashlib.md5(content).hexdigest())
        stub.StageEntry(api.StageEntryRequest(repository="repo1", branch="main", key=key, entry=entry))
        return address

    expired = stage("a", b"old a")
    stub.Commit(api.CommitRequest(repository="repo1", branch="main", message="1"))
    head = stage("a", b"new a")
    stub.Commit(api.CommitRequest(repository="repo1", branch="main", message="2"))
    staged = stage("b", b"staged b")
    orphan = upload(b"orphan")
    time.sleep(1.1)  # S3 modification times have whole seconds: the objects must predate the run

    summary = run_gc(spark, stub, "repo1", blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))

    assert summary.objects == {"expired-commit": 1, "unreferenced": 1}
    assert summary.deleted == 2

    def read(address: str) -> bytes:
        with adapter.get(namespace, address) as stream:
            return stream.read()

    assert read(head) == b"new a"
    assert read(staged) == b"staged b"
    remaining = {
        item["Key"] for item in adapter.client.list_objects_v2(Bucket=bucket, Prefix="repos/repo1/data/")["Contents"]
    }
    assert remaining == {f"repos/repo1/{head}", f"repos/repo1/{staged}"}
    assert f"repos/repo1/{expired}" not in remaining and f"repos/repo1/{orphan}" not in remaining
    # The summary beside the report, written through S3A (the driver never opens boto3).
    written = adapter.client.get_object(Bucket=bucket, Key=f"repos/repo1/_silt/gc/{summary.run_id}/summary.json")
    assert json.loads(written["Body"].read()) == json.loads(summary.as_json())
