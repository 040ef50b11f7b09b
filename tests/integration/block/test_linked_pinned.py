"""An object a client uploads with the store's own presigned PUT URL and then links is read only as
the link checked it: the URL stays usable until it expires, and a second PUT to it after the link
(after the change was reviewed and merged) never changes what the entry serves.

lakeFS's clients send only Content-Length, Content-Type (and Azure's x-ms-blob-type) with a
presigned PUT, so a condition signed into the URL would break them; instead the link records the
store's version of what it checked and reads ask for it (silt/block/external.py reads_pinned):

* S3 (moto): If-Match on the linked ETag in every read, and in a versioned bucket the linked
  VersionId: the second PUT is another version, and the linked one is still served;
* GCS (fake-gcs-server): the linked generation is read; a bucket that keeps no old generations
  answers SourceChanged once it is overwritten. (fake-gcs-server takes no XML API PUTs, so the
  second write goes through the adapter; the URL is checked to be the store's own.)
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import urllib3

from edge.api.objects.link_addresses import LinkAddresses
from silt.block.external import ExternalFiles, source_reader
from silt.block.gcs import GCSAdapter
from silt.block.local import LocalAdapter
from silt.block.rules import signed_upload_headers
from silt.block.s3 import S3Adapter
from silt.errors import SourceChanged
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import SOURCE_VERSION_KEY
from tests.support.emulators import gs_blockstore_config
from tests.support.moto import s3_blockstore_config

ORIGINAL = b"the bytes the link checked"
REPLACEMENT = b"other bytes, PUT after link"
HTTP = urllib3.PoolManager(retries=False, timeout=30)
ADDRESSES = LinkAddresses(b"k" * 32)
NO_IMPORTS = ExternalFiles(())


def linked_entry(adapter: S3Adapter | GCSAdapter, namespace: str, address: str) -> pb.Entry:
    """The entry linkPhysicalAddress stages once its check of the object passed."""
    found = adapter.stat(namespace, address)
    metadata = {SOURCE_VERSION_KEY: found.version} if found.version else {}
    return pb.Entry(physical_address=address, size=found.size, etag=found.etag, metadata=metadata)


def read_all(adapter: S3Adapter | GCSAdapter, namespace: str, entry: pb.Entry) -> tuple[bytes, bytes]:
    """The entry's bytes whole and a range of them, as every front end reads an entry."""
    reader = source_reader(adapter, NO_IMPORTS, namespace, entry)
    with reader.get(namespace, entry.physical_address) as whole:
        data = whole.read()
    with reader.get_range(namespace, entry.physical_address, 4, 9) as part:
        return data, part.read()


@pytest.fixture
def versioned_bucket(s3_adapter: S3Adapter) -> Iterator[str]:
    client = s3_adapter.client
    bucket = f"silt-test-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    yield bucket
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for version in page.get("Versions", []) + page.get("DeleteMarkers", []):
            client.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
    client.delete_bucket(Bucket=bucket)


@pytest.mark.s3
def test_s3_a_second_put_to_the_upload_url_is_refused_on_read(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    namespace = f"s3://{s3_bucket}/lake/repo"
    address = ADDRESSES.issue("repo", "main", "table.csv")
    url = s3_adapter.presign(namespace, address, "PUT", 300).url
    assert HTTP.request("PUT", url, body=ORIGINAL).status == 200
    entry = linked_entry(s3_adapter, namespace, address)
    assert read_all(s3_adapter, namespace, entry) == (ORIGINAL, ORIGINAL[4:10])

    assert HTTP.request("PUT", url, body=REPLACEMENT).status == 200  # the URL is still valid
    with pytest.raises(SourceChanged, match="since it was linked"):
        read_all(s3_adapter, namespace, entry)


@pytest.mark.s3
def test_s3_in_a_versioned_bucket_the_linked_version_is_still_served(
    s3_adapter: S3Adapter, versioned_bucket: str
) -> None:
    namespace = f"s3://{versioned_bucket}/lake/repo"
    address = ADDRESSES.issue("repo", "main", "table.csv")
    url = s3_adapter.presign(namespace, address, "PUT", 300).url
    assert HTTP.request("PUT", url, body=ORIGINAL).status == 200
    entry = linked_entry(s3_adapter, namespace, address)
    assert entry.metadata[SOURCE_VERSION_KEY]

    assert HTTP.request("PUT", url, body=REPLACEMENT).status == 200
    assert s3_adapter.stat(namespace, address).size == len(REPLACEMENT)  # the store serves the new bytes
    assert read_all(s3_adapter, namespace, entry) == (ORIGINAL, ORIGINAL[4:10])


@pytest.mark.s3
def test_s3_objects_silt_wrote_itself_are_read_as_before(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    namespace = f"s3://{s3_bucket}/lake/repo"
    s3_adapter.put(namespace, "data/" + uuid.uuid4().hex, io.BytesIO(ORIGINAL), len(ORIGINAL))
    entry = pb.Entry(physical_address="data/" + uuid.uuid4().hex)
    assert source_reader(s3_adapter, NO_IMPORTS, namespace, entry) is s3_adapter


def test_linked_uploads_on_a_local_disk_are_read_plainly(tmp_path: Path) -> None:
    # The edge's own upload URLs write once: nothing can change the bytes after the link.
    adapter = LocalAdapter(tmp_path)
    entry = pb.Entry(physical_address=ADDRESSES.issue("repo", "main", "t.csv"))
    assert source_reader(adapter, NO_IMPORTS, "local://repo", entry) is adapter


@pytest.mark.gs
def test_gcs_a_second_write_after_the_link_is_never_served(
    fake_gcs_server: str, gcs_adapter: GCSAdapter, gcs_bucket: str, service_account_json: str
) -> None:
    signer = GCSAdapter(gs_blockstore_config(fake_gcs_server, credentials_json=service_account_json))
    namespace = f"gs://{gcs_bucket}/lake/repo"
    address = ADDRESSES.issue("repo", "main", "table.csv")
    url = signer.presign(namespace, address, "PUT", 300)
    assert url is not None and url.url.startswith(f"{fake_gcs_server}/{gcs_bucket}/lake/repo/{address}?")
    # What the client's PUT to the URL does, and later its second PUT to the same URL.
    gcs_adapter.put(namespace, address, io.BytesIO(ORIGINAL), len(ORIGINAL))
    entry = linked_entry(gcs_adapter, namespace, address)
    assert entry.metadata[SOURCE_VERSION_KEY].isdigit()
    assert read_all(gcs_adapter, namespace, entry) == (ORIGINAL, ORIGINAL[4:10])

    gcs_adapter.put(namespace, address, io.BytesIO(REPLACEMENT), len(REPLACEMENT))
    with pytest.raises(SourceChanged, match="since it was linked"):
        read_all(gcs_adapter, namespace, entry)


# --- write-once upload URLs (blockstore.<s3|gs>.pre_signed_put_write_once) ---------------------
# moto_server honours If-None-Match but checks no signatures, and fake-gcs-server takes no XML API
# PUTs: that a real store refuses an upload omitting a signed header is S3's and GCS's SigV4 / V4
# rule, shown here by the header being among the URL's signed headers.


@pytest.mark.s3
def test_s3_write_once_urls_sign_if_none_match_and_refuse_a_second_put(moto_server: str, s3_bucket: str) -> None:
    config = s3_blockstore_config(moto_server, max_retries=0).model_copy(update={"pre_signed_put_write_once": True})
    adapter = S3Adapter(config)
    namespace = f"s3://{s3_bucket}/lake/repo"
    address = ADDRESSES.issue("repo", "main", "table.csv")
    url = adapter.presign(namespace, address, "PUT", 300).url
    assert "if-none-match" in parse_qs(urlsplit(url).query)["X-Amz-SignedHeaders"][0].split(";")
    headers = signed_upload_headers(url)
    assert headers == {"If-None-Match": "*"}
    assert HTTP.request("PUT", url, body=ORIGINAL, headers=headers).status == 200
    again = HTTP.request("PUT", url, body=REPLACEMENT, headers=headers)
    assert again.status == 412 and b"PreconditionFailed" in again.data
    with adapter.get(namespace, address) as stored:
        assert stored.read() == ORIGINAL
    # GET URLs, and PUT URLs without the setting, sign no condition.
    assert signed_upload_headers(adapter.presign(namespace, address, "GET", 300).url) == {}
    plain = S3Adapter(s3_blockstore_config(moto_server, max_retries=0))
    assert signed_upload_headers(plain.presign(namespace, address, "PUT", 300).url) == {}


@pytest.mark.gs
def test_gcs_write_once_urls_sign_the_generation_condition(fake_gcs_server: str, service_account_json: str) -> None:
    config = gs_blockstore_config(fake_gcs_server, credentials_json=service_account_json)
    signer = GCSAdapter(config.model_copy(update={"pre_signed_put_write_once": True}))
    url = signer.presign("gs://bucket/lake/repo", ADDRESSES.issue("repo", "main", "t.csv"), "PUT", 300)
    assert url is not None
    signed = parse_qs(urlsplit(url.url).query)["X-Goog-SignedHeaders"][0].split(";")
    assert "x-goog-if-generation-match" in signed
    assert signed_upload_headers(url.url) == {"x-goog-if-generation-match": "0"}
    plain = GCSAdapter(config).presign("gs://bucket/lake/repo", "data/x", "PUT", 300)
    assert plain is not None and signed_upload_headers(plain.url) == {}
