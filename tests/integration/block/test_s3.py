"""The S3 adapter only: outages, error mapping, the put strategy, client configuration."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.stub import Stubber
from pydantic import SecretStr

from silt.block import PartInfo, open_adapter
from silt.block.s3 import PART_SIZE, S3Adapter
from silt.config import BlockstoreConfig, S3BlockstoreConfig, S3CredentialsConfig
from silt.errors import ConfigError, InvalidArgument, NotFound, Unavailable
from silt.free_ports import free_port
from tests.integration.block.streams import GeneratorStream, MiB, md5_hex, multipart_etag, pattern_chunks
from tests.support.moto import s3_blockstore_config
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.s3


def all_operations(adapter: S3Adapter, namespace: str) -> dict[str, Any]:
    upload = "some-upload-id"
    return {
        "put": lambda: adapter.put(namespace, "k", io.BytesIO(b"x")),
        "get": lambda: adapter.get(namespace, "k"),
        "get_range": lambda: adapter.get_range(namespace, "k", 0, 1),
        "stat": lambda: adapter.stat(namespace, "k"),
        "delete": lambda: adapter.delete(namespace, "k"),
        "copy": lambda: adapter.copy(namespace, "k", namespace, "k2"),
        "create_multipart_upload": lambda: adapter.create_multipart_upload(namespace, "k"),
        "upload_part": lambda: adapter.upload_part(namespace, "k", upload, 1, io.BytesIO(b"x")),
        "upload_part_copy": lambda: adapter.upload_part_copy(namespace, "k", upload, 1, namespace, "src", (0, 1)),
        "complete": lambda: adapter.complete_multipart_upload(namespace, "k", upload, [PartInfo(1, "0" * 32)]),
        "abort": lambda: adapter.abort_multipart_upload(namespace, "k", upload),
    }


# --- outages -------------------------------------------------------------------------


def test_every_operation_is_unavailable_when_the_endpoint_is_down() -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    adapter = S3Adapter(s3_blockstore_config(closed, max_retries=0), connect_timeout=1, read_timeout=1)
    started = time.monotonic()
    for name, operation in all_operations(adapter, "s3://bucket").items():
        with pytest.raises(Unavailable) as caught:
            operation()
        message = str(caught.value)
        assert "\n" not in message and closed in message, (name, message)
    assert time.monotonic() - started < 10


@pytest.fixture
def proxied(moto_server: str, s3_bucket: str) -> Iterator[tuple[S3Adapter, TcpProxy]]:
    endpoint = urlsplit(moto_server)
    with TcpProxy(endpoint.hostname or "127.0.0.1", endpoint.port or 80) as proxy:
        # One retry and 2 s timeouts: a busy 2-core CI box must not fail the setup calls.
        config = s3_blockstore_config(f"http://127.0.0.1:{proxy.port}", max_retries=1)
        yield S3Adapter(config, connect_timeout=2, read_timeout=2), proxy


def test_a_connection_dropped_midway_through_a_get_is_unavailable(
    proxied: tuple[S3Adapter, TcpProxy], s3_bucket: str
) -> None:
    adapter, proxy = proxied
    namespace = f"s3://{s3_bucket}"
    adapter.put(namespace, "big", GeneratorStream(pattern_chunks(24 * MiB)).binary())
    with adapter.get(namespace, "big") as stream:
        assert len(stream.read(64 * 1024)) == 64 * 1024
        proxy.stop()
        with pytest.raises(Unavailable):
            while stream.read(MiB):
                pass


@pytest.mark.slow  # waits out timeouts
def test_a_hung_store_is_unavailable_after_the_read_timeout(
    proxied: tuple[S3Adapter, TcpProxy], s3_bucket: str
) -> None:
    adapter, proxy = proxied
    adapter.put(f"s3://{s3_bucket}", "k", io.BytesIO(b"x"))
    proxy.freeze()
    started = time.monotonic()
    with pytest.raises(Unavailable):
        adapter.stat(f"s3://{s3_bucket}", "k")
    assert time.monotonic() - started < 15  # two attempts of 2 s each, plus slack; never a hang
    proxy.thaw()


# --- error mapping -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("NoSuchUpload", 404, NotFound),
        ("NoSuchKey", 404, NotFound),
        ("NoSuchBucket", 404, NotFound),
        ("InvalidPart", 400, InvalidArgument),
        ("InvalidPartOrder", 400, InvalidArgument),
        ("EntityTooSmall", 400, InvalidArgument),
        ("InvalidRange", 416, InvalidArgument),
        ("SlowDown", 503, Unavailable),
        ("InternalError", 500, Unavailable),
        ("AccessDenied", 403, Unavailable),
    ],
)
def test_service_errors_map_to_silt_errors(s3_adapter: S3Adapter, code: str, status: int, expected: type) -> None:
    # What moto cannot produce (it answers 500 for an unknown upload id) is checked here
    # against AWS's documented error codes.
    with Stubber(s3_adapter.client) as stubber:
        stubber.add_client_error(
            "complete_multipart_upload",
            service_error_code=code,
            service_message=f"{code}\nhappened",
            http_status_code=status,
        )
        with pytest.raises(expected) as caught:
            s3_adapter.complete_multipart_upload("s3://bucket", "k", "upload", [PartInfo(1, "0" * 32)])
    assert code in str(caught.value) and "\n" not in str(caught.value)


# --- the put strategy ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "sized", "parts"),
    [
        (PART_SIZE, False, 1),  # exactly one part of unknown size: one PutObject
        (PART_SIZE + 1, False, 2),  # one byte more: multipart
        (2 * PART_SIZE + 5, True, 3),
        (PART_SIZE, True, 1),
    ],
    ids=["one-part-unsized", "just-over-unsized", "three-parts-sized", "one-part-sized"],
)
def test_put_switches_to_multipart_above_one_part(
    s3_adapter: S3Adapter, s3_bucket: str, size: int, sized: bool, parts: int
) -> None:
    data = b"".join(pattern_chunks(size, seed=size))
    stream = GeneratorStream(pattern_chunks(size, seed=size))
    result = s3_adapter.put(f"s3://{s3_bucket}", "k", stream.binary(), size if sized else None)
    chunks = [data[i : i + PART_SIZE] for i in range(0, size, PART_SIZE)]
    assert result.etag == (md5_hex(data) if parts == 1 else multipart_etag(chunks))
    assert result.size == size
    assert s3_adapter.stat(f"s3://{s3_bucket}", "k").etag == result.etag
    with s3_adapter.get(f"s3://{s3_bucket}", "k") as body:
        assert body.read() == data


def _failing_chunks(good_bytes: int) -> Iterator[bytes]:
    yield from pattern_chunks(good_bytes)
    raise ConnectionResetError("client went away")


def test_a_failed_multipart_put_aborts_its_upload(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    with pytest.raises(ConnectionResetError):
        s3_adapter.put(f"s3://{s3_bucket}", "broken", GeneratorStream(_failing_chunks(PART_SIZE + MiB)).binary())
    with pytest.raises(NotFound):
        s3_adapter.stat(f"s3://{s3_bucket}", "broken")
    assert s3_adapter.client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []


def test_keys_live_under_the_namespace_prefix(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    s3_adapter.put(f"s3://{s3_bucket}/repo/prefix/", "dir/key", io.BytesIO(b"x"))
    listed = s3_adapter.client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert [o["Key"] for o in listed] == ["repo/prefix/dir/key"]


def test_a_missing_bucket_is_not_found(s3_adapter: S3Adapter) -> None:
    with pytest.raises(NotFound):
        s3_adapter.get("s3://no-such-bucket-for-silt", "k")
    s3_adapter.delete("s3://no-such-bucket-for-silt", "k")  # nothing to delete is fine
    s3_adapter.delete_many("s3://no-such-bucket-for-silt", ["k", "j"])


def test_delete_many_sends_one_request_with_content_md5_and_deletes_keys_xml_cannot_carry(
    s3_adapter: S3Adapter, s3_bucket: str
) -> None:
    """DeleteObjects carries Content-MD5, not botocore's CRC32, which older S3-compatible stores
    refuse; a key with a control character XML 1.0 cannot carry is deleted by a call of its own
    instead of making the whole batch's XML malformed."""
    namespace = f"s3://{s3_bucket}/sweep"
    keys = ["data/a", "data/b", "data/ctl\x01char"]
    for key in keys:
        s3_adapter.put(namespace, key, io.BytesIO(b"x"))
    sent: list[dict[str, str]] = []

    def capture(request: Any, **_: Any) -> None:
        sent.append(dict(request.headers))

    s3_adapter.client.meta.events.register("before-send.s3.DeleteObjects", capture)
    try:
        s3_adapter.delete_many(namespace, [*keys, "data/never-existed"])
    finally:
        s3_adapter.client.meta.events.unregister("before-send.s3.DeleteObjects", capture)
    assert s3_adapter.client.list_objects_v2(Bucket=s3_bucket, Prefix="sweep/").get("Contents", []) == []
    assert len(sent) == 1
    headers = {name.lower(): value for name, value in sent[0].items()}
    assert "content-md5" in headers
    assert not [name for name in headers if name.startswith("x-amz-checksum-")]


# --- client configuration ------------------------------------------------------------


@pytest.fixture
def no_aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the developer's ~/.aws and AWS_* variables out of these tests."""
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return tmp_path


def _access_key(adapter: S3Adapter) -> str:
    # boto3 has no public accessor for a client's credentials.
    return str(adapter.client._request_signer._credentials.get_frozen_credentials().access_key)


def test_a_profile_from_a_credentials_file(no_aws_files: Path, moto_server: str, s3_bucket: str) -> None:
    credentials = no_aws_files / "credentials"
    credentials.write_text("[silt]\naws_access_key_id = from-file\naws_secret_access_key = secret\n")
    config = S3BlockstoreConfig(
        endpoint_url=moto_server, profile="silt", credentials_file=str(credentials), force_path_style=True
    )
    adapter = S3Adapter(config)
    assert _access_key(adapter) == "from-file"
    adapter.put(f"s3://{s3_bucket}", "k", io.BytesIO(b"signed with the profile"))


def test_static_credentials_win(no_aws_files: Path) -> None:
    config = S3BlockstoreConfig(
        credentials=S3CredentialsConfig(access_key_id="static", secret_access_key=SecretStr("s")),
    )
    assert _access_key(S3Adapter(config)) == "static"


def test_an_unknown_profile_is_a_config_error(no_aws_files: Path) -> None:
    with pytest.raises(ConfigError):
        S3Adapter(S3BlockstoreConfig(profile="nobody"))


def test_a_key_id_without_a_secret_is_a_config_error(no_aws_files: Path) -> None:
    with pytest.raises(ConfigError):
        S3Adapter(S3BlockstoreConfig(credentials=S3CredentialsConfig(access_key_id="only-the-id")))


def test_open_adapter_builds_an_s3_adapter(moto_server: str, s3_bucket: str) -> None:
    adapter = open_adapter(BlockstoreConfig(type="s3", s3=s3_blockstore_config(moto_server)))
    assert isinstance(adapter, S3Adapter)
    adapter.put(f"s3://{s3_bucket}", "k", io.BytesIO(b"x"))


def test_stat_names_the_storage_class_s3_reports(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    """getUnderlyingProperties' storage class: S3's HEAD names every class but STANDARD, which
    it leaves out (and lakeFS reports as null)."""
    adapter = s3_adapter
    namespace = f"s3://{s3_bucket}"
    adapter.put(namespace, "standard", io.BytesIO(b"s"))
    assert adapter.stat(namespace, "standard").storage_class is None
    adapter.client.put_object(Bucket=s3_bucket, Key="cold", Body=b"c", StorageClass="STANDARD_IA")
    assert adapter.stat(namespace, "cold").storage_class == "STANDARD_IA"
