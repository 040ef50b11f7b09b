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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import urllib3
from botocore.exceptions import ClientError

from edge.api.routes import objects as api_objects
from edge.app import serving_app
from edge.gateway.operations import objects as gateway_objects
from silt import multipart_uploads as uploads
from silt.config import Config, load_config
from silt.errors import NotFound
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.kv.store import scan_prefix
from silt.rpc.errors import error_from_rpc
from tests.support.gateway_stack import GatewayStack
from tests.support.in_process import served_in_process

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

    def api_json(self, method: str, path: str, document: Any) -> urllib3.BaseHTTPResponse:
        return self.api(method, path, body=json.dumps(document).encode(), headers={"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def stale(gw: GatewayStack) -> Iterator[StaleEdge]:
    env = {**gw.stack._services["gateway"].env, "SILT_AUTH_CACHE_TTL_SECONDS": "3600"}
    config = load_config(gw.stack.config_path, env=env)
    assert config.auth.cache_ttl_seconds == 3600 and config.api.enabled
    with served_in_process(serving_app(config), "the in-process edge to start") as endpoint:
        yield StaleEdge(dataclasses.replace(gw, endpoint=endpoint), config)


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


def assert_not_stored(gw: GatewayStack, name: str, key: str) -> None:
    with pytest.raises(grpc.RpcError) as missing:
        stored_entry(gw, name, key)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def remembering(stale: StaleEdge, bucket: str) -> Any:
    """The stale edge's S3 client, once a write through it made the edge remember the bucket's
    repository."""
    s3 = stale.s3()
    s3.put_object(Bucket=bucket, Key="main/warm", Body=b"remembered")
    return s3


def remembered_then_recreated(gw: GatewayStack, stale: StaleEdge, bucket: str) -> tuple[Any, str]:
    """The stale edge's S3 client once it remembers the bucket's repository, and the namespace
    of the repository created under the name after that one was deleted."""
    s3 = remembering(stale, bucket)
    return s3, recreate(gw, bucket)


def open_one_part(s3: Any, bucket: str, key: str, data: bytes) -> tuple[str, str]:
    """An upload opened with one part uploaded: its id and the part's ETag."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=data)["ETag"]
    return upload, etag


def complete_one_part(s3: Any, bucket: str, key: str, upload: str, etag: str) -> Any:
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload=parts)


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
        assert_not_stored(gw, bucket, key)

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
    s3, namespace = remembered_then_recreated(gw, stale, bucket)

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
    s3, _ = remembered_then_recreated(gw, stale, bucket)
    # Opened after the re-creation, by an edge that still remembers the deleted repository: the
    # upload is the deleted repository's (its record and bytes name it), which its deletion
    # could not abort since it did not exist yet.
    upload, etag = open_one_part(s3, bucket, "main/big", b"p" * 1024)

    with pytest.raises(ClientError) as exc:
        complete_one_part(s3, bucket, "main/big", upload, etag)
    assert code(exc) == "NoSuchUpload"
    assert_not_stored(gw, bucket, "big")
    assert not any(key.startswith(f"u/{bucket}/".encode()) for key in upload_records(gw))


def test_an_upload_opened_in_the_deleted_repository_is_not_listed_in_the_new_one(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3, _ = remembered_then_recreated(gw, stale, bucket)
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
    upload, etag = open_one_part(s3, name, "main/open", b"q" * MIB)
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
        complete_one_part(s3, name, "main/open", upload, etag)
    assert code(exc) == "NoSuchUpload"
    assert_not_stored(gw, name, "open")


def test_an_upload_open_when_the_repository_is_deleted_through_the_api_is_aborted(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = gw.client()
    upload, _ = open_one_part(s3, bucket, "main/open", b"r" * 1024)
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
    assert_not_stored(gw, bucket, "linked")


def test_an_edge_that_remembers_the_deleted_repository_reads_the_new_one(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = remembering(stale, bucket)
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


# --- a copy or an update within the repository, raced by its deletion and re-creation ---------


def recreate_after_first(module: Any, name: str, monkeypatch: pytest.MonkeyPatch, then: Any) -> None:
    """Make module.<name> (an async read of the entry a copy or an update starts from) delete
    the repository and create it again (then run `then`) right after its first read returns:
    between the read and the write that stages what was read, deterministically."""
    real = getattr(module, name)
    raced: list[bool] = []

    async def read_then_recreate(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        if not raced:
            raced.append(True)
            then()
        return result

    monkeypatch.setattr(module, name, read_then_recreate)


def rewritten_after_recreating(gw: GatewayStack, bucket: str, key: str, data: bytes) -> Callable[[], None]:
    """What replaces the repository under a raced copy or update: it is created again, and main/<key>
    written in the new one (through an edge that knows only the new one)."""

    def replace_repository() -> None:
        recreate(gw, bucket)
        gw.client().put_object(Bucket=bucket, Key=f"main/{key}", Body=data)

    return replace_repository


def test_a_copy_within_the_bucket_is_not_staged_from_a_deleted_repository_s_entry(
    gw: GatewayStack, stale: StaleEdge, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = stale.s3()
    s3.put_object(Bucket=bucket, Key="main/src", Body=b"old source")  # the edge now knows the namespace

    recreate_after_first(
        gateway_objects, "source_entry", monkeypatch, rewritten_after_recreating(gw, bucket, "src", b"new source")
    )
    s3.copy_object(Bucket=bucket, Key="main/copy", CopySource=f"{bucket}/main/src")

    # The copy is the new repository's source, not an address of the deleted one's namespace.
    assert stored_entry(gw, bucket, "copy").physical_address == stored_entry(gw, bucket, "src").physical_address
    assert gw.client().get_object(Bucket=bucket, Key="main/copy")["Body"].read() == b"new source"


def test_an_api_copy_is_not_staged_from_a_deleted_repository_s_entry(
    gw: GatewayStack, stale: StaleEdge, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = stale.api("POST", f"/repositories/{bucket}/branches/main/objects?path=src", body=b"old source")
    assert warm.status == 201, warm.data

    recreate_after_first(
        api_objects, "_entry", monkeypatch, rewritten_after_recreating(gw, bucket, "src", b"new source")
    )
    copied = stale.api_json(
        "POST", f"/repositories/{bucket}/branches/main/objects/copy?dest_path=copy", {"src_path": "src"}
    )
    assert copied.status == 201, copied.data
    assert stored_entry(gw, bucket, "copy").physical_address == stored_entry(gw, bucket, "src").physical_address
    assert gw.client().get_object(Bucket=bucket, Key="main/copy")["Body"].read() == b"new source"


def test_an_api_metadata_update_is_not_staged_from_a_deleted_repository_s_entry(
    gw: GatewayStack, stale: StaleEdge, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"the same bytes in both repositories: the same ETag"
    warm = stale.api("POST", f"/repositories/{bucket}/branches/main/objects?path=k", body=data)
    assert warm.status == 201, warm.data

    recreate_after_first(api_objects, "_entry", monkeypatch, rewritten_after_recreating(gw, bucket, "k", data))
    updated = stale.api_json(
        "PUT", f"/repositories/{bucket}/branches/main/objects/stat/user_metadata?path=k", {"set": {"color": "blue"}}
    )
    assert updated.status == 204, updated.data
    # The new repository's object, updated: its bytes, in its namespace, with the metadata.
    entry = stored_entry(gw, bucket, "k")
    assert "blue" in entry.metadata.values()
    assert object_file(gw, f"local://{bucket}-again", entry.physical_address).read_bytes() == data
    assert gw.client().get_object(Bucket=bucket, Key="main/k")["Body"].read() == data


# --- uploads of the new repository through an edge that remembers the deleted one --------------


def test_an_edge_that_remembers_the_deleted_repository_continues_the_new_one_s_uploads(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3, _ = remembered_then_recreated(gw, stale, bucket)
    # Opened by an edge that knows only the new repository: the new repository's upload.
    upload = gw.client().create_multipart_upload(Bucket=bucket, Key="main/big")["UploadId"]

    etag = s3.upload_part(Bucket=bucket, Key="main/big", UploadId=upload, PartNumber=1, Body=b"n" * 1024)["ETag"]
    complete_one_part(s3, bucket, "main/big", upload, etag)
    assert gw.client().get_object(Bucket=bucket, Key="main/big")["Body"].read() == b"n" * 1024


def test_a_listing_through_an_edge_that_remembers_the_deleted_repository_shows_the_new_one_s_uploads(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3, _ = remembered_then_recreated(gw, stale, bucket)
    upload = gw.client().create_multipart_upload(Bucket=bucket, Key="main/big")["UploadId"]

    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == [upload]


# --- uploads recorded before repositories had identities ----------------------------------------


def strip_identity(gw: GatewayStack, name: str, upload: str) -> None:
    """Make an upload's records look written by a gateway older than identities."""
    store = open_store(load_config(gw.stack.config_path).database)
    try:
        for entry in list(scan_prefix(store, uploads.PARTITION, b"")):
            if not entry.key.endswith(upload.encode()) or f"/{name}/".encode() not in entry.key:
                continue
            value = json.loads(entry.value)
            value.pop("repository_id", None)
            store.set(uploads.PARTITION, entry.key, json.dumps(value).encode())
    finally:
        store.close()
    record = json.loads(upload_records(gw)[uploads.upload_key(name, upload)])
    assert "repository_id" not in record and record["namespace"] == f"local://{name}"


def test_an_upload_older_than_identities_is_aborted_with_the_repository_of_its_namespace(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = gw.client()
    upload, etag = open_one_part(s3, bucket, "main/open", b"o" * 1024)
    strip_identity(gw, bucket, upload)

    recreate(gw, bucket)
    assert not any(f"/{upload}".encode() in key for key in upload_records(gw))
    with pytest.raises(ClientError) as exc:
        complete_one_part(stale.s3(), bucket, "main/open", upload, etag)
    assert code(exc) == "NoSuchUpload"
    assert_not_stored(gw, bucket, "open")


def test_an_upload_older_than_identities_in_another_namespace_does_not_complete(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3, _ = remembered_then_recreated(gw, stale, bucket)
    # Opened in the deleted repository's namespace after its deletion (by the edge that
    # remembers it), recorded without an identity as an older gateway would: the deletion
    # could not abort it, and its bytes are not the new repository's.
    upload, etag = open_one_part(s3, bucket, "main/big", b"p" * 1024)
    strip_identity(gw, bucket, upload)

    for edge in (gw.client(), s3):  # one that knows the new repository, one that remembers the old
        with pytest.raises(ClientError) as exc:
            complete_one_part(edge, bucket, "main/big", upload, etag)
        assert code(exc) == "NoSuchUpload"
    assert_not_stored(gw, bucket, "big")
    assert gw.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


# --- what was missing: the repository, or a branch ------------------------------------------------


def test_completing_an_upload_to_a_deleted_branch_says_the_branch_is_missing(gw: GatewayStack, bucket: str) -> None:
    s3 = gw.client()
    gw.graveler.CreateBranch(api.CreateBranchRequest(repository=bucket, name="side", source_ref="main"))
    upload, etag = open_one_part(s3, bucket, "side/big", b"s" * 1024)
    gw.graveler.DeleteBranch(api.DeleteBranchRequest(repository=bucket, name="side"))

    with pytest.raises(ClientError) as exc:
        complete_one_part(s3, bucket, "side/big", upload, etag)
    # The branch is gone, the repository is not: not "the upload's repository was deleted".
    assert code(exc) == "NoSuchBucket"
    assert "repository was deleted" not in exc.value.response["Error"]["Message"]


# --- bytes of a write moved into the new repository ---------------------------------------------


def namespace_files(gw: GatewayStack, namespace: str) -> dict[Path, bytes]:
    root = object_file(gw, namespace, "")
    return {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}


def test_the_bytes_of_a_write_moved_into_the_new_repository_stay_where_they_were_written(
    gw: GatewayStack, stale: StaleEdge, bucket: str
) -> None:
    s3 = remembering(stale, bucket)
    assert stale.api("GET", f"/repositories/{bucket}/refs/main/objects?path=warm").data == b"remembered"
    old_namespace = f"local://{bucket}"
    recreate(gw, bucket)
    before = namespace_files(gw, old_namespace)

    s3.put_object(Bucket=bucket, Key="main/k", Body=b"s3 bytes")
    put = stale.api("POST", f"/repositories/{bucket}/branches/main/objects?path=a", body=b"api bytes")
    assert put.status == 201, put.data

    # Written first in the namespace the edge remembered, then copied into the new one: the
    # first copies are kept (only a write graveler certainly did not apply loses its bytes).
    written = [data for path, data in namespace_files(gw, old_namespace).items() if path not in before]
    assert b"s3 bytes" in written and b"api bytes" in written
    assert gw.client().get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"s3 bytes"
    assert gw.client().get_object(Bucket=bucket, Key="main/a")["Body"].read() == b"api bytes"
