"""Fixtures of the block adapter suites: one adapter of each kind with a fresh namespace.

``moto_server`` (the S3 endpoint), ``azurite_server`` (Azure Blob Storage) and ``fake_gcs_server``
(Google Cloud Storage) come from
tests/conftest.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from silt.block import BlockAdapter
from silt.block.azure import AzureAdapter
from silt.block.gcs import GCSAdapter
from silt.block.local import LocalAdapter
from silt.block.s3 import S3Adapter
from tests.support.emulators import AZURITE_ACCOUNT, azure_blockstore_config, gs_blockstore_config
from tests.support.moto import s3_blockstore_config

ADAPTERS = [
    "local",
    # The same adapter with concurrent puts' syncs batched (silt/block/groupsync.py).
    "local-group_syncfs",
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("azure", marks=pytest.mark.azure),
    pytest.param("gs", marks=pytest.mark.gs),
]


@dataclass
class Blocks:
    """An adapter under test and a storage namespace of its own."""

    kind: str
    adapter: BlockAdapter
    namespace: str
    root: Path | None = None  # the local adapter's root directory


# A listing request's target: S3's ListObjectsV2, Azure's List Blobs, GCS's objects.list.
LISTING = re.compile(r"[?&]list-type=2(&|$)|[?&]comp=list(&|$)|/storage/v1/b/[^/?]+/o\?")


def count_listing_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of the listing requests the test's adapters send from now on (each store's SDK
    sends through urllib3, whose requests still go out), so that a test can tell how many pages
    a listing took."""
    calls: list[str] = []
    urlopen = urllib3.connectionpool.HTTPConnectionPool.urlopen

    def counted(pool: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET" and LISTING.search(url):
            calls.append(url)
        return urlopen(pool, method, url, *args, **kwargs)

    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", counted)
    return calls


def _empty_bucket(client: Any, bucket: str) -> None:
    # moto keeps objects in memory for the whole run; drop each test's bytes.
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        for upload in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    # A page's keys in one DeleteObjects call (a page is at most its limit of 1,000 keys): a
    # DeleteObject per key made emptying a listing test's bucket take longer than the test.
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=bucket)


@pytest.fixture(scope="session")
def s3_adapter(request: pytest.FixtureRequest) -> S3Adapter:
    # One for the run: building a boto3 client loads the service model, a few hundred ms.
    # No retries: moto on loopback does not fail transiently, and a retried 5xx would
    # only slow down the tests that expect one.
    endpoint_url = request.getfixturevalue("moto_server")
    return S3Adapter(s3_blockstore_config(endpoint_url, max_retries=0))


@pytest.fixture
def s3_bucket(s3_adapter: S3Adapter) -> Iterator[str]:
    bucket = f"silt-test-{uuid.uuid4().hex[:20]}"
    s3_adapter.client.create_bucket(Bucket=bucket)
    yield bucket
    _empty_bucket(s3_adapter.client, bucket)


@pytest.fixture(scope="session")
def gcs_adapter(request: pytest.FixtureRequest) -> GCSAdapter:
    # One for the run, like s3_adapter; no retries against the emulator either.
    return GCSAdapter(gs_blockstore_config(request.getfixturevalue("fake_gcs_server")))


@pytest.fixture
def gcs_bucket(gcs_adapter: GCSAdapter) -> Iterator[str]:
    bucket = f"silt-test-{uuid.uuid4().hex[:20]}"
    gcs_adapter.client.create_bucket(bucket)
    yield bucket
    # fake-gcs-server keeps objects in memory for the whole run; drop each test's bytes. A
    # request per blob (the emulator answers no batch requests), several at a time: one at a
    # time was most of the time of a listing test.
    blobs = list(gcs_adapter.client.list_blobs(bucket))  # listed whole before any is deleted
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda blob: blob.delete(), blobs))
    gcs_adapter.client.bucket(bucket).delete()


@pytest.fixture(scope="session")
def azure_adapter(azurite_server: str) -> AzureAdapter:
    # One for the run, like s3_adapter; no retries: Azurite on loopback does not fail transiently.
    return AzureAdapter(azure_blockstore_config(azurite_server), retries=0)


@pytest.fixture
def azure_container(azure_adapter: AzureAdapter, azurite_server: str) -> Iterator[str]:
    """A fresh container; deleted (with everything in it) at the end of the test."""
    container = f"silt-test-{uuid.uuid4().hex[:20]}"
    service = azure_adapter.service_client(AZURITE_ACCOUNT)
    service.create_container(container)
    yield container
    service.delete_container(container)


@pytest.fixture(params=ADAPTERS)
def blocks(request: pytest.FixtureRequest, tmp_path: Path) -> Blocks:
    if request.param.startswith("local"):
        root = tmp_path / "blocks"
        adapter = LocalAdapter(root, sync="group_syncfs" if request.param.endswith("group_syncfs") else "fsync")
        return Blocks("local", adapter, "local://repo-ns/some/prefix", root)
    if request.param == "gs":
        bucket = request.getfixturevalue("gcs_bucket")
        return Blocks("gs", request.getfixturevalue("gcs_adapter"), f"gs://{bucket}/some/prefix")
    if request.param == "azure":
        endpoint = request.getfixturevalue("azurite_server")
        container = request.getfixturevalue("azure_container")
        adapter = request.getfixturevalue("azure_adapter")
        return Blocks("azure", adapter, f"{endpoint}/{AZURITE_ACCOUNT}/{container}/some/prefix")
    adapter = request.getfixturevalue("s3_adapter")
    bucket = request.getfixturevalue("s3_bucket")
    return Blocks("s3", adapter, f"s3://{bucket}/some/prefix")


@pytest.fixture(scope="session")
def service_account_json() -> str:
    """A service account key of a made-up account: a fresh RSA key, never known to Google."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "silt-sa-project",
            "private_key_id": "0123456789abcdef",
            "private_key": pem,
            "client_email": "silt-test@silt-sa-project.iam.gserviceaccount.com",
            "client_id": "1234567890",
            "token_uri": "https://oauth2.googleapis.com/token",
        }
    )
