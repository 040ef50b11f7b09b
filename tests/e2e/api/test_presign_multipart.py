"""lakeFS's presigned multipart uploads, as lakectl drives them (pkg/api/helpers/upload.go): the
generated lakeFS client (lakefs-sdk's ExperimentalApi) creates an upload with a presigned URL per
part, the parts are PUT to those URLs with no credentials (plain urllib3, several at once), their
ETags listed in the completion, which stages the object; lakeFS's high-level client (`lakefs`)
reads it back with presigned URLs. On the local blockstore (URLs the edge signs and serves) and on
S3 (moto_server's own presigned UploadPart URLs)."""

from __future__ import annotations

import hashlib
import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import lakefs
import lakefs_sdk
import pytest
import urllib3
from lakefs.client import Client
from lakefs_sdk.exceptions import ApiException

from tests.e2e.api.conftest import Api, error_message
from tests.e2e.conftest import S3_DATA
from tests.support.moto import moto_client

HTTP = urllib3.PoolManager(retries=False, timeout=60, maxsize=8)
MIB = 1024 * 1024
PART_SIZE = 5 * MIB  # lakectl's part size (S3's least but for the last part)


@dataclass
class Store:
    kind: str
    api: Api
    repo: str
    moto: str = ""

    @property
    def namespace(self) -> str:
        return f"local://{self.repo}" if self.kind == "local" else f"s3://{S3_DATA}/{self.repo}"

    def experimental(self, credentials: Any = None) -> lakefs_sdk.ExperimentalApi:
        return lakefs_sdk.ExperimentalApi(self.api.sdk(credentials))

    def pmpu(self, suffix: str = "") -> str:
        return f"/repositories/{self.repo}/branches/main/staging/pmpu{suffix}"


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest) -> Store:
    kind = request.param
    api: Api = request.getfixturevalue("api" if kind == "local" else "s3_api")
    made = Store(kind, api, f"pm-{secrets.token_hex(5)}")
    if kind == "s3":
        made.moto = request.getfixturevalue("moto_server")
    creation = lakefs_sdk.RepositoryCreation(name=made.repo, storage_namespace=made.namespace)
    lakefs_sdk.RepositoriesApi(made.api.sdk()).create_repository(creation)
    return made


def _put_part(url: str, data: bytes) -> str:
    """PUT one part to its presigned URL, as lakectl does: the answer's ETag, unquoted."""
    answer = HTTP.request("PUT", url, body=data, headers={"Content-Length": str(len(data))})
    assert answer.status == 200, (answer.status, answer.data[:300])
    etag: str = answer.headers["ETag"].strip('" ')
    assert etag
    return etag


def _split(data: bytes, size: int = PART_SIZE) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _multipart_etag(parts: list[bytes]) -> str:
    """S3's ETag of an object made of these parts: the MD5 of the parts' MD5s, and their count."""
    digests = b"".join(hashlib.md5(part).digest() for part in parts)
    return f"{hashlib.md5(digests).hexdigest()}-{len(parts)}"


def _completion(address: str, etags: list[str], **extra: Any) -> lakefs_sdk.CompletePresignMultipartUpload:
    parts = [lakefs_sdk.UploadPart(part_number=n, etag=etag) for n, etag in enumerate(etags, 1)]
    return lakefs_sdk.CompletePresignMultipartUpload(physical_address=address, parts=parts, **extra)


def _check_refused_part(store: Store, address: str, answer: urllib3.BaseHTTPResponse) -> None:
    """A part PUT to an upload that was completed or aborted: refused, the store holding no upload
    of the address any more (moto_server fails such a PUT with a 500 where S3 answers 404
    NoSuchUpload)."""
    if store.kind == "local":
        assert answer.status == 404 and b"NoSuchUpload" in answer.data
        return
    assert answer.status >= 400
    key = address.removeprefix(f"s3://{S3_DATA}/")
    assert moto_client(store.moto).list_multipart_uploads(Bucket=S3_DATA, Prefix=key).get("Uploads", []) == []


def _check_url_origin(store: Store, url: str) -> None:
    expected = store.api.stack.endpoint if store.kind == "local" else store.moto
    assert url.startswith(expected + "/"), url


def test_config_offers_presigned_multipart(store: Store) -> None:
    storage = lakefs_sdk.ConfigApi(store.api.sdk()).get_config().storage_config
    assert storage is not None and storage.pre_sign_multipart_upload is True


def test_a_64_mib_file_uploads_in_presigned_parts(store: Store) -> None:
    data = secrets.token_bytes(64 * MIB)
    chunks = _split(data)
    assert len(chunks) == 13  # twelve parts of 5 MiB and the rest, as lakectl cuts 64 MiB
    experimental = store.experimental()
    upload = experimental.create_presign_multipart_upload(store.repo, "main", "big/file.bin", parts=len(chunks))
    assert upload.physical_address.startswith(store.namespace + "/data/")
    assert upload.presigned_urls is not None and len(upload.presigned_urls) == len(chunks)
    for url in upload.presigned_urls:
        _check_url_origin(store, url)
    with ThreadPoolExecutor(4) as pool:  # lakectl uploads parts concurrently
        etags = list(pool.map(_put_part, upload.presigned_urls, chunks))
    assert etags == [hashlib.md5(chunk).hexdigest() for chunk in chunks]

    completion = _completion(
        upload.physical_address, etags, user_metadata={"origin": "pmpu"}, content_type="application/x-test"
    )
    stats = experimental.complete_presign_multipart_upload(
        store.repo, "main", upload.upload_id, "big/file.bin", completion
    )
    expected_etag = _multipart_etag(chunks)
    assert stats.path == "big/file.bin" and stats.size_bytes == len(data)
    assert stats.checksum == expected_etag
    assert stats.physical_address == upload.physical_address
    assert stats.metadata == {"origin": "pmpu"} and stats.content_type == "application/x-test"
    if store.kind == "s3":
        # What S3 itself says of the object the parts made.
        key = upload.physical_address.removeprefix(f"s3://{S3_DATA}/")
        head = moto_client(store.moto).head_object(Bucket=S3_DATA, Key=key)
        assert head["ETag"].strip('"') == expected_etag and head["ContentLength"] == len(data)

    # lakeFS's high-level client reads it back through presigned URLs.
    admin = store.api.stack.admin
    client = Client(
        host=store.api.stack.endpoint,
        username=admin.access_key_id,
        password=admin.secret_access_key.get_secret_value(),
    )
    obj = lakefs.Repository(store.repo, client=client).branch("main").object("big/file.bin")
    with obj.reader(mode="rb", pre_sign=True) as reader:
        back = reader.read()
    assert isinstance(back, bytes) and hashlib.sha256(back).digest() == hashlib.sha256(data).digest()
    assert obj.stat().checksum == expected_etag
    lakefs_sdk.CommitsApi(store.api.sdk()).commit(store.repo, "main", lakefs_sdk.CommitCreation(message="big"))
    assert lakefs_sdk.ObjectsApi(store.api.sdk()).stat_object(store.repo, "main", "big/file.bin").size_bytes == len(
        data
    )


def test_a_part_url_can_be_asked_again_and_a_part_copied(store: Store) -> None:
    source = secrets.token_bytes(PART_SIZE + 1000)
    objects = lakefs_sdk.ObjectsApi(store.api.sdk())
    posted = store.api.request(
        "POST",
        f"/repositories/{store.repo}/branches/main/objects?path=src.bin",
        body=source,
        headers={**_auth(store.api), "Content-Type": "application/octet-stream"},
    )
    assert posted.status == 201, posted.data
    experimental = store.experimental()
    upload = experimental.create_presign_multipart_upload(store.repo, "main", "joined.bin")
    assert upload.presigned_urls is None  # none asked for
    copy = lakefs_sdk.UploadPartCopyFrom(
        physical_address=upload.physical_address,
        copy_source=lakefs_sdk.CopyPartSource(
            repository=store.repo, ref="main", path="src.bin", range=f"bytes=0-{PART_SIZE - 1}"
        ),
    )
    copied = experimental.upload_part_copy_with_http_info(
        store.repo, "main", upload.upload_id, path="joined.bin", part_number=1, upload_part_copy_from=copy
    )
    assert copied.status_code == 204 and copied.headers is not None
    first_etag = copied.headers["ETag"].strip('"')
    assert first_etag == hashlib.md5(source[:PART_SIZE]).hexdigest()
    again = experimental.upload_part(
        store.repo,
        "main",
        upload.upload_id,
        path="joined.bin",
        part_number=2,
        upload_part_from=lakefs_sdk.UploadPartFrom(physical_address=upload.physical_address),
    )
    _check_url_origin(store, again.presigned_url)
    tail = b"the tail"
    second_etag = _put_part(again.presigned_url, tail)
    stats = experimental.complete_presign_multipart_upload(
        store.repo,
        "main",
        upload.upload_id,
        "joined.bin",
        _completion(upload.physical_address, [first_etag, second_etag]),
    )
    assert stats.size_bytes == PART_SIZE + len(tail)
    assert stats.checksum == _multipart_etag([source[:PART_SIZE], tail])
    assert objects.get_object(store.repo, "main", "joined.bin") == source[:PART_SIZE] + tail
    # Completed: the upload is gone, and its part URLs write nothing any more.
    with pytest.raises(ApiException) as gone:
        experimental.complete_presign_multipart_upload(
            store.repo, "main", upload.upload_id, "joined.bin", _completion(upload.physical_address, [second_etag])
        )
    assert gone.value.status == 404
    late = HTTP.request("PUT", again.presigned_url, body=b"late", headers={"Content-Length": "4"})
    _check_refused_part(store, upload.physical_address, late)


def test_abort_forgets_the_upload(store: Store) -> None:
    experimental = store.experimental()
    upload = experimental.create_presign_multipart_upload(store.repo, "main", "gone.bin", parts=1)
    assert upload.presigned_urls is not None
    etag = _put_part(upload.presigned_urls[0], b"some bytes")
    aborted = experimental.abort_presign_multipart_upload_with_http_info(
        store.repo,
        "main",
        upload.upload_id,
        "gone.bin",
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=upload.physical_address),
    )
    assert aborted.status_code == 204
    body = json.dumps({"physical_address": upload.physical_address, "parts": [{"part_number": 1, "etag": etag}]})
    refused = store.api.request(
        "PUT",
        store.pmpu(f"/{upload.upload_id}?path=gone.bin"),
        body=body.encode(),
        headers={**_auth(store.api), "Content-Type": "application/json"},
    )
    assert "no presigned multipart upload" in error_message(refused, 404)
    late = HTTP.request("PUT", upload.presigned_urls[0], body=b"x", headers={"Content-Length": "1"})
    _check_refused_part(store, upload.physical_address, late)
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        lakefs_sdk.ObjectsApi(store.api.sdk()).stat_object(store.repo, "main", "gone.bin")
    with pytest.raises(ApiException) as again:
        experimental.abort_presign_multipart_upload(
            store.repo,
            "main",
            upload.upload_id,
            "gone.bin",
            lakefs_sdk.AbortPresignMultipartUpload(physical_address=upload.physical_address),
        )
    assert again.value.status == 404


def _auth(api: Api, credentials: Any = None) -> dict[str, str]:
    creds = credentials or api.stack.admin
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _complete_raw(store: Store, upload_id: str, path: str, body: dict[str, Any]) -> urllib3.BaseHTTPResponse:
    return store.api.request(
        "PUT",
        store.pmpu(f"/{upload_id}?path={path}"),
        body=json.dumps(body).encode(),
        headers={**_auth(store.api), "Content-Type": "application/json"},
    )


def test_bad_completions_are_refused_and_leave_the_upload_open(store: Store) -> None:
    experimental = store.experimental()
    upload = experimental.create_presign_multipart_upload(store.repo, "main", "b.bin", parts=2)
    other = experimental.create_presign_multipart_upload(store.repo, "main", "b.bin", parts=1)
    assert upload.presigned_urls is not None and other.presigned_urls is not None
    first, second = secrets.token_bytes(PART_SIZE), b"last part"
    etags = [_put_part(upload.presigned_urls[0], first), _put_part(upload.presigned_urls[1], second)]
    address = upload.physical_address
    good = [{"part_number": 1, "etag": etags[0]}, {"part_number": 2, "etag": etags[1]}]

    def refused(status: int, body: dict[str, Any], upload_id: str = upload.upload_id, path: str = "b.bin") -> str:
        return error_message(_complete_raw(store, upload_id, path, body), status)

    assert "parts are required" in refused(400, {"physical_address": address, "parts": []})
    assert "ascending" in refused(400, {"physical_address": address, "parts": good[::-1]})
    assert "ascending" in refused(400, {"physical_address": address, "parts": [good[0], good[0]]})
    assert "between 1 and 10000" in refused(
        400, {"physical_address": address, "parts": [{**good[0], "part_number": 0}]}
    )
    too_many = [{"part_number": n, "etag": "e"} for n in range(1, 10002)]
    assert "at most 10000" in refused(400, {"physical_address": address, "parts": too_many})
    wrong_etag = [good[0], {"part_number": 2, "etag": hashlib.md5(b"other").hexdigest()}]
    refused(400, {"physical_address": address, "parts": wrong_etag})  # the store's own check
    refused(400, {"physical_address": address, "parts": [*good, {"part_number": 3, "etag": etags[1]}]})  # no part 3
    # Another upload's address, an address outside the namespace, a path it was not made for.
    assert "not the one upload" in refused(400, {"physical_address": other.physical_address, "parts": good})
    outside = "local://elsewhere/data/x" if store.kind == "local" else "s3://another-bucket/data/x"
    assert "not inside the repository's storage namespace" in refused(400, {"physical_address": outside, "parts": good})
    assert "link address invalid" in refused(400, {"physical_address": address, "parts": good}, path="c.bin")
    assert "no presigned multipart upload" in refused(404, {"physical_address": address, "parts": good}, "0" * 32)
    assert "no presigned multipart upload" in refused(404, {"physical_address": address, "parts": good}, "nope")
    assert "physical_address" in refused(400, {"parts": good})

    # Still open after every refusal: the right list completes it.
    stats = experimental.complete_presign_multipart_upload(
        store.repo, "main", upload.upload_id, "b.bin", _completion(address, etags)
    )
    assert stats.checksum == _multipart_etag([first, second])
    experimental.abort_presign_multipart_upload(
        store.repo,
        "main",
        other.upload_id,
        "b.bin",
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=other.physical_address),
    )


def test_parts_bounds_and_missing_things(store: Store) -> None:
    headers = _auth(store.api)
    assert "parts can be between 0 and 10000" in error_message(
        store.api.request("POST", store.pmpu("?path=x&parts=10001"), headers=headers), 400
    )
    assert "parts can be between 0 and 10000" in error_message(
        store.api.request("POST", store.pmpu("?path=x&parts=-1"), headers=headers), 400
    )
    error_message(store.api.request("POST", store.pmpu(""), headers=headers), 400)  # no path
    missing = f"/repositories/{store.repo}/branches/no-such-branch/staging/pmpu?path=x"
    error_message(store.api.request("POST", missing, headers=headers), 404)
    upload = store.experimental().create_presign_multipart_upload(store.repo, "main", "x")
    part = {"physical_address": upload.physical_address}
    for number in ("0", "10001"):
        answer = store.api.request(
            "PUT",
            store.pmpu(f"/{upload.upload_id}/parts/{number}?path=x"),
            body=json.dumps(part).encode(),
            headers={**headers, "Content-Type": "application/json"},
        )
        error_message(answer, 400)


def test_a_reader_may_not_upload(api: Api, repo: str) -> None:
    reader = lakefs_sdk.ExperimentalApi(api.sdk(api.stack.reader))
    with pytest.raises(ApiException) as refused:
        reader.create_presign_multipart_upload(repo, "main", "r.bin", parts=1)
    assert refused.value.status == 403
    upload = lakefs_sdk.ExperimentalApi(api.sdk()).create_presign_multipart_upload(repo, "main", "r.bin", parts=1)
    assert upload.presigned_urls is not None
    etag = _put_part(upload.presigned_urls[0], b"admin's bytes")
    with pytest.raises(ApiException) as refused:
        reader.complete_presign_multipart_upload(
            repo, "main", upload.upload_id, "r.bin", _completion(upload.physical_address, [etag])
        )
    assert refused.value.status == 403
    with pytest.raises(ApiException) as refused:
        reader.upload_part(
            repo,
            "main",
            upload.upload_id,
            path="r.bin",
            part_number=1,
            upload_part_from=lakefs_sdk.UploadPartFrom(physical_address=upload.physical_address),
        )
    assert refused.value.status == 403
    with pytest.raises(ApiException) as refused:
        reader.abort_presign_multipart_upload(
            repo,
            "main",
            upload.upload_id,
            "r.bin",
            lakefs_sdk.AbortPresignMultipartUpload(physical_address=upload.physical_address),
        )
    assert refused.value.status == 403


def test_the_s3_gateway_leaves_a_presigned_upload_to_the_api(api: Api, repo: str) -> None:
    upload = lakefs_sdk.ExperimentalApi(api.sdk()).create_presign_multipart_upload(repo, "main", "g.bin", parts=1)
    s3 = api.stack.client()
    listed = s3.list_multipart_uploads(Bucket=repo)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in listed] == [("main/g.bin", upload.upload_id)]
    with pytest.raises(s3.exceptions.NoSuchUpload):
        s3.list_parts(Bucket=repo, Key="main/g.bin", UploadId=upload.upload_id)
    with pytest.raises(s3.exceptions.NoSuchUpload):
        s3.abort_multipart_upload(Bucket=repo, Key="main/g.bin", UploadId=upload.upload_id)
