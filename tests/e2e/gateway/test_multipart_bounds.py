"""Multipart uploads cost bounded work: ListMultipartUploads pages from an index in S3's order,
and uploads left open expire (aborted in the block store, forgotten in KV) — through boto3
against real gateways."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from silt import multipart_uploads as uploads
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.kv import open_store
from silt.kv.store import scan_prefix
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.wait import wait_until

MAX_AGE_SECONDS = 3


def list_all(s3: Any, **kwargs: Any) -> tuple[list[tuple[str, str]], list[str], int]:
    """Every upload and common prefix, a page at a time; and how many pages it took."""
    found: list[tuple[str, str]] = []
    prefixes: list[str] = []
    for pages in range(1, 1000):
        page = s3.list_multipart_uploads(**kwargs)
        found += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        if not page["IsTruncated"]:
            return found, prefixes, pages
        kwargs.update(KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"])
    raise AssertionError("the listing never ended")


def test_uploads_are_listed_a_page_at_a_time_in_s3_order(s3: Any, bucket: str) -> None:
    keys = [f"main/p/{i % 7:02d}" for i in range(21)] + ["main/p/dir/a", "main/p/dir/b", "main/q"]
    started = [(key, s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]) for key in keys]
    try:
        # S3's order: by key, then by initiation time (the order they were started in here).
        expected = sorted(started, key=lambda u: (u[0], started.index(u)))
        assert list_all(s3, Bucket=bucket)[0] == expected
        found, _, pages = list_all(s3, Bucket=bucket, MaxUploads=4)
        assert found == expected and pages == 6

        found, prefixes, _ = list_all(s3, Bucket=bucket, Prefix="main/p/", Delimiter="/", MaxUploads=2)
        assert found == [u for u in expected if u[0].startswith("main/p/") and "dir" not in u[0]]
        assert prefixes == ["main/p/dir/"]

        # Starting after an upload of a key: that key's later uploads follow.
        first_of_03 = next(u for u in expected if u[0] == "main/p/03")
        page = s3.list_multipart_uploads(Bucket=bucket, KeyMarker="main/p/03", UploadIdMarker=first_of_03[1])
        listed = [(u["Key"], u["UploadId"]) for u in page["Uploads"]]
        assert listed == expected[expected.index(first_of_03) + 1 :]

        # max-uploads is capped at S3's 1,000.
        assert s3.list_multipart_uploads(Bucket=bucket, MaxUploads=5000)["MaxUploads"] == 1000
    finally:
        for key, upload in started:
            s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.fixture(scope="module")
def expiring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    overrides = {
        "gateways": {
            "s3": {"multipart_upload_max_age_seconds": MAX_AGE_SECONDS, "multipart_expiry_interval_seconds": 0.5}
        }
    }
    with gateway_stack(tmp_path_factory.mktemp("expiring"), overrides=overrides) as stack:
        yield stack


def _records(stack: GatewayStack) -> list[bytes]:
    store = open_store(
        DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(stack.stack.data_dir / "metadata.db")))
    )
    try:
        return [entry.key for entry in scan_prefix(store, uploads.PARTITION, b"")]
    finally:
        store.close()


def _open_block_uploads(stack: GatewayStack) -> list[Path]:
    directory = stack.stack.data_dir / "data" / ".silt-uploads"
    return list(directory.iterdir()) if directory.exists() else []


def test_uploads_left_open_expire(expiring: GatewayStack) -> None:
    s3 = expiring.client()
    bucket = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=bucket)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/forgotten")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="main/forgotten", UploadId=upload, PartNumber=1, Body=b"x" * 1024)
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == [upload]
    assert _open_block_uploads(expiring) and _records(expiring)

    wait_until(
        lambda: not (_records(expiring) or _open_block_uploads(expiring)),
        MAX_AGE_SECONDS + 15,
        "the forgotten upload swept",
        interval=0.2,
    )
    # The sweep aborted it in the block store and forgot every record (upload, indexes, parts).
    assert _open_block_uploads(expiring) == []
    assert _records(expiring) == []
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    with pytest.raises(ClientError) as err:
        s3.upload_part(Bucket=bucket, Key="main/forgotten", UploadId=upload, PartNumber=2, Body=b"y")
    assert err.value.response["Error"]["Code"] == "NoSuchUpload"

    # A young upload is untouched by the sweep and completes.
    fresh = s3.create_multipart_upload(Bucket=bucket, Key="main/kept")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="main/kept", UploadId=fresh, PartNumber=1, Body=b"z")["ETag"]
    time.sleep(1.0)  # the scenario: two sweeps pass over the young upload
    s3.complete_multipart_upload(
        Bucket=bucket, Key="main/kept", UploadId=fresh, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
    )
    assert s3.get_object(Bucket=bucket, Key="main/kept")["Body"].read() == b"z"
