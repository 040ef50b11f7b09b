"""A repository's name reused (deleted, then created again with another storage namespace) while
an edge still remembers the old repository: no write is acknowledged that cannot be read, and
no upload opened in the old repository completes into the new one — through boto3 and the REST
API, against real auth and graveler processes.

The edge under test runs in this process (the real app, against the stack's auth and graveler)
with a cache lifetime of an hour, so that it certainly still remembers the deleted repository
when the test writes: the delete and the re-creation go straight to graveler, as another edge
replica would send them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import urllib3
import uvicorn
from botocore.exceptions import ClientError

from edge.app import serving_app
from silt import multipart_uploads as uploads
from silt.config import Config, load_config
from silt.errors import NotFound
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.kv.store import scan_prefix
from silt.launcher import free_port
from silt.rpc.errors import error_from_rpc
from tests.support.gateway_stack import GatewayStack
from tests.support.wait import wait_until

MIB = 1024 * 1024


@dataclasses.dataclass
class StaleEdge:
    """An edge that remembers repositories for an hour, and the stack it serves."""

    stack: GatewayStack
    config: Config

    def s3(self) -> Any:
        return self.stack.client()

    def api(self, method: str, path: str, **kwargs: Any) -> urllib3.BaseHTTPResponse:
        admin = self.stack.admin
        headers = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
        headers.update(kwargs.pop("headers", {}))
        return urllib3.request(
            method, self.stack.endpoint + "/api/v1" + path, headers=headers, retries=False, timeout=30, **kwargs
        )


@pytest.fixture(scope="module")
def stale(gw: GatewayStack) -> Iterator[StaleEdge]:
    env = {**gw.stack._services["gateway"].env, "SILT_AUTH_CACHE_TTL_SECONDS": "3600"}
    config = load_config(gw.stack.config_path, env=env)
    assert config.auth.cache_ttl_seconds == 3600 and config.api.enabled
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(serving_app(config), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 30, "the in-process edge to start")
        yield StaleEdge(dataclasses.replace(gw, endpoint=f"http://127.0.0.1:{port}"), config)
    finally:
        server.should_exit = True
        thread.join(30)


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def recreate(gw: GatewayStack, name: str) -> str:
    """Delete the repository and create it again under its name with another namespace, by
    graveler calls (as another edge would): the namespace of the new one."""
    gw.graveler.DeleteRepository(api.DeleteRepositoryRequest(name=name))
    namespace = f"local://{name}-again"
    gw.graveler.CreateRepository(api.CreateRepositoryRequest(name=name, storage_namespace=namespace))
    return namespace


def stored_entry(gw: GatewayStack, name: str, key: str) -> pb.Entry:
    return gw.graveler.StatEntry(api.StatEntryRequest(repository=name, ref="main", key=key)).entry


def object_file(gw: GatewayStack, namespace: str, address: str) -> Path:
    """Where the local blockstore keeps an object of `local://<directory>` at a relative address."""
    return gw.stack.data_dir / "data" / namespace.removeprefix("local://") / address


def upload_records(gw: GatewayStack) -> dict[bytes, bytes]:
    store = open_store(load_config(gw.stack.config_path).database)
    try:
        return {entry.key: entry.value for entry in scan_prefix(store, uploads.PARTITION, b"")}
    finally:
        store.close()


def block_upload(gw: GatewayStack, block_id: str) -> Path:
    return gw.stack.data_dir / "data" / ".silt-uploads" / block_id


# --- graveler ----------------------------------------------------------------------------------


def test_graveler_refuses_a_write_for_another_incarnation_of_the_name(gw: GatewayStack, bucket: str) -> None:
    info = gw.graveler.GetRepository(api.GetRepositoryRequest(name=bucket))
    assert len(info.unique_id) == 32
    entry = pb.Entry(physical_address="data/identity-check", size=1, etag="e")
    stale_id = "0" * 32

    with pytest.raises(grpc.RpcError) as one:
        gw.graveler.StageEntry(
            api.StageEntryRequest(repository=bucket, branch="main", key="a", entry=entry, repository_id=stale_id)
        )
    assert one.value.code() == grpc.StatusCode.NOT_FOUND
    refusal = error_from_rpc(one.value)
    assert isinstance(refusal, NotFound) and refusal.what == "repository"
    with pytest.raises(grpc.RpcError) as many:
        gw.graveler.StageEntries(
            api.StageEntriesRequest(
                repository=bucket,
                branch="main",
                entries=[api.StagedEntry(key="b", entry=entry)],
                repository_id=stale_id,
            )
        )
    assert many.value.code() == grpc.StatusCode.NOT_FOUND
    for key in ("a", "b"):
        with pytest.raises(grpc.RpcError) as missing:
            stored_entry(gw, bucket, key)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    # The repository's own identity, and none at all (a client older than identities), are taken.
    gw.graveler.StageEntry(
        api.StageEntryRequest(repository=bucket, branch="main", key="a", entry=entry, repository_id=info.unique_id)
    )
    gw.graveler.StageEntry(api.StageEntryRequest(repository=bucket, branch="main", key="c", entry=entry))
    assert stored_entry(gw, bucket, "a").physical_address == "data/identity-check"
    assert stored_entry(gw, bucket, "c").physical_address == "data/identity-check"


# --- writes through an edge that remembers the deleted repository -----------------------------


def test_a_put_after_the_name_is_reused_lands_in_the_new_repository(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = stale.s3()
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"remembered")  # the edge now knows the namespace
    namespace = recreate(gw, bucket)

    s3.put_object(Bucket=bucket, Key="main/k", Body=b"written after the re-creation")
    # Readable through an edge that never knew the old repository, and through this one.
    assert gw.client().get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"written after the re-creation"
    assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"written after the re-creation"
    entry = stored_entry(gw, bucket, "k")
    assert object_file(gw, namespace, entry.physical_address).read_bytes() == b"written after the re-creation"


def test_a_copy_from_another_bucket_after_the_name_is_reused_lands_in_the_new_repository(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = stale.s3()
    source = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=source)
    s3.put_object(Bucket=source, Key="main/src", Body=b"copied bytes")
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"remembered")
    namespace = recreate(gw, bucket)

    s3.copy_object(Bucket=bucket, Key="main/copy", CopySource=f"{source}/main/src")
    assert gw.client().get_object(Bucket=bucket, Key="main/copy")["Body"].read() == b"copied bytes"
    assert s3.get_object(Bucket=bucket, Key="main/copy")["Body"].read() == b"copied bytes"
    assert object_file(gw, namespace, stored_entry(gw, bucket, "copy").physical_address).read_bytes() == b"copied bytes"


def test_an_api_upload_after_the_name_is_reused_lands_in_the_new_repository(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    warm = stale.api("POST", f"/repositories/{bucket}/branches/main/objects?path=warm", body=b"remembered")
    assert warm.status == 201, warm.data
    namespace = recreate(gw, bucket)

    put = stale.api("POST", f"/repositories/{bucket}/branches/main/objects?path=k", body=b"api bytes")
    assert put.status == 201, put.data
    # Readable through an edge that never knew the old repository, and through this one.
    for edge in (StaleEdge(gw, stale.config), stale):
        got = edge.api("GET", f"/repositories/{bucket}/refs/main/objects?path=k")
        assert (got.status, got.data) == (200, b"api bytes")
    assert object_file(gw, namespace, stored_entry(gw, bucket, "k").physical_address).read_bytes() == b"api bytes"


def test_an_upload_opened_in_the_deleted_repository_does_not_complete_into_the_new_one(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = stale.s3()
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"remembered")
    recreate(gw, bucket)
    # Opened after the re-creation, by an edge that still remembers the deleted repository: the
    # upload is the deleted repository's (its record and bytes name it), which its deletion
    # could not abort since it did not exist yet.
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/big")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="main/big", UploadId=upload, PartNumber=1, Body=b"p" * 1024)["ETag"]

    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="main/big", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
        )
    assert code(exc) == "NoSuchUpload"
    with pytest.raises(grpc.RpcError) as missing:
        stored_entry(gw, bucket, "big")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert not any(key.startswith(f"u/{bucket}/".encode()) for key in upload_records(gw))


def test_an_upload_opened_in_the_deleted_repository_is_not_listed_in_the_new_one(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = stale.s3()
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"remembered")
    recreate(gw, bucket)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/big")["UploadId"]
    assert uploads.upload_key(bucket, upload) in upload_records(gw)

    assert gw.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    with pytest.raises(ClientError) as exc:
        gw.client().upload_part(Bucket=bucket, Key="main/big", UploadId=upload, PartNumber=1, Body=b"p")
    assert code(exc) == "NoSuchUpload"


def test_an_upload_open_when_the_bucket_is_deleted_is_aborted(gw: GatewayStack, stale: StaleEdge) -> None:
    s3 = gw.client()
    name = f"t-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=name)
    upload = s3.create_multipart_upload(Bucket=name, Key="main/open")["UploadId"]
    etag = s3.upload_part(Bucket=name, Key="main/open", UploadId=upload, PartNumber=1, Body=b"q" * MIB)["ETag"]
    record = upload_records(gw)[uploads.upload_key(name, upload)]
    block_id = json.loads(record)["block_id"]
    assert block_upload(gw, block_id).is_dir()

    s3.delete_bucket(Bucket=name)
    # Gone with the bucket: its records and its parts' bytes.
    assert not any(f"/{upload}".encode() in key or f"p/{upload}/".encode() in key for key in upload_records(gw))
    assert not block_upload(gw, block_id).exists()
    s3.create_bucket(Bucket=name)
    assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=name, Key="main/open", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
        )
    assert code(exc) == "NoSuchUpload"
    with pytest.raises(grpc.RpcError) as missing:
        stored_entry(gw, name, "open")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_an_upload_open_when_the_repository_is_deleted_through_the_api_is_aborted(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = gw.client()
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/open")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="main/open", UploadId=upload, PartNumber=1, Body=b"r" * 1024)
    block_id = json.loads(upload_records(gw)[uploads.upload_key(bucket, upload)])["block_id"]

    deleted = stale.api("DELETE", f"/repositories/{bucket}")
    assert deleted.status == 204, deleted.data
    assert not any(f"/{upload}".encode() in key or f"p/{upload}/".encode() in key for key in upload_records(gw))
    assert not block_upload(gw, block_id).exists()


def test_a_link_of_bytes_uploaded_in_the_deleted_repository_is_refused(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    asked = stale.api("GET", f"/repositories/{bucket}/branches/main/staging/backing?path=linked")
    assert asked.status == 200, asked.data
    address = json.loads(asked.data)["physical_address"]
    old_namespace = f"local://{bucket}"
    assert address.startswith(old_namespace + "/")
    data = b"uploaded by the client itself"
    written = object_file(gw, old_namespace, address.removeprefix(old_namespace + "/"))
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_bytes(data)
    recreate(gw, bucket)

    body = {
        "staging": {"physical_address": address},
        "checksum": hashlib.md5(data).hexdigest(),
        "size_bytes": len(data),
    }
    linked = stale.api(
        "PUT",
        f"/repositories/{bucket}/branches/main/staging/backing?path=linked",
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    # The bytes lie in the deleted repository's namespace: not the new repository's object.
    assert linked.status == 404, linked.data
    with pytest.raises(grpc.RpcError) as missing:
        stored_entry(gw, bucket, "linked")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_an_edge_that_remembers_the_deleted_repository_reads_the_new_one(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = stale.s3()
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"remembered")
    assert stale.api("GET", f"/repositories/{bucket}/refs/main/objects?path=warm").data == b"remembered"
    recreate(gw, bucket)
    # Written through an edge that knows only the new repository: acknowledged, in its namespace.
    small, large = b"small object", os.urandom(300 * 1024)  # read whole, and streamed
    writer = gw.client()
    writer.put_object(Bucket=bucket, Key="main/small", Body=small)
    writer.put_object(Bucket=bucket, Key="main/large", Body=large)

    assert s3.get_object(Bucket=bucket, Key="main/small")["Body"].read() == small
    assert s3.get_object(Bucket=bucket, Key="main/large", Range="bytes=10-19")["Body"].read() == large[10:20]
    assert s3.get_object(Bucket=bucket, Key="main/large")["Body"].read() == large


def test_the_api_of_an_edge_that_remembers_the_deleted_repository_reads_the_new_one(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    assert stale.api("POST", f"/repositories/{bucket}/branches/main/objects?path=warm", body=b"x").status == 201
    recreate(gw, bucket)
    large = os.urandom(300 * 1024)
    gw.client().put_object(Bucket=bucket, Key="main/large", Body=large)

    got = stale.api("GET", f"/repositories/{bucket}/refs/main/objects?path=large")
    assert (got.status, got.data) == (200, large)
