"""Zero-copy import from Google Cloud Storage (fake-gcs-server) and Azure Blob Storage (Azurite):
a prefix and one object listed through the block adapter, read back where they are, and a
source changed since the import refused rather than served."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from engine.graveler import GravelerOptions
from engine.open import open_graveler
from services.graveler.server import start
from silt.block import BlockAdapter, open_adapter
from silt.block.external import ExternalFiles, source_reader
from silt.config import BlockstoreConfig, DatabaseConfig
from silt.errors import SourceChanged
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.kv import open_store
from silt.objects import split_address
from tests.integration.graveler.test_imports import OBJECT, PREFIX, Location, code_of, entries, start_import, wait_for
from tests.support.emulators import AZURITE_ACCOUNT, azure_blockstore_config, gs_blockstore_config


@dataclass
class StoreEnv:
    stub: api_grpc.GravelerServiceStub
    adapter: BlockAdapter
    landing: str  # the bucket or container imports read from
    lake: str  # the one namespaces go into


def _roots(kind: str, request: pytest.FixtureRequest) -> tuple[BlockstoreConfig, str, str]:
    run = uuid.uuid4().hex[:8]
    if kind == "gs":
        endpoint = request.getfixturevalue("fake_gcs_server")
        return BlockstoreConfig(type="gs", gs=gs_blockstore_config(endpoint)), f"gs://land-{run}", f"gs://lake-{run}"
    endpoint = request.getfixturevalue("azurite_server")
    base = f"{endpoint}/{AZURITE_ACCOUNT}"
    blockstore = BlockstoreConfig(type="azure", azure=azure_blockstore_config(endpoint))
    return blockstore, f"{base}/land-{run}", f"{base}/lake-{run}"


def _create(kind: str, blockstore: BlockstoreConfig, root: str) -> None:
    if kind == "gs":
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(
            project="silt-test",
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=blockstore.gs.endpoint_url),
        )
        client.create_bucket(root[len("gs://") :])
        return
    from azure.storage.blob import BlobServiceClient

    azure = blockstore.azure
    assert azure.storage_access_key is not None
    service = BlobServiceClient(
        f"{azure.test_endpoint_url}/{azure.storage_account}",
        credential={
            "account_name": str(azure.storage_account),
            "account_key": azure.storage_access_key.get_secret_value(),
        },
    )
    service.create_container(root.rsplit("/", 1)[1])


@pytest.fixture(params=[pytest.param("gs", marks=pytest.mark.gs), pytest.param("azure", marks=pytest.mark.azure)])
def store_env(request: pytest.FixtureRequest) -> Iterator[StoreEnv]:
    kind = request.param
    blockstore, landing, lake = _roots(kind, request)
    for root in (landing, lake):
        _create(kind, blockstore, root)
    adapter = open_adapter(blockstore)
    kv = open_store(DatabaseConfig(type="mem"))
    options = GravelerOptions(allowed_import_prefixes=(f"{landing}/data/",), allowed_namespace_roots=(f"{lake}/",))
    graveler = open_graveler(kv, adapter, options)
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield StoreEnv(api_grpc.GravelerServiceStub(channel), adapter, landing, lake)
    finally:
        channel.close()
        server.stop(None)
        graveler.close()
        kv.close()


def test_a_prefix_and_one_object_are_imported_in_place(store_env: StoreEnv) -> None:
    env = store_env
    keys = ["data/2024/a", "data/2024/b/c", "data/2024-old/d", "data/f", "data/f2", "elsewhere/x"]
    for key in keys:
        env.adapter.put(env.landing, key, io.BytesIO(key.encode()), len(key))
    namespace = f"{env.lake}/repo"
    env.stub.CreateRepository(api.CreateRepositoryRequest(name="repo", storage_namespace=namespace))
    import_id = start_import(
        env.stub,
        "repo",
        Location(type=PREFIX, path=f"{env.landing}/data/2024", destination="lake"),
        Location(type=OBJECT, path=f"{env.landing}/data/f", destination="single"),
    )
    status = wait_for(env.stub, "repo", import_id)
    assert status.completed, status.error
    found = entries(env.stub, "repo", "main")
    assert sorted(found) == ["lake/2024-old/d", "lake/2024/a", "lake/2024/b/c", "single"]
    single = found["single"]
    source = env.adapter.stat(env.landing, "data/f")
    assert single.physical_address == f"{env.landing}/data/f"
    assert (single.size, single.etag) == (source.size, source.etag)
    # Zero copy: the namespace holds nothing but Silt's metadata.
    assert all(item.key.startswith("_silt/") for item in env.adapter.list_objects(namespace))

    # Read where it lies, and refused once the source changes.
    reader = source_reader(env.adapter, ExternalFiles(()), namespace, single)
    with reader.get(*split_address(namespace, single.physical_address)) as stream:
        assert stream.read() == b"data/f"
    env.adapter.put(env.landing, "data/f", io.BytesIO(b"changed!"), 8)
    with pytest.raises(SourceChanged):
        reader.get(*split_address(namespace, single.physical_address))

    code, details = code_of(
        lambda: start_import(env.stub, "repo", Location(type=PREFIX, path=f"{env.landing}/elsewhere/", destination="x"))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "allowed_import_prefixes" in details
    code, details = code_of(
        lambda: start_import(env.stub, "repo", Location(type=PREFIX, path="s3://bucket/data/", destination="x"))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "need the s3 blockstore" in details
