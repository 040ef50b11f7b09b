"""S3 behaviours real SDKs depend on, each through boto3 and through raw
signed requests against the gateway process: conditional writes, SigV4 with a Date header,
UTF-8 header values, retried CompleteMultipartUpload, Content-Encoding with aws-chunked,
presigned expiry bounds, ListBuckets paging, writes to ref expressions, and bodies that do not
match their Content-Length."""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.header import decode_header, make_header
from email.utils import formatdate
from typing import Any
from unittest import mock
from urllib.parse import parse_qsl, urlencode, urlsplit
from xml.etree import ElementTree

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from silt.graveler.v1 import graveler_pb2 as api
from tests.e2e.gateway.test_auth import STREAMING, chunked_body, code, send, signed
from tests.e2e.gateway.test_hostile_input import error_code, head_bytes, host_of, raw_request, signed_headers
from tests.support.gateway_stack import GatewayStack

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
PART = 5 * 1024 * 1024


def status_of(exc: pytest.ExceptionInfo[ClientError]) -> int:
    return exc.value.response["ResponseMetadata"]["HTTPStatusCode"]


def stored_objects(gw: GatewayStack, bucket: str) -> list[str]:
    """The object files of a repository's storage namespace (local blockstore)."""
    root = gw.stack.data_dir / "data" / bucket / "data"
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".silt-")) if root.exists() else []


def raw_put(gw: GatewayStack, path: str, body: bytes, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """A PUT signed by botocore's SigV4 signer, sent over a raw socket exactly as signed."""
    request = signed(gw, "PUT", path, hashlib.sha256(body).hexdigest(), body, **headers)
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = str(len(body))
    return raw_request(gw, head_bytes("PUT", path, out, host_of(gw)), body)


def commit(gw: GatewayStack, bucket: str) -> None:
    gw.graveler.Commit(api.CommitRequest(repository=bucket, branch="main", message="committed"))


# --- conditional writes -------------------------------------------------------------------


def test_if_none_match_star_put_with_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"first", IfNoneMatch="*")
    before = stored_objects(gw, bucket)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/k", Body=b"second", IfNoneMatch="*")
    assert code(exc) == "PreconditionFailed" and status_of(exc) == 412
    assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"first"
    assert stored_objects(gw, bucket) == before  # the refused bytes were deleted, no orphan
    # A key that exists only in the committed layer is just as present.
    s3.put_object(Bucket=bucket, Key="main/c", Body=b"committed")
    commit(gw, bucket)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/c", Body=b"x", IfNoneMatch="*")
    assert code(exc) == "PreconditionFailed"
    # A deleted key is absent again.
    s3.delete_object(Bucket=bucket, Key="main/c")
    s3.put_object(Bucket=bucket, Key="main/c", Body=b"again", IfNoneMatch="*")
    assert s3.get_object(Bucket=bucket, Key="main/c")["Body"].read() == b"again"


def test_if_match_put_with_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="main/k", Body=b"v1")["ETag"]
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/k", Body=b"v2", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert code(exc) == "PreconditionFailed" and status_of(exc) == 412
    new = s3.put_object(Bucket=bucket, Key="main/k", Body=b"v2", IfMatch=etag)["ETag"]
    assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"v2"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/k", Body=b"v3", IfMatch=etag)  # no longer current
    assert code(exc) == "PreconditionFailed"
    commit(gw, bucket)
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v3", IfMatch=new)  # matched in the committed layer
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v4", IfMatch="*")  # any current version
    assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"v4"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/missing", Body=b"x", IfMatch="*")
    assert code(exc) == "NoSuchKey" and status_of(exc) == 404
    # If-Match on a key that does not exist: S3 answers NoSuchKey.
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/missing", Body=b"x", IfMatch=etag)
    assert code(exc) == "NoSuchKey" and status_of(exc) == 404
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/missing")["KeyCount"] == 0


def test_conditional_put_with_raw_signed_requests(gw: GatewayStack, s3: Any, bucket: str) -> None:
    status, headers, _ = raw_put(gw, f"/{bucket}/main/r", b"one", **{"If-None-Match": "*"})
    assert status == 200
    etag = headers["etag"]
    before = stored_objects(gw, bucket)
    status, _, content = raw_put(gw, f"/{bucket}/main/r", b"two", **{"If-None-Match": "*"})
    assert status == 412 and error_code(content) == "PreconditionFailed"
    status, _, content = raw_put(gw, f"/{bucket}/main/r", b"two", **{"If-Match": '"ffffffffffffffffffffffffffffffff"'})
    assert status == 412 and error_code(content) == "PreconditionFailed"
    assert stored_objects(gw, bucket) == before
    status, _, _ = raw_put(gw, f"/{bucket}/main/r", b"two", **{"If-Match": etag})
    assert status == 200
    assert s3.get_object(Bucket=bucket, Key="main/r")["Body"].read() == b"two"
    # S3 takes only "*" in If-None-Match on writes.
    status, _, content = raw_put(gw, f"/{bucket}/main/r", b"three", **{"If-None-Match": etag})
    assert status == 501 and error_code(content) == "NotImplemented"


def test_concurrent_if_none_match_puts_create_the_key_once(gw: GatewayStack, bucket: str) -> None:
    writers = 12
    clients = [gw.client() for _ in range(writers)]

    def put(i: int) -> str:
        try:
            clients[i].put_object(Bucket=bucket, Key="main/race", Body=f"writer {i}".encode(), IfNoneMatch="*")
            return f"won {i}"
        except ClientError as exc:
            return exc.response["Error"]["Code"]

    with ThreadPoolExecutor(writers) as pool:
        outcomes = list(pool.map(put, range(writers)))
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1, outcomes
    # A writer whose staging token a commit sealed under it may get 409 ConditionalRequestConflict
    # (never a second success); without commits running, every loser is PreconditionFailed.
    assert sorted(o for o in outcomes if not o.startswith("won")) == ["PreconditionFailed"] * (writers - 1)
    body = clients[0].get_object(Bucket=bucket, Key="main/race")["Body"].read()
    assert body == f"writer {winners[0].split()[1]}".encode()
    assert len(stored_objects(gw, bucket)) == 1  # the losers' bytes are gone


def test_concurrent_if_match_puts_replace_a_version_once(gw: GatewayStack, s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="main/cas", Body=b"base")["ETag"]
    writers = 8
    clients = [gw.client() for _ in range(writers)]

    def put(i: int) -> bool:
        try:
            clients[i].put_object(Bucket=bucket, Key="main/cas", Body=f"next {i}".encode(), IfMatch=etag)
            return True
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "PreconditionFailed"
            return False

    with ThreadPoolExecutor(writers) as pool:
        assert sum(pool.map(put, range(writers))) == 1


def _upload_two_parts(s3: Any, bucket: str, key: str) -> tuple[str, list[dict[str, Any]]]:
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for number, data in ((1, b"a" * PART), (2, b"tail")):
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data)["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    return upload, parts


def test_conditional_complete_multipart_upload_with_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/mp", Body=b"exists")
    upload, parts = _upload_two_parts(s3, bucket, "main/mp")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="main/mp", UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
        )
    assert code(exc) == "PreconditionFailed" and status_of(exc) == 412
    assert s3.get_object(Bucket=bucket, Key="main/mp")["Body"].read() == b"exists"
    # Refused before the parts were consumed: the upload can still be completed or aborted.
    assert len(s3.list_parts(Bucket=bucket, Key="main/mp", UploadId=upload)["Parts"]) == 2
    s3.abort_multipart_upload(Bucket=bucket, Key="main/mp", UploadId=upload)
    assert len(stored_objects(gw, bucket)) == 1
    etag = s3.head_object(Bucket=bucket, Key="main/mp")["ETag"]
    upload, parts = _upload_two_parts(s3, bucket, "main/mp")
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="main/mp", UploadId=upload, MultipartUpload={"Parts": parts}, IfMatch=etag
    )
    assert done["ETag"].endswith('-2"')
    upload, parts = _upload_two_parts(s3, bucket, "main/new")
    s3.complete_multipart_upload(
        Bucket=bucket, Key="main/new", UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*"
    )
    assert s3.head_object(Bucket=bucket, Key="main/new")["ContentLength"] == PART + 4


def _complete_xml(parts: list[dict[str, Any]]) -> bytes:
    items = "".join(f"<Part><PartNumber>{p['PartNumber']}</PartNumber><ETag>{p['ETag']}</ETag></Part>" for p in parts)
    return f"<CompleteMultipartUpload>{items}</CompleteMultipartUpload>".encode()


def _raw_complete(gw: GatewayStack, bucket: str, key: str, upload: str, body: bytes, **headers: str) -> Any:
    path = f"/{bucket}/{key}?uploadId={upload}"
    request = signed(gw, "POST", path, hashlib.sha256(body).hexdigest(), body, **headers)
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = str(len(body))
    return raw_request(gw, head_bytes("POST", path, out, host_of(gw)), body)


def test_conditional_complete_multipart_upload_with_raw_requests(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/mp", Body=b"exists")
    upload, parts = _upload_two_parts(s3, bucket, "main/mp")
    status, _, content = _raw_complete(gw, bucket, "main/mp", upload, _complete_xml(parts), **{"If-None-Match": "*"})
    assert status == 412 and error_code(content) == "PreconditionFailed"
    upload, parts = _upload_two_parts(s3, bucket, "main/mp")
    bad = {"If-Match": '"00000000000000000000000000000000"'}
    status, _, content = _raw_complete(gw, bucket, "main/mp", upload, _complete_xml(parts), **bad)
    assert status == 412 and error_code(content) == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="main/mp")["Body"].read() == b"exists"
    assert len(stored_objects(gw, bucket)) == 1


# --- a retried CompleteMultipartUpload ----------------------------------------------------


def test_a_repeated_complete_answers_the_same_result(gw: GatewayStack, s3: Any, bucket: str) -> None:
    upload, parts = _upload_two_parts(s3, bucket, "main/again")
    first = s3.complete_multipart_upload(
        Bucket=bucket, Key="main/again", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    second = s3.complete_multipart_upload(
        Bucket=bucket, Key="main/again", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert second["ETag"] == first["ETag"]
    status, _, content = _raw_complete(gw, bucket, "main/again", upload, _complete_xml(parts))
    assert status == 200
    assert ElementTree.fromstring(content).findtext(f"{NS}ETag") == first["ETag"]
    # Only the same parts replay the answer; the upload is not open for anything else.
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="main/again", UploadId=upload, MultipartUpload={"Parts": parts[:1]}
        )
    assert code(exc) == "NoSuchUpload"
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=bucket, Key="main/again", UploadId=upload, PartNumber=3, Body=b"late")
    assert code(exc) == "NoSuchUpload"
    listed = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert upload not in [u["UploadId"] for u in listed]
    assert s3.head_object(Bucket=bucket, Key="main/again")["ETag"] == first["ETag"]


# --- SigV4 with Date instead of X-Amz-Date ------------------------------------------------


def test_sigv4_with_a_date_header_through_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    client = gw.client()
    sent: dict[str, str] = {}
    client.meta.events.register(
        "before-sign.s3.PutObject", lambda request, **_: request.headers.__setitem__("Date", formatdate(usegmt=True))
    )
    client.meta.events.register("before-send.s3.PutObject", lambda request, **_: sent.update(request.headers))
    client.put_object(Bucket=bucket, Key="main/dated", Body=b"dated")
    assert "Date" in sent and "X-Amz-Date" not in sent  # botocore signed with the Date header
    assert s3.get_object(Bucket=bucket, Key="main/dated")["Body"].read() == b"dated"


def test_sigv4_with_a_date_header_raw(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v")
    path = f"/{bucket}/main/k"
    request = signed(gw, "GET", path, "UNSIGNED-PAYLOAD", Date=formatdate(usegmt=True))
    assert "X-Amz-Date" not in request.headers and "date" in request.headers["Authorization"]
    headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    status, _, content = raw_request(gw, head_bytes("GET", path, headers, host_of(gw)))
    assert status == 200 and content == b"v"
    # The Date header is signed and checked like X-Amz-Date: a stale one is refused.
    stale = formatdate(time.time() - 3600, usegmt=True)
    headers["Date"] = stale
    status, _, content = raw_request(gw, head_bytes("GET", path, headers, host_of(gw)))
    assert status == 403 and error_code(content) in ("SignatureDoesNotMatch", "RequestTimeTooSkewed")
    with mock.patch("botocore.auth.get_current_datetime", return_value=datetime.now(UTC) - timedelta(hours=1)):
        request = signed(gw, "GET", path, "UNSIGNED-PAYLOAD", Date=stale)
    headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    status, _, content = raw_request(gw, head_bytes("GET", path, headers, host_of(gw)))
    assert status == 403 and error_code(content) == "RequestTimeTooSkewed"


# --- UTF-8 header values ------------------------------------------------------------------


def test_utf8_metadata_through_boto3(gw: GatewayStack, bucket: str) -> None:
    client = gw.client()
    # botocore refuses non-ASCII Metadata before signing; a client that sends UTF-8 signs the
    # value's UTF-8 bytes (botocore's signer does) and puts those bytes on the wire.
    client.meta.events.register(
        "before-sign.s3.PutObject", lambda request, **_: request.headers.__setitem__("x-amz-meta-x", "café ☕")
    )

    def utf8_on_the_wire(request: Any, **_: Any) -> None:
        request.headers["x-amz-meta-x"] = "café ☕".encode()

    client.meta.events.register("before-send.s3.PutObject", utf8_on_the_wire)
    client.put_object(Bucket=bucket, Key="main/u", Body=b"x")
    # Stored as the text (what the REST API shows), answered as S3 answers it: one RFC 2047
    # encoded word of the UTF-8 bytes, which any HTTP library carries.
    entry = gw.graveler.StatEntry(api.StatEntryRequest(repository=bucket, ref="main", key="u")).entry
    assert entry.metadata["x-amz-meta-x"] == "café ☕"
    got = gw.client().head_object(Bucket=bucket, Key="main/u")["Metadata"]["x"]
    assert got == "=?UTF-8?B?" + base64.b64encode("café ☕".encode()).decode() + "?="
    assert str(make_header(decode_header(got))) == "café ☕"


def test_rfc2047_metadata_round_trips_through_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """What a client whose SDK takes only ASCII metadata sends: an encoded word (B or Q), stored
    decoded as S3 stores it, and answered as the encoded word of its UTF-8 bytes."""
    encoded = "=?UTF-8?B?" + base64.b64encode("naïve ☕".encode()).decode() + "?="
    for form in (encoded, "=?utf-8?Q?na=C3=AFve_=E2=98=95?="):
        s3.put_object(Bucket=bucket, Key="main/w", Body=b"x", Metadata={"m": form, "plain": "ascii"})
        entry = gw.graveler.StatEntry(api.StatEntryRequest(repository=bucket, ref="main", key="w")).entry
        assert entry.metadata["x-amz-meta-m"] == "naïve ☕"
        got = s3.head_object(Bucket=bucket, Key="main/w")["Metadata"]
        assert got["plain"] == "ascii"
        assert str(make_header(decode_header(got["m"]))) == "naïve ☕"
        assert got["m"].startswith("=?UTF-8?B?")


def test_utf8_metadata_raw(gw: GatewayStack, bucket: str) -> None:
    path = f"/{bucket}/main/u"
    request = signed(gw, "PUT", path, hashlib.sha256(b"x").hexdigest(), b"x", **{"x-amz-meta-x": "café"})
    headers = [(k, v) for k, v in request.headers.items() if k.lower() != "host"] + [("Content-Length", "1")]
    head = "\r\n".join(
        [f"PUT {path} HTTP/1.1", f"Host: {host_of(gw)}", "Connection: close", *(f"{k}: {v}" for k, v in headers)]
    )
    status, _, content = raw_request(gw, (head + "\r\n\r\n").encode("utf-8"), b"x")
    assert status == 200, content
    get = signed_headers(gw, "HEAD", path)
    status, answer, _ = raw_request(gw, head_bytes("HEAD", path, get, host_of(gw)))
    assert status == 200
    assert answer["x-amz-meta-x"] == "=?UTF-8?B?Y2Fmw6k=?="  # "café"
    # A value signed as other bytes than were sent does not verify.
    status, _, content = raw_request(gw, (head.replace("café", "cafe") + "\r\n\r\n").encode("utf-8"), b"x")
    assert status == 403 and error_code(content) == "SignatureDoesNotMatch"


# --- Content-Encoding with aws-chunked ----------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "stored"),
    [("gzip, aws-chunked", "gzip"), ("aws-chunked,gzip", "gzip"), ("gzip,aws-chunked,br", "gzip,br")],
)
def test_aws_chunked_is_removed_from_content_encoding_raw(
    gw: GatewayStack, s3: Any, bucket: str, sent: str, stored: str
) -> None:
    data = b"compressed bytes"
    headers = {"content-encoding": sent, "x-amz-decoded-content-length": str(len(data))}
    request = signed(gw, "PUT", f"/{bucket}/main/enc", STREAMING, b"", **headers)
    body = chunked_body(request, gw.admin.secret_access_key.get_secret_value(), gw.region, [data])
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = str(len(body))
    status, _, content = raw_request(gw, head_bytes("PUT", f"/{bucket}/main/enc", out, host_of(gw)), body)
    assert status == 200, content
    got = s3.get_object(Bucket=bucket, Key="main/enc")
    assert got["ContentEncoding"] == stored and got["Body"].read() == data


def test_aws_chunked_is_removed_from_content_encoding_with_boto3(s3: Any, bucket: str) -> None:
    # What SDKs that frame uploads aws-chunked send (botocore does over HTTPS, with trailers).
    for sent, key in (("gzip, aws-chunked", "main/gz"), ("aws-chunked", "main/plain")):
        s3.put_object(Bucket=bucket, Key=key, Body=b"gzip data", ContentEncoding=sent)
    assert s3.head_object(Bucket=bucket, Key="main/gz")["ContentEncoding"] == "gzip"
    assert "ContentEncoding" not in s3.head_object(Bucket=bucket, Key="main/plain")


# --- presigned expiry ---------------------------------------------------------------------


def _with_expires(url: str, expires: str) -> str:
    parts = urlsplit(url)
    query = [(k, expires if k == "X-Amz-Expires" else v) for k, v in parse_qsl(parts.query)]
    return f"{parts.path}?{urlencode(query)}"


def test_presigned_expiry_zero_with_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/p", Body=b"p")
    url = gw.client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=0
    )
    assert "X-Amz-Expires=0" in url
    parts = urlsplit(url)
    got, _, content = raw_request(gw, head_bytes("GET", f"{parts.path}?{parts.query}", {}, host_of(gw)))
    assert got == 403 and error_code(content) == "AccessDenied"
    assert ElementTree.fromstring(content).findtext("Message") == "Request has expired"


@pytest.mark.parametrize(
    ("expires", "status", "error"),
    [
        ("0", 403, "AccessDenied"),
        ("-1", 400, "AuthorizationQueryParametersError"),
        ("604801", 400, "AuthorizationQueryParametersError"),
        ("soon", 400, "AuthorizationQueryParametersError"),
    ],
)
def test_presigned_expiry_bounds_raw(
    gw: GatewayStack, s3: Any, bucket: str, expires: str, status: int, error: str
) -> None:
    s3.put_object(Bucket=bucket, Key="main/p", Body=b"p")
    url = gw.client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=60
    )
    got, _, content = raw_request(gw, head_bytes("GET", _with_expires(url, expires), {}, host_of(gw)))
    assert got == status and error_code(content) == error, content
    if expires == "0":
        assert ElementTree.fromstring(content).findtext("Message") == "Request has expired"
    # Seven days exactly is the longest S3 allows: the signature is then what is checked.
    got, _, content = raw_request(gw, head_bytes("GET", _with_expires(url, "604800"), {}, host_of(gw)))
    assert got == 403 and error_code(content) == "SignatureDoesNotMatch"


def test_presigned_seven_days_works(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/p", Body=b"week")
    url = gw.client(signature_version="s3v4").generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=604800
    )
    parts = urlsplit(url)
    got, _, content = raw_request(gw, head_bytes("GET", f"{parts.path}?{parts.query}", {}, host_of(gw)))
    assert got == 200 and content == b"week"


# --- ListBuckets paging -------------------------------------------------------------------


def test_list_buckets_pages_with_boto3(s3: Any) -> None:
    prefix = f"lb-{secrets.token_hex(3)}-"
    names = [f"{prefix}{i}" for i in range(5)]
    for name in names:
        s3.create_bucket(Bucket=name)
    seen: list[str] = []
    token = None
    for _ in range(10):
        kwargs: dict[str, Any] = {"MaxBuckets": 2, "Prefix": prefix}
        if token:
            kwargs["ContinuationToken"] = token
        page = s3.list_buckets(**kwargs)
        assert page["Prefix"] == prefix
        batch = [b["Name"] for b in page["Buckets"]]
        assert len(batch) <= 2
        seen += batch
        token = page.get("ContinuationToken")
        if not token:
            break
    assert seen == names
    everything = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert set(names) <= set(everything)
    assert "ContinuationToken" not in s3.list_buckets()  # no parameters: every bucket at once


def test_list_buckets_pages_raw(gw: GatewayStack, s3: Any) -> None:
    prefix = f"lr-{secrets.token_hex(3)}-"
    for i in range(3):
        s3.create_bucket(Bucket=f"{prefix}{i}")
    path = f"/?max-buckets=2&prefix={prefix}"
    request = signed(gw, "GET", path, "UNSIGNED-PAYLOAD")
    response = send(request)
    assert response.status_code == 200
    root = ElementTree.fromstring(response.content)
    assert [n.text for n in root.iter(f"{NS}Name")] == [f"{prefix}0", f"{prefix}1"]
    assert root.findtext(f"{NS}Prefix") == prefix
    token = root.findtext(f"{NS}ContinuationToken")
    assert token
    query = urlencode({"continuation-token": token, "prefix": prefix})
    response = send(signed(gw, "GET", f"/?{query}", "UNSIGNED-PAYLOAD"))
    root = ElementTree.fromstring(response.content)
    assert [n.text for n in root.iter(f"{NS}Name")] == [f"{prefix}2"]
    assert root.find(f"{NS}ContinuationToken") is None
    for bad in ("0", "10001", "many"):
        response = send(signed(gw, "GET", f"/?max-buckets={bad}", "UNSIGNED-PAYLOAD"))
        assert response.status_code == 400 and error_code(response.content) == "InvalidArgument"
    response = send(signed(gw, "GET", "/?continuation-token=%25%25", "UNSIGNED-PAYLOAD"))
    assert response.status_code == 400 and error_code(response.content) == "InvalidArgument"


# --- writes to ref expressions ------------------------------------------------------------


@pytest.mark.parametrize("ref", ["main~1", "main@", "main^", "main~"])
def test_writes_to_a_ref_expression_are_not_allowed_with_boto3(s3: Any, bucket: str, ref: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v")
    for call in (
        lambda: s3.put_object(Bucket=bucket, Key=f"{ref}/k", Body=b"x"),
        lambda: s3.delete_object(Bucket=bucket, Key=f"{ref}/k"),
        lambda: s3.create_multipart_upload(Bucket=bucket, Key=f"{ref}/k"),
        lambda: s3.copy_object(Bucket=bucket, Key=f"{ref}/c", CopySource=f"{bucket}/main/k"),
    ):
        with pytest.raises(ClientError) as exc:
            call()
        assert code(exc) == "MethodNotAllowed" and status_of(exc) == 405
    result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"{ref}/k"}]})
    assert [e["Code"] for e in result.get("Errors", [])] == ["MethodNotAllowed"]


@pytest.mark.parametrize("ref", ["main~1", "main@", "main^2"])
def test_writes_to_a_ref_expression_are_not_allowed_raw(gw: GatewayStack, bucket: str, ref: str) -> None:
    status, _, content = raw_put(gw, f"/{bucket}/{ref}/k", b"x")
    assert status == 405 and error_code(content) == "MethodNotAllowed"
    path = f"/{bucket}/{ref}/k"
    status, _, content = raw_request(gw, head_bytes("DELETE", path, signed_headers(gw, "DELETE", path), host_of(gw)))
    assert status == 405 and error_code(content) == "MethodNotAllowed"


# --- bodies that do not match Content-Length ----------------------------------------------


def test_a_body_longer_than_content_length(gw: GatewayStack, s3: Any, bucket: str) -> None:
    url = urlsplit(gw.endpoint)
    path = f"/{bucket}/main/long"
    head = head_bytes("PUT", path, signed_headers(gw, "PUT", path, **{"Content-Length": "3"}), host_of(gw))
    # As SDKs send, on a connection kept open (after "Connection: close" the HTTP parser
    # ignores whatever follows the declared body, as HTTP allows). The excess arrives before
    # the request was answered: it cannot be the next request.
    kept_alive = head.replace(b"Connection: close\r\n", b"")
    for pieces in ([kept_alive + b"abcdef-and-more"], [kept_alive + b"ab", b"cdef-and-more"]):
        with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
            for piece in pieces:
                sock.sendall(piece)
                time.sleep(0.05)  # the scenario: each piece arrives in a read of its own
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert received.startswith(b"HTTP/1.1 400"), received[:300]
        assert error_code(received.partition(b"\r\n\r\n")[2]) == "IncompleteBody"
        assert received.count(b"HTTP/1.1") == 1  # one answer, an S3 error, for the whole exchange
        # The request did not take effect.
        assert s3.list_objects_v2(Bucket=bucket, Prefix="main/long")["KeyCount"] == 0
    assert stored_objects(gw, bucket) == []


def test_a_body_longer_than_content_length_with_a_signed_payload(gw: GatewayStack, s3: Any, bucket: str) -> None:
    # A payload hash names the bytes the client meant to send; the declared length cuts them short.
    request = signed(gw, "PUT", f"/{bucket}/main/cut", hashlib.sha256(b"abcdef").hexdigest(), b"abcdef")
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = "3"
    status, _, content = raw_request(gw, head_bytes("PUT", f"/{bucket}/main/cut", out, host_of(gw)), b"abcdef")
    assert status == 400 and error_code(content) == "XAmzContentSHA256Mismatch"
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/cut")["KeyCount"] == 0


def test_a_body_shorter_than_content_length(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """The client sends less than it declared and closes its side: IncompleteBody, nothing stored."""
    url = urlsplit(gw.endpoint)
    for size, sent in ((10, b"short"), (1024 * 1024, b"x" * (600 * 1024))):  # a small and a streamed body
        path = f"/{bucket}/main/short-{size}"
        headers = signed_headers(gw, "PUT", path, **{"Content-Length": str(size)})
        with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
            sock.sendall(head_bytes("PUT", path, headers, host_of(gw)) + sent)
            sock.shutdown(socket.SHUT_WR)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert received.startswith(b"HTTP/1.1 400"), received[:300]
        assert error_code(received.partition(b"\r\n\r\n")[2]) == "IncompleteBody"
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/short")["KeyCount"] == 0
    assert stored_objects(gw, bucket) == []


def test_an_answer_written_before_the_clients_end_arrives_reaches_it(gw: GatewayStack) -> None:
    """`printf ... | nc -N`, some load balancers' checks: the request, then the client's end at
    once. An answer the gateway writes in the same turn (the health check) still reaches it:
    the write kept for the turn's end is sent before the closing transport would drop it."""
    url = urlsplit(gw.endpoint)
    for _ in range(10):
        with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
            sock.sendall(b"GET /_silt/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert received.startswith(b"HTTP/1.1 200"), received[:300]


def test_a_short_body_with_a_digest_is_incomplete_not_a_bad_digest(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """A body cut short is IncompleteBody whatever digest it carries (the CRC32 SDKs send with
    every upload, a Content-MD5): the digest of a cut body cannot match, but that is not what
    went wrong. Small bodies and streamed ones alike."""
    url = urlsplit(gw.endpoint)
    for size, sent in ((10, b"short"), (1024 * 1024, b"x" * (600 * 1024))):
        whole = sent + b"y" * (size - len(sent))
        digests = {
            "x-amz-checksum-crc32": base64.b64encode(zlib.crc32(whole).to_bytes(4, "big")).decode(),
            "Content-MD5": base64.b64encode(hashlib.md5(whole).digest()).decode(),
        }
        for name, value in digests.items():
            path = f"/{bucket}/main/cut-{size}"
            headers = signed_headers(gw, "PUT", path, **{"Content-Length": str(size), name: value})
            with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
                sock.sendall(head_bytes("PUT", path, headers, host_of(gw)) + sent)
                sock.shutdown(socket.SHUT_WR)
                received = b""
                while chunk := sock.recv(65536):
                    received += chunk
            assert received.startswith(b"HTTP/1.1 400"), received[:300]
            assert error_code(received.partition(b"\r\n\r\n")[2]) == "IncompleteBody", (name, received[:600])
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/cut")["KeyCount"] == 0
    assert stored_objects(gw, bucket) == []


def test_a_body_shorter_than_content_length_with_boto3(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """botocore declaring more than it sends: the gateway waits for the rest; the SDK gives up."""
    client = gw.client(read_timeout=1, connect_timeout=5)

    def short_body(request: Any, **_: Any) -> None:
        request.headers["Content-Length"] = str(int(request.headers["Content-Length"]) + 10)

    client.meta.events.register("before-send.s3.PutObject", short_body)
    with pytest.raises(ReadTimeoutError):
        client.put_object(Bucket=bucket, Key="main/short", Body=b"short")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/short")["KeyCount"] == 0
