"""The Google Cloud Storage adapter only: credentials, outages, presigned URLs, create-only
writes and what the conformance suite does not reach (compose in stages, upload bookkeeping)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import google.auth
import pytest
import urllib3
from google.auth.credentials import AnonymousCredentials
from google.oauth2 import service_account
from pydantic import SecretStr

from silt.block import PartInfo, open_adapter
from silt.block.adapter import PresignedURL
from silt.block.gcs import GCSAdapter, load_credentials
from silt.config import BlockstoreConfig, GSBlockstoreConfig
from silt.errors import AlreadyExists, ConfigError, InvalidArgument, NotFound, Unavailable
from silt.free_ports import free_port
from tests.integration.block.streams import md5_hex, multipart_etag
from tests.support.emulators import gs_blockstore_config

pytestmark = pytest.mark.gs

HTTP = urllib3.PoolManager(retries=False, timeout=30)
UPLOAD = "0123456789abcdef0123456789abcdef"  # well-formed, never created


# --- credentials ---------------------------------------------------------------------


def test_credentials_json_comes_first(service_account_json: str, tmp_path: Path) -> None:
    other = tmp_path / "unused.json"
    other.write_text("not even JSON")
    config = GSBlockstoreConfig(credentials_json=SecretStr(service_account_json), credentials_file=str(other))
    creds, project = load_credentials(config)
    assert isinstance(creds, service_account.Credentials)
    assert creds.service_account_email == "silt-test@silt-sa-project.iam.gserviceaccount.com"
    assert project == "silt-sa-project"


def test_credentials_file_is_a_service_account_key(service_account_json: str, tmp_path: Path) -> None:
    path = tmp_path / "key.json"
    path.write_text(service_account_json)
    creds, _ = load_credentials(GSBlockstoreConfig(credentials_file=str(path)))
    assert isinstance(creds, service_account.Credentials)


def test_an_emulator_without_credentials_is_anonymous() -> None:
    creds, _ = load_credentials(GSBlockstoreConfig(endpoint_url="http://127.0.0.1:9"))
    assert isinstance(creds, AnonymousCredentials)


def test_application_default_credentials_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = AnonymousCredentials()
    calls: list[Any] = []

    def fake_default(scopes: Any = None, **kwargs: Any) -> tuple[Any, str]:
        calls.append(scopes)
        return sentinel, "adc-project"

    monkeypatch.setattr(google.auth, "default", fake_default)
    assert load_credentials(GSBlockstoreConfig()) == (sentinel, "adc-project")
    assert calls and "devstorage" in calls[0][0]


def test_bad_credentials_are_a_config_error_that_never_quotes_them(tmp_path: Path) -> None:
    secret = '{"type": "service_account", "private_key": "SECRET-KEY-MATERIAL"'
    with pytest.raises(ConfigError) as caught:
        GCSAdapter(GSBlockstoreConfig(credentials_json=SecretStr(secret)))
    assert "SECRET" not in str(caught.value)
    broken = json.dumps({"type": "service_account", "private_key": "SECRET-KEY-MATERIAL", "client_email": "a@b"})
    with pytest.raises(ConfigError) as caught:
        GCSAdapter(GSBlockstoreConfig(credentials_json=SecretStr(broken)))
    assert "SECRET" not in str(caught.value)
    with pytest.raises(ConfigError):
        GCSAdapter(GSBlockstoreConfig(credentials_file=str(tmp_path / "missing.json")))


def test_open_adapter_builds_the_gs_adapter() -> None:
    adapter = open_adapter(BlockstoreConfig(type="gs", gs=gs_blockstore_config("http://127.0.0.1:9")))
    assert isinstance(adapter, GCSAdapter) and adapter.scheme == "gs"


# --- outages -------------------------------------------------------------------------


def test_every_operation_is_unavailable_when_the_endpoint_is_down() -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    adapter = GCSAdapter(gs_blockstore_config(closed), connect_timeout=1, read_timeout=1)
    ns = "gs://bucket/ns"
    operations = {
        "put": lambda: adapter.put(ns, "k", io.BytesIO(b"x")),
        "put_if_absent": lambda: adapter.put_if_absent(ns, "k", io.BytesIO(b"x")),
        "get": lambda: adapter.get(ns, "k"),
        "get_range": lambda: adapter.get_range(ns, "k", 0, 1),
        "stat": lambda: adapter.stat(ns, "k"),
        "delete": lambda: adapter.delete(ns, "k"),
        "copy": lambda: adapter.copy(ns, "k", ns, "k2"),
        "list": lambda: list(adapter.list_objects(ns)),
        "create_multipart_upload": lambda: adapter.create_multipart_upload(ns, "k"),
        "upload_part": lambda: adapter.upload_part(ns, "k", UPLOAD, 1, io.BytesIO(b"x")),
        "upload_part_copy": lambda: adapter.upload_part_copy(ns, "k", UPLOAD, 1, ns, "src", (0, 1)),
        "complete": lambda: adapter.complete_multipart_upload(ns, "k", UPLOAD, [PartInfo(1, "0" * 32)]),
        "abort": lambda: adapter.abort_multipart_upload(ns, "k", UPLOAD),
    }
    started = time.monotonic()
    for name, operation in operations.items():
        with pytest.raises(Unavailable) as caught:
            operation()
        message = str(caught.value)
        assert "\n" not in message and "gs://bucket/ns" in message, (name, message)
    assert time.monotonic() - started < 10


# --- presigned URLs ------------------------------------------------------------------


def signed(adapter: GCSAdapter, *args: Any, **kwargs: Any) -> PresignedURL:
    """A presigned URL the adapter must be able to make (its credentials hold a key)."""
    url = adapter.presign(*args, **kwargs)
    assert url is not None
    return url


def test_presigned_urls_are_v4_urls_signed_with_the_service_account_key(
    fake_gcs_server: str, gcs_adapter: GCSAdapter, gcs_bucket: str, service_account_json: str
) -> None:
    signer = GCSAdapter(gs_blockstore_config(fake_gcs_server, credentials_json=service_account_json))
    namespace = f"gs://{gcs_bucket}/ns"
    gcs_adapter.put(namespace, "data/a", io.BytesIO(b"hello presigned"))
    before = int(time.time())
    url = signed(signer, namespace, "data/a", "GET", 300, filename="a.txt")
    assert before + 300 <= url.expires <= before + 302
    parts = urlsplit(url.url)
    query = parse_qs(parts.query)
    assert url.url.startswith(f"{fake_gcs_server}/{gcs_bucket}/ns/data/a?")
    assert query["X-Goog-Algorithm"] == ["GOOG4-RSA-SHA256"]
    assert query["X-Goog-Expires"] == ["300"]
    assert query["X-Goog-Credential"][0].startswith("silt-test@silt-sa-project.iam.gserviceaccount.com/")
    assert len(query["X-Goog-Signature"][0]) == 512  # hex of a 2048-bit RSA signature
    assert 'filename="a.txt"' in query["response-content-disposition"][0]
    # fake-gcs-server does not check signatures, and serves path-style GETs only to requests
    # for its public host (storage.googleapis.com); a plain HTTP client reads the bytes.
    got = HTTP.request("GET", url.url, headers={"Host": "storage.googleapis.com"})
    assert got.status == 200 and got.data == b"hello presigned"

    put = signed(signer, namespace, "data/b", "PUT", 60)
    put_query = parse_qs(urlsplit(put.url).query)
    assert put.url.startswith(f"{fake_gcs_server}/{gcs_bucket}/ns/data/b?")
    assert put_query["X-Goog-Expires"] == ["60"] and put_query["X-Goog-SignedHeaders"] == ["host"]
    assert "response-content-disposition" not in put_query
    # (fake-gcs-server 1.x does not accept XML API PUTs, so the upload itself is not tried.)


def test_presigned_url_lifetimes_and_endpoints(service_account_json: str) -> None:
    config = gs_blockstore_config("http://127.0.0.1:9", credentials_json=service_account_json)
    adapter = GCSAdapter(config)
    week = 7 * 24 * 3600
    assert "X-Goog-Expires=604800" in signed(adapter, "gs://b/ns", "k", "GET", week).url
    for bad in (0, -1, week + 1):
        with pytest.raises(InvalidArgument):
            signed(adapter, "gs://b/ns", "k", "GET", bad)
    with pytest.raises(InvalidArgument):
        signed(adapter, "gs://b/ns", "../k", "GET", 60)
    public = GCSAdapter(config.model_copy(update={"pre_signed_endpoint": "https://store.example.com"}))
    assert signed(public, "gs://b/ns", "a b", "GET", 60).url.startswith("https://store.example.com/b/ns/a%20b?")
    google_default = GCSAdapter(GSBlockstoreConfig(credentials_json=SecretStr(service_account_json)))
    assert signed(google_default, "gs://b", "k", "PUT", 60).url.startswith("https://storage.googleapis.com/b/k?")


def test_credentials_without_a_key_leave_presigning_to_the_edge(gcs_adapter: GCSAdapter) -> None:
    assert gcs_adapter.presign("gs://b/ns", "k", "GET", 60) is None
    with pytest.raises(InvalidArgument):
        gcs_adapter.presign("gs://b/ns", "k", "GET", 0)


# --- create-only writes, uploads -----------------------------------------------------


def test_put_if_absent_creates_once(gcs_adapter: GCSAdapter, gcs_bucket: str) -> None:
    namespace = f"gs://{gcs_bucket}/ns"
    first = gcs_adapter.put_if_absent(namespace, "once", io.BytesIO(b"first"), 5)
    assert first.etag == md5_hex(b"first")
    with pytest.raises(AlreadyExists):
        gcs_adapter.put_if_absent(namespace, "once", io.BytesIO(b"second"))
    with gcs_adapter.get(namespace, "once") as reader:
        assert reader.read() == b"first"


def test_uploads_of_more_than_32_parts_compose_in_stages_and_leave_nothing_behind(
    gcs_adapter: GCSAdapter, gcs_bucket: str
) -> None:
    namespace = f"gs://{gcs_bucket}/ns"
    parts = [f"part {n:03d};".encode() * (n + 1) for n in range(70)]
    upload = gcs_adapter.create_multipart_upload(namespace, "staged")
    infos = [
        gcs_adapter.upload_part(namespace, "staged", upload, n, io.BytesIO(data))
        for n, data in enumerate(parts, start=1)
    ]
    result = gcs_adapter.complete_multipart_upload(namespace, "staged", upload, infos)
    assert result.etag == multipart_etag(parts)
    assert result.size == sum(map(len, parts))
    with gcs_adapter.get(namespace, "staged") as reader:
        assert reader.read() == b"".join(parts)
    # A copy keeps the ETag of a composed object, which GCS itself has no MD5 for.
    assert gcs_adapter.copy(namespace, "staged", namespace, "copied").etag == result.etag
    assert gcs_adapter.stat(namespace, "copied").etag == result.etag
    names = sorted(blob.name for blob in gcs_adapter.client.list_blobs(gcs_bucket))
    assert names == ["ns/copied", "ns/staged"]


def test_an_upload_belongs_to_its_key(gcs_adapter: GCSAdapter, gcs_bucket: str) -> None:
    namespace = f"gs://{gcs_bucket}/ns"
    upload = gcs_adapter.create_multipart_upload(namespace, "mine")
    with pytest.raises(NotFound):
        gcs_adapter.upload_part(namespace, "theirs", upload, 1, io.BytesIO(b"x"))
    with pytest.raises(NotFound):
        gcs_adapter.abort_multipart_upload(f"gs://{gcs_bucket}/other", "mine", upload)
    gcs_adapter.abort_multipart_upload(namespace, "mine", upload)
    assert list(gcs_adapter.client.list_blobs(gcs_bucket)) == []


def test_a_missing_bucket_is_not_found(gcs_adapter: GCSAdapter) -> None:
    with pytest.raises(NotFound):
        gcs_adapter.stat("gs://no-such-bucket-silt/ns", "k")
    gcs_adapter.delete("gs://no-such-bucket-silt/ns", "k")
