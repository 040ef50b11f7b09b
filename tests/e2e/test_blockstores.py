"""A repository whose bytes live in Azure Blob Storage (Azurite) or Google Cloud Storage
(fake-gcs-server): the stack on that blockstore, driven as users drive it.

Objects go in through the S3 gateway (single PUTs, a multipart upload, a copy); commits, a
branch and a merge through graveler; garbage collection runs its Spark job over the store; the
journal is shipped into the namespace and the repository rebuilt from it alone into an empty KV.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lakefs
import pytest

from engine.open import open_graveler
from jobs.gc.job import GCOptions, run_gc
from silt.block import BlockAdapter, open_adapter
from silt.config import BlockstoreConfig, DatabaseConfig, LocalDatabaseConfig
from silt.errors import NotFound
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.launcher import SECRET_KEY_FILE
from silt.objects import split_address
from tests.e2e.conftest import Silt
from tests.integration.journal.workload import api_dump
from tests.support.emulators import AZURITE_ACCOUNT, azure_blockstore_config, gs_blockstore_config
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.wait import wait_until

MIB = 1024 * 1024
REPO = "lake"


@dataclass
class OnStore:
    kind: str
    blockstore: BlockstoreConfig
    adapter: BlockAdapter
    root: str  # the bucket's or container's namespace root
    stack: GatewayStack


def _blockstore(kind: str, request: pytest.FixtureRequest) -> tuple[BlockstoreConfig, str]:
    """The blockstore section for a fresh bucket or container, and its URI."""
    suffix = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    if kind == "azure":
        endpoint = request.getfixturevalue("azurite_server")
        blockstore = BlockstoreConfig(type="azure", azure=azure_blockstore_config(endpoint))
        container = f"silt-e2e-{suffix}"
        return blockstore, f"{endpoint}/{AZURITE_ACCOUNT}/{container}"
    endpoint = request.getfixturevalue("fake_gcs_server")
    blockstore = BlockstoreConfig(type="gs", gs=gs_blockstore_config(endpoint))
    return blockstore, f"gs://silt-e2e-{suffix}"


def _create_root(kind: str, blockstore: BlockstoreConfig, root: str) -> None:
    if kind == "azure":
        from azure.storage.blob import BlobServiceClient

        azure = blockstore.azure
        assert azure.test_endpoint_url and azure.storage_access_key
        service = BlobServiceClient(
            f"{azure.test_endpoint_url}/{azure.storage_account}",
            credential={
                "account_name": str(azure.storage_account),
                "account_key": azure.storage_access_key.get_secret_value(),
            },
        )
        service.create_container(root.rsplit("/", 1)[1])
        return
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="silt-test",
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=blockstore.gs.endpoint_url),
    )
    client.create_bucket(root[len("gs://") :])


@pytest.fixture(params=[pytest.param("azure", marks=pytest.mark.azure), pytest.param("gs", marks=pytest.mark.gs)])
def on_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OnStore]:
    kind = request.param
    blockstore, root = _blockstore(kind, request)
    _create_root(kind, blockstore, root)
    overrides = {
        "blockstore": blockstore.model_dump(mode="json", exclude_none=True)
        | {kind: _plain(blockstore.model_dump(mode="python", exclude_none=True)[kind])},
        "graveler": {"allowed_namespace_roots": [root + "/"]},
        "gateways": {"s3": {"storage_namespace_template": root + "/{repo}"}},
    }
    with gateway_stack(tmp_path / "stack", overrides=overrides) as stack:
        yield OnStore(kind, blockstore, open_adapter(blockstore), root, stack)


def _plain(section: dict[str, Any]) -> dict[str, Any]:
    """A configuration section with its secrets written out, for the stack's config file."""
    return {k: v.get_secret_value() if hasattr(v, "get_secret_value") else v for k, v in section.items()}


def _address(stack: GatewayStack, ref: str, key: str) -> str:
    entry = stack.graveler.StatEntry(api.StatEntryRequest(repository=REPO, ref=ref, key=key), timeout=30).entry
    return entry.physical_address


def _exists(store: OnStore, namespace: str, address: str) -> bool:
    try:
        store.adapter.stat(*split_address(namespace, address))
        return True
    except NotFound:
        return False


@pytest.mark.spark
def test_a_repository_on_the_store_end_to_end(on_store: OnStore, spark: Any, tmp_path: Path) -> None:
    stack = on_store.stack
    graveler = stack.graveler
    s3 = stack.client()
    s3.create_bucket(Bucket=REPO)
    namespace = graveler.GetRepository(api.GetRepositoryRequest(name=REPO), timeout=30).storage_namespace
    assert namespace == f"{on_store.root}/{REPO}"

    # Writes through the S3 gateway: single PUTs, a multipart upload, a server-side copy.
    s3.put_object(Bucket=REPO, Key="main/t/a", Body=b"version 1")
    s3.put_object(Bucket=REPO, Key="main/t/keep", Body=b"kept")
    part = os.urandom(5 * MIB)
    upload = s3.create_multipart_upload(Bucket=REPO, Key="main/big")["UploadId"]
    etags = [
        s3.upload_part(Bucket=REPO, Key="main/big", UploadId=upload, PartNumber=n, Body=body)["ETag"]
        for n, body in ((1, part), (2, b"tail"))
    ]
    s3.complete_multipart_upload(
        Bucket=REPO,
        Key="main/big",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]},
    )
    s3.copy_object(Bucket=REPO, Key="main/t/copy", CopySource=f"{REPO}/main/t/keep")
    assert s3.get_object(Bucket=REPO, Key="main/big", Range="bytes=5242878-5242881")["Body"].read() == part[-2:] + b"ta"
    graveler.Commit(api.CommitRequest(repository=REPO, branch="main", message="first"), timeout=60)
    first = _address(stack, "main", "t/a")

    # lakeFS's own client with presigned URLs: Azure's SAS URLs; on the anonymous emulator of
    # GCS (no key to sign with), Silt's own edge URLs.
    admin = stack.admin
    client = lakefs.Client(
        host=stack.endpoint, username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )
    presigned = lakefs.Repository(REPO, client=client).branch("main").object("t/presigned.csv")
    rows = b"".join(f"{i:06d},row\n".encode() for i in range(20_000))
    presigned.upload(rows, mode="wb", pre_sign=True, content_type="text/csv")
    url = presigned.stat(pre_sign=True).physical_address
    store_url = on_store.kind == "azure"
    assert url.startswith(on_store.root if store_url else stack.endpoint), url
    with presigned.reader("rb", pre_sign=True) as reader:
        assert reader.read() == rows

    # A new version of t/a: the first one is left only to the first commit, which GC expires.
    s3.put_object(Bucket=REPO, Key="main/t/a", Body=b"version 2")
    graveler.Commit(api.CommitRequest(repository=REPO, branch="main", message="second"), timeout=60)

    # A branch, a change on it, a merge back.
    graveler.CreateBranch(api.CreateBranchRequest(repository=REPO, name="dev", source_ref="main"), timeout=30)
    s3.put_object(Bucket=REPO, Key="dev/t/b", Body=b"from dev")
    graveler.Commit(api.CommitRequest(repository=REPO, branch="dev", message="on dev"), timeout=60)
    graveler.Merge(api.MergeRequest(repository=REPO, source_ref="dev", destination_branch="main"), timeout=60)
    assert s3.get_object(Bucket=REPO, Key="main/t/b")["Body"].read() == b"from dev"
    expected = {
        "big": part + b"tail",
        "t/a": b"version 2",
        "t/b": b"from dev",
        "t/copy": b"kept",
        "t/keep": b"kept",
        "t/presigned.csv": rows,
    }
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=REPO, Prefix="main/")["Contents"]]
    assert listed == [f"main/{key}" for key in expected]
    kept = {key: _address(stack, "main", key) for key in ("t/a", "t/b", "t/keep", "big")}
    assert _exists(on_store, namespace, first)

    graveler.SetGCRules(api.SetGCRulesRequest(repository=REPO, rules=pb.GCRules(default_retention_days=0)), timeout=30)
    # Every object must predate the run as the store dates it (GC's listing reads the store's
    # times, which a store may round up to its resolution): past the newest, the run may start.
    newest = max(item.mtime for item in on_store.adapter.list_objects(namespace))
    wait_until(lambda: datetime.now(UTC) > newest, 10, f"the clock past the newest object's time {newest}")
    summary = run_gc(spark, graveler, REPO, on_store.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))
    assert summary.objects.get("expired-commit") == 1 and summary.deleted == 1, summary
    assert not _exists(on_store, namespace, first)
    assert all(_exists(on_store, namespace, address) for address in kept.values())
    assert s3.get_object(Bucket=REPO, Key="main/t/a")["Body"].read() == b"version 2"

    # The journal shipped into the namespace, and the repository rebuilt from it into an empty KV.
    config_path = stack.stack.config_path
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("SILT_", "AWS_"))}
    # The services' key signs the journal's batches: the launcher hands it to them, not to the CLI.
    key = (stack.stack.data_dir / SECRET_KEY_FILE).read_text().strip()
    env |= {"SILT_CONFIG": str(config_path), "SILT_AUTH_ENCRYPT_SECRET_KEY": key}
    silt = Silt(env, tmp_path)
    # `silt doctor` on a machine with the services' configuration reaches the store too.
    doctor = Silt({**env, **stack.stack.env_for_clients()}, tmp_path)("doctor", "--json", ok=False)
    checks = {c["service"]: c for c in json.loads(doctor.out)}
    assert checks["blockstore"]["status"] == "ok", checks
    assert f"{on_store.kind} ok (reached {on_store.root}/)" in checks["blockstore"]["detail"]
    shipped = silt("admin", "journal", "ship", "--repository", REPO, "--json")
    assert '"records"' in shipped.out
    fresh = tmp_path / "rebuilt.db"
    rebuilt = Silt({**env, "SILT_DATABASE_LOCAL_PATH": str(fresh)}, tmp_path)
    out = rebuilt("admin", "rebuild", "--namespace", namespace, "--json")
    assert '"repository": "lake"' in out.out, out
    with open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(fresh)))) as kv:
        engine = open_graveler(kv, on_store.adapter)
        try:
            dump = api_dump(engine, on_store.adapter, REPO)
        finally:
            engine.close()
    sha = {key: hashlib.sha256(value).hexdigest() for key, value in expected.items()}
    assert dump["objects"]["main"] == sha
    assert dump["objects"]["dev"] == sha
