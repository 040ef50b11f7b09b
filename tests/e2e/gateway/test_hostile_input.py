"""Hostile input that once crashed request handling with a 500: each must be a 4xx S3 error.

Requests go over raw sockets so that bytes no HTTP library would send (non-ASCII signatures,
invalid UTF-8 in paths, malformed aws-chunked framing) reach the gateway exactly as written.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest
from botocore.exceptions import ClientError

from tests.e2e.gateway.test_auth import STREAMING, chunked_body, signed
from tests.support.gateway_stack import GatewayStack


def raw_request(gw: GatewayStack, head: bytes, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send one HTTP/1.1 request as given; (status, headers, body) of the answer."""
    url = urlsplit(gw.endpoint)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    header_blob, _, content = received.partition(b"\r\n\r\n")
    lines = header_blob.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, content


def head_bytes(
    method: str, path: str, headers: dict[str, str] | list[tuple[str, str]], host: str, encoding: str = "latin-1"
) -> bytes:
    """encoding utf-8: non-ASCII values as SDKs send them, the bytes their signature covers."""
    items = headers.items() if isinstance(headers, dict) else headers
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close", *(f"{k}: {v}" for k, v in items)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode(encoding)


def error_code(content: bytes) -> str:
    return ElementTree.fromstring(content).findtext("Code") or ""


def host_of(gw: GatewayStack) -> str:
    return urlsplit(gw.endpoint).netloc


def signed_headers(gw: GatewayStack, method: str, path: str, **extra: str) -> dict[str, str]:
    request = signed(gw, method, path, "UNSIGNED-PAYLOAD", b"", **extra)
    return {k: v for k, v in request.headers.items() if k.lower() != "host"}


@pytest.mark.parametrize("claimed", ["\xe9" * 64, "é" * 32])
def test_a_non_ascii_sigv4_signature_is_refused(gw: GatewayStack, bucket: str, claimed: str) -> None:
    headers = signed_headers(gw, "GET", f"/{bucket}/main/k")
    headers["Authorization"] = headers["Authorization"].rsplit("Signature=", 1)[0] + "Signature=" + claimed
    status, _, content = raw_request(gw, head_bytes("GET", f"/{bucket}/main/k", headers, host_of(gw)))
    assert status == 403 and error_code(content) == "SignatureDoesNotMatch"


@pytest.mark.parametrize(("version", "field"), [("s3v4", "X-Amz-Signature="), ("s3", "Signature=")])
def test_a_non_ascii_presigned_signature_is_refused(gw: GatewayStack, version: str, field: str) -> None:
    bucket = f"non-ascii-{secrets.token_hex(5)}"
    s3 = gw.client()
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"x")
    signer = gw.client(signature_version=version)
    url = signer.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/k"}, ExpiresIn=60)
    before, _, after = url.partition(field)
    assert after, url
    rest = after.partition("&")[2]
    tampered = before + field + "%C3%A9" * 32 + ("&" + rest if rest else "")
    parts = urlsplit(tampered)
    status, _, content = raw_request(gw, head_bytes("GET", f"{parts.path}?{parts.query}", {}, host_of(gw)))
    assert status == 403 and error_code(content) == "SignatureDoesNotMatch", content


def test_a_non_ascii_sigv2_signature_is_refused(gw: GatewayStack) -> None:
    headers = {
        "Date": "Sun, 22 Nov 2026 10:00:00 GMT",
        "Authorization": f"AWS {gw.admin.access_key_id}:" + "\xe9" * 28,
    }
    status, _, content = raw_request(gw, head_bytes("GET", "/any-bucket/main/k", headers, host_of(gw)))
    assert status == 403, content


@pytest.mark.parametrize(
    "date", ["Sun, 4294967296 Nov 2026 10:00:00 GMT", "Sun, 22 Nov 99999999999 10:00:00 GMT", "Sun, 22 Nov"]
)
def test_an_impossible_sigv2_date_is_refused(gw: GatewayStack, date: str) -> None:
    headers = {"Date": date, "Authorization": f"AWS {gw.admin.access_key_id}:c2lnbmF0dXJl"}
    status, _, content = raw_request(gw, head_bytes("GET", "/any-bucket/main/k", headers, host_of(gw)))
    assert status == 403 and error_code(content) == "AccessDenied"


def test_an_impossible_if_modified_since_is_ignored(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"data")
    client = gw.client()  # its own client: the header hook must not leak into the shared one
    client.meta.events.register(
        "before-sign.s3.GetObject",
        lambda request, **_: request.headers.__setitem__("If-Modified-Since", "Sun, 4294967296 Nov 2026 1:00:00 GMT"),
    )
    assert client.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"data"


@pytest.mark.parametrize(
    ("spec", "status", "body"),
    [
        ("bytes=" + "9" * 5000 + "-", 416, None),
        ("bytes=0-" + "9" * 5000, 206, b"0123456789"),
        ("bytes=-" + "9" * 5000, 206, b"0123456789"),
        ("bytes=" + "0" * 5000 + "2-3", 206, b"23"),
    ],
)
def test_ranges_with_thousands_of_digits(
    gw: GatewayStack, s3: Any, bucket: str, spec: str, status: int, body: bytes | None
) -> None:
    s3.put_object(Bucket=bucket, Key="main/digits", Body=b"0123456789")
    headers = signed_headers(gw, "GET", f"/{bucket}/main/digits", Range=spec)
    got, _, content = raw_request(gw, head_bytes("GET", f"/{bucket}/main/digits", headers, host_of(gw)))
    assert got == status, content[:300]
    if body is not None:
        assert content == body
    else:
        assert error_code(content) == "InvalidRange"


def test_keys_that_are_not_utf8_are_refused_never_aliased(gw: GatewayStack, s3: Any, bucket: str) -> None:
    path = f"/{bucket}/main/coll%ff"
    headers = signed_headers(gw, "PUT", path, **{"Content-Length": "1"})
    status, _, content = raw_request(gw, head_bytes("PUT", path, headers, host_of(gw)), b"x")
    assert status == 400 and error_code(content) == "InvalidURI"
    other = f"/{bucket}/main/coll%fe"
    status, _, content = raw_request(gw, head_bytes("GET", other, signed_headers(gw, "GET", other), host_of(gw)))
    assert status == 400 and error_code(content) == "InvalidURI"
    # Neither name was stored under a substitute (U+FFFD) key; real UTF-8 keeps working.
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/coll").get("KeyCount") == 0
    s3.put_object(Bucket=bucket, Key="main/café", Body=b"ok")
    assert s3.get_object(Bucket=bucket, Key="main/café")["Body"].read() == b"ok"


def test_a_query_that_is_not_utf8_is_refused(gw: GatewayStack, bucket: str) -> None:
    path = f"/{bucket}?list-type=2&prefix=main/%ff"
    headers = signed_headers(gw, "GET", f"/{bucket}")
    status, _, content = raw_request(gw, head_bytes("GET", path, headers, host_of(gw)))
    assert status == 400 and error_code(content) == "InvalidURI"


@pytest.mark.parametrize("size_text", ["+3", " 3", "0x3", "3_0", "-3", "3" * 17])
def test_chunk_sizes_must_be_plain_hex(gw: GatewayStack, s3: Any, bucket: str, size_text: str) -> None:
    data = b"abc"
    headers = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))}
    request = signed(gw, "PUT", f"/{bucket}/main/chunky", STREAMING, b"", **headers)
    secret = gw.admin.secret_access_key.get_secret_value()
    body = chunked_body(request, secret, gw.region, [data])
    body = body.replace(b"3;chunk-signature=", size_text.encode() + b";chunk-signature=", 1)
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = str(len(body))
    status, _, content = raw_request(gw, head_bytes("PUT", f"/{bucket}/main/chunky", out, host_of(gw)), body)
    assert status == 400, content
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/chunky").get("KeyCount") == 0


def test_a_long_chunk_header_line_is_refused(gw: GatewayStack, s3: Any, bucket: str) -> None:
    data = b"abc"
    headers = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))}
    request = signed(gw, "PUT", f"/{bucket}/main/long", STREAMING, b"", **headers)
    body = chunked_body(request, gw.admin.secret_access_key.get_secret_value(), gw.region, [data])
    body = body.replace(b";chunk-signature=", b";pad=" + b"a" * 10240 + b";chunk-signature=", 1)
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = str(len(body))
    status, _, content = raw_request(gw, head_bytes("PUT", f"/{bucket}/main/long", out, host_of(gw)), body)
    assert status == 400 and error_code(content) == "InvalidRequest", content


def test_user_metadata_over_2_kib_is_refused_before_anything_is_stored(gw: GatewayStack, s3: Any, bucket: str) -> None:
    objects = gw.stack.data_dir / "data" / bucket / "data"  # the repository's object bytes
    for call in (
        lambda: s3.put_object(Bucket=bucket, Key="main/m", Body=b"x", Metadata={"m": "v" * 2048}),
        lambda: s3.create_multipart_upload(Bucket=bucket, Key="main/m", Metadata={"a": "v" * 1500, "b": "v" * 600}),
    ):
        with pytest.raises(ClientError) as exc:
            call()
        assert exc.value.response["Error"]["Code"] == "MetadataTooLarge"
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/m").get("KeyCount") == 0
    # Exactly at the limit (name bytes without the prefix plus value bytes) is accepted.
    s3.put_object(Bucket=bucket, Key="main/m", Body=b"x", Metadata={"m": "v" * 2047})
    assert s3.head_object(Bucket=bucket, Key="main/m")["Metadata"] == {"m": "v" * 2047}
    # Only the accepted object's bytes were written: the refused PUT left no orphan behind.
    stored = [p for p in objects.iterdir() if not p.name.startswith(".silt-")]
    assert len(stored) == 1


# Numbers: str.isdigit() also takes "²" (int() refuses it) and "٣"; int() refuses 4,300+ digits.
# Each once reached int() and answered 500 (found by tests/e2e/gateway/test_fuzz.py).
NOT_NUMBERS = ["9" * 5000, "%C2%B2", "%D9%A3", "-1", "1e3"]


def _upload(s3: Any, bucket: str, key: str) -> tuple[str, str]:
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"part")["ETag"]
    return upload, etag


def _signed_raw(gw: GatewayStack, method: str, target: str, body: bytes = b"", **extra: str) -> tuple[int, bytes]:
    headers = signed_headers(gw, method, target, **extra)
    if body or method in ("PUT", "POST"):
        headers["Content-Length"] = str(len(body))
    status, _, content = raw_request(gw, head_bytes(method, target, headers, host_of(gw)), body)
    return status, content


@pytest.mark.parametrize("number", NOT_NUMBERS)
def test_part_numbers_that_are_not_ascii_numbers_are_refused(
    gw: GatewayStack, s3: Any, bucket: str, number: str
) -> None:
    s3.put_object(Bucket=bucket, Key="main/whole", Body=b"data")
    upload, _ = _upload(s3, bucket, "main/parts")
    status, content = _signed_raw(gw, "PUT", f"/{bucket}/main/parts?partNumber={number}&uploadId={upload}", b"x")
    assert status == 400 and error_code(content) == "InvalidArgument", content
    status, content = _signed_raw(gw, "GET", f"/{bucket}/main/whole?partNumber={number}")
    assert status == 400 and error_code(content) == "InvalidArgument", content


@pytest.mark.parametrize(
    ("number", "code"),
    [
        ("9" * 5000, "InvalidArgument"),
        ("0", "InvalidArgument"),
        ("²", "MalformedXML"),
        ("٣", "MalformedXML"),
        (" ", "MalformedXML"),
        ("+1", "MalformedXML"),
    ],
)
def test_complete_multipart_upload_with_a_part_number_that_is_not_a_number(
    gw: GatewayStack, s3: Any, bucket: str, number: str, code: str
) -> None:
    upload, etag = _upload(s3, bucket, "main/parts")
    xml = f"<CompleteMultipartUpload><Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag></Part>"
    status, content = _signed_raw(
        gw, "POST", f"/{bucket}/main/parts?uploadId={upload}", (xml + "</CompleteMultipartUpload>").encode()
    )
    assert status == 400 and error_code(content) == code, content


@pytest.mark.parametrize(
    ("spec", "code"), [("bytes=0-" + "9" * 5000, "InvalidRange"), ("bytes=٣-٤", "InvalidArgument")]
)
def test_copy_source_ranges_with_huge_or_foreign_digits(
    gw: GatewayStack, s3: Any, bucket: str, spec: str, code: str
) -> None:
    s3.put_object(Bucket=bucket, Key="main/src", Body=b"0123456789")
    upload, _ = _upload(s3, bucket, "main/parts")
    target = f"/{bucket}/main/parts?partNumber=1&uploadId={upload}"
    extra = {"x-amz-copy-source": f"/{bucket}/main/src", "x-amz-copy-source-range": spec}
    # As UTF-8 bytes, as a client would send it: header values arrive as latin-1 text.
    extra["x-amz-copy-source-range"] = spec.encode().decode("latin-1")
    headers = signed_headers(gw, "PUT", target, **extra)
    headers["Content-Length"] = "0"
    status, _, content = raw_request(gw, head_bytes("PUT", target, headers, host_of(gw), "utf-8"))
    assert status == {"InvalidRange": 416, "InvalidArgument": 400}[code] and error_code(content) == code, content


@pytest.mark.parametrize("declared", ["\xb2", "\xb9", "9" * 5000])
def test_a_decoded_content_length_that_is_not_a_number(gw: GatewayStack, s3: Any, bucket: str, declared: str) -> None:
    """ "\\xb2" is "²" in latin-1, the charset of header values: once a 500 in three places."""
    data = b"abc"
    headers = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": declared}
    request = signed(gw, "PUT", f"/{bucket}/main/declared", STREAMING, b"", **headers)
    body = chunked_body(request, gw.admin.secret_access_key.get_secret_value(), gw.region, [data])
    out = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    out["Content-Length"] = str(len(body))
    status, _, content = raw_request(gw, head_bytes("PUT", f"/{bucket}/main/declared", out, host_of(gw), "utf-8"), body)
    assert status == 400 and error_code(content) in ("InvalidArgument", "IncompleteBody"), content
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/declared").get("KeyCount") == 0


@pytest.mark.parametrize("value", ["9" * 5000, "%C2%B2"])
def test_list_parts_limits_that_are_not_numbers(gw: GatewayStack, s3: Any, bucket: str, value: str) -> None:
    upload, _ = _upload(s3, bucket, "main/parts")
    status, content = _signed_raw(gw, "GET", f"/{bucket}/main/parts?uploadId={upload}&max-parts={value}")
    assert status < 500, content


def test_a_megabyte_name_is_refused_as_invalid_not_as_a_full_trailer(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """Graveler's refusal once echoed the whole name in its status message: over gRPC's 16 KiB
    trailer limit, the gateway saw RESOURCE_EXHAUSTED and answered 503 SlowDown."""
    import grpc

    from silt.graveler.v1 import graveler_pb2 as api

    huge = "k" * 1_100_000
    with pytest.raises(grpc.RpcError) as exc:
        gw.graveler.ResolveRef(api.ResolveRefRequest(repository=bucket, ref=huge), timeout=30)
    assert exc.value.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT)
    assert len(exc.value.details() or "") < 2048
    xml = f"<Delete><Object><Key>{huge}</Key></Object><Object><Key>main/gone</Key></Object></Delete>".encode()
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    status, content = _signed_raw(gw, "POST", f"/{bucket}?delete", xml, **{"Content-MD5": md5})
    assert status == 200, content[:500]
    result = ElementTree.fromstring(content)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    assert [e.findtext(f"{ns}Code") for e in result.findall(f"{ns}Error")] in (["InvalidArgument"], ["NoSuchBucket"])
    assert [e.findtext(f"{ns}Key") for e in result.findall(f"{ns}Deleted")] == ["main/gone"]


@pytest.mark.parametrize(
    ("method", "target", "extra", "code"),
    [
        ("GET", "/b%1Fb/main/k", {}, "InvalidBucketName"),
        ("GET", "/a%01b/main/k", {}, "InvalidBucketName"),
        ("PUT", "/a%0Bb", {}, "InvalidBucketName"),
    ],
)
def test_errors_echoing_control_characters_are_still_xml(
    gw: GatewayStack, bucket: str, method: str, target: str, extra: dict[str, str], code: str
) -> None:
    """XML 1.0 cannot hold most control characters: echoed as they came, the error was unparsable."""
    status, content = _signed_raw(gw, method, target.format(bucket=bucket), b"", **extra)
    assert status == 400 and error_code(content) == code, content


@pytest.mark.parametrize("after", [b" ", b"x", b"\x01junk\r\n\r\n", b"GET / HTTP/9\r\n\r\n"])
def test_a_malformed_request_after_a_body_is_refused_as_xml(gw: GatewayStack, bucket: str, after: bytes) -> None:
    """Bytes that arrive with a body, before it is answered, make the body longer than its
    Content-Length: refused as S3 XML (IncompleteBody) and nothing stored, where uvicorn once
    answered plain text (past the 64 KiB the head check reads at once)."""
    body = b"b" * 70_000
    headers = signed_headers(gw, "PUT", f"/{bucket}/main/k", **{"Content-Length": str(len(body))})
    head = head_bytes("PUT", f"/{bucket}/main/k", headers, host_of(gw))
    # Kept alive, so that the bytes after the body are parsed as the next request.
    head = head.replace(b"Connection: close", b"Connection: keep-alive")
    status, headers_back, content = raw_request(gw, head, body + after)
    assert b"Invalid HTTP request received" not in content, content
    assert status == 400 and headers_back.get("content-type") == "application/xml", (headers_back, content)
    assert error_code(content) == "IncompleteBody", content
    with pytest.raises(ClientError):
        gw.client().head_object(Bucket=bucket, Key="main/k")


@pytest.mark.parametrize("encoding", ["U0TF-8", "no-such-codec", "utf-8\x00"])
def test_xml_declaring_an_unknown_encoding_is_malformed(gw: GatewayStack, s3: Any, bucket: str, encoding: str) -> None:
    """expat asks Python for the declared codec: an unknown one was a LookupError, a 500."""
    declaration = f'<?xml version="1.0" encoding="{encoding}"?>'
    delete = f"{declaration}<Delete><Object><Key>main/k</Key></Object></Delete>".encode()
    md5 = base64.b64encode(hashlib.md5(delete).digest()).decode()
    status, content = _signed_raw(gw, "POST", f"/{bucket}?delete", delete, **{"Content-MD5": md5})
    assert status == 400 and error_code(content) == "MalformedXML", content
    upload, etag = _upload(s3, bucket, "main/parts")
    complete = f"{declaration}<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part>"
    body = (complete + "</CompleteMultipartUpload>").encode()
    status, content = _signed_raw(gw, "POST", f"/{bucket}/main/parts?uploadId={upload}", body)
    assert status == 400 and error_code(content) == "MalformedXML", content


@pytest.mark.parametrize("value", ["%D9%A3", "%201", "1_0", "-1", "", "%C2%B2"])
def test_max_keys_must_be_ascii_digits(gw: GatewayStack, bucket: str, value: str) -> None:
    status, content = _signed_raw(gw, "GET", f"/{bucket}?list-type=2&max-keys={value}")
    assert status == 400 and error_code(content) == "InvalidArgument", content


def _answers(gw: GatewayStack, sent: bytes) -> list[tuple[int, bytes]]:
    """Every answer on one connection, in order, until the server closes it."""
    url = urlsplit(gw.endpoint)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(sent)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    answers = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in lines[1:])
        length = next(int(value) for name, _, value in fields if name.lower() == "content-length")
        answers.append((int(lines[0].split()[1]), rest[:length]))
        received = rest[length:]
    return answers


@pytest.mark.parametrize("after", [b"\x00" * 300_000, b"\x01junk\r\n\r\n", b"GET / HTTP/9\r\n\r\n"])
def test_bytes_after_a_whole_request_are_refused_after_its_answer(gw: GatewayStack, bucket: str, after: bytes) -> None:
    """A request sent whole (Content-Length 0) and then bytes that are not HTTP: the request is
    answered first and the bytes refused after it, in order, as S3 does; lakeFS's python client
    sends exactly this when its writer is bypassed. The refusal once came first, read by the
    client as the answer to its request, which had been stored meanwhile."""
    headers = signed_headers(gw, "PUT", f"/{bucket}/main/empty", **{"Content-Length": "0"})
    head = head_bytes("PUT", f"/{bucket}/main/empty", headers, host_of(gw))
    head = head.replace(b"Connection: close", b"Connection: keep-alive")
    answers = _answers(gw, head + after)
    assert [status for status, _ in answers] == [200, 400], answers
    assert error_code(answers[1][1]) == "InvalidRequest", answers
    assert gw.client().head_object(Bucket=bucket, Key="main/empty")["ContentLength"] == 0
