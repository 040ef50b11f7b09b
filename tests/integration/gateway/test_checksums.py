"""S3 additional checksums at the gateway: value headers, aws-chunked trailers (unsigned and
signed), server-computed checksums, GET/HEAD with x-amz-checksum-mode, parts and copies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib
from typing import Any

import google_crc32c
import pytest
import requests
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from tests.integration.gateway.test_auth import (
    STREAMING,
    check_signed_upload,
    chunked_body,
    code,
    send,
    send_body,
    signed,
    signing_key,
)
from tests.support.gateway_stack import GatewayStack

DATA = b"checksummed bytes " * 1000


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def expected(algorithm: str, data: bytes) -> str:
    if algorithm == "CRC32":
        return b64(zlib.crc32(data).to_bytes(4, "big"))
    if algorithm == "CRC32C":
        return b64(google_crc32c.value(data).to_bytes(4, "big"))
    return b64(hashlib.new(algorithm.lower(), data).digest())


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "SHA1", "SHA256"])
def test_a_checksum_is_verified_stored_and_returned(s3: Any, bucket: str, algorithm: str) -> None:
    key = f"main/{algorithm.lower()}"
    if algorithm == "CRC32C":  # botocore computes CRC32C only with awscrt: send the value
        put = s3.put_object(Bucket=bucket, Key=key, Body=DATA, ChecksumCRC32C=expected(algorithm, DATA))
    else:
        put = s3.put_object(Bucket=bucket, Key=key, Body=DATA, ChecksumAlgorithm=algorithm)
    assert put[f"Checksum{algorithm}"] == expected(algorithm, DATA)

    # boto3 validates the returned checksum against the bytes it reads.
    got = s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == expected(algorithm, DATA)
    assert got["Body"].read() == DATA
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == expected(algorithm, DATA)

    # A range is not the whole object: no whole-object checksum comes with it.
    ranged = s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-9", ChecksumMode="ENABLED")
    assert ranged["Body"].read() == DATA[:10]
    assert f"Checksum{algorithm}" not in ranged


def test_a_wrong_checksum_is_bad_digest_and_stores_nothing(s3: Any, bucket: str) -> None:
    wrong = expected("CRC32", b"other bytes")
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="main/wrong", Body=DATA, ChecksumCRC32=wrong)
    assert code(caught) == "BadDigest"
    assert "CRC32" in caught.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="main/wrong")
    assert missing.value.response["Error"]["Code"] == "404"


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({"x-amz-checksum-crc32": "not base64!"}, b"x-amz-checksum-crc32"),
        ({"x-amz-checksum-sha256": b64(b"short")}, b"x-amz-checksum-sha256"),
        ({"x-amz-checksum-crc64nvme": b64(bytes(8))}, b"CRC64NVME"),
        ({"x-amz-checksum-md4": b64(bytes(16))}, b"x-amz-checksum-md4"),
        ({"x-amz-checksum-crc32": b64(bytes(4)), "x-amz-checksum-sha1": b64(bytes(20))}, b"single"),
        ({"x-amz-sdk-checksum-algorithm": "SHA1", "x-amz-checksum-crc32": b64(bytes(4))}, b"differ"),
        ({"x-amz-trailer": "x-amz-checksum-crc32"}, b"aws-chunked"),
    ],
)
def test_malformed_checksum_requests_are_invalid(
    gw: GatewayStack, s3: Any, bucket: str, headers: dict[str, str], fragment: bytes
) -> None:
    request = signed(gw, "PUT", f"/{bucket}/main/malformed", "UNSIGNED-PAYLOAD", b"data", **headers)
    response = send(request)
    assert response.status_code == 400 and b"<Code>InvalidRequest</Code>" in response.content
    assert fragment in response.content
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/malformed")


def test_the_server_computes_a_checksum_it_is_asked_for(gw: GatewayStack, s3: Any, bucket: str) -> None:
    request = signed(
        gw, "PUT", f"/{bucket}/main/computed", "UNSIGNED-PAYLOAD", DATA, **{"x-amz-sdk-checksum-algorithm": "SHA256"}
    )
    response = send(request)
    assert response.status_code == 200, response.content
    assert response.headers["x-amz-checksum-sha256"] == expected("SHA256", DATA)
    head = s3.head_object(Bucket=bucket, Key="main/computed", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == expected("SHA256", DATA)


def unsigned_trailer_body(chunks: list[bytes], trailers: dict[str, str]) -> bytes:
    out = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks) + b"0\r\n"
    return out + b"".join(f"{k}:{v}\r\n".encode() for k, v in trailers.items()) + b"\r\n"


def put_with_unsigned_trailer(gw: GatewayStack, path: str, body: bytes, trailer: str) -> requests.Response:
    headers = {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(DATA)),
        "x-amz-trailer": trailer,
    }
    return send(signed(gw, "PUT", path, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", body, **headers))


@pytest.mark.parametrize("correct", [True, False])
def test_unsigned_trailer_checksum(gw: GatewayStack, s3: Any, bucket: str, correct: bool) -> None:
    chunks = [DATA[:7000], DATA[7000:]]
    value = expected("CRC32C", DATA if correct else b"tampered")
    body = unsigned_trailer_body(chunks, {"x-amz-checksum-crc32c": value})
    key = f"main/unsigned-trailer-{correct}"
    response = put_with_unsigned_trailer(gw, f"/{bucket}/{key}", body, "x-amz-checksum-crc32c")
    if correct:
        assert response.status_code == 200, response.content
        assert response.headers["x-amz-checksum-crc32c"] == value
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == DATA
    else:
        assert response.status_code == 400 and b"BadDigest" in response.content
        with pytest.raises(ClientError):
            s3.head_object(Bucket=bucket, Key=key)


def test_a_trailer_announced_but_missing_is_refused(gw: GatewayStack, s3: Any, bucket: str) -> None:
    body = unsigned_trailer_body([DATA], {})
    response = put_with_unsigned_trailer(gw, f"/{bucket}/main/no-trailer", body, "x-amz-checksum-crc32")
    assert response.status_code == 400 and b"InvalidRequest" in response.content
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/no-trailer")


def signed_trailer_body(
    request: AWSRequest, secret: str, region: str, chunks: list[bytes], value: str, tamper: bool
) -> bytes:
    """AWS's STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER body: signed chunks, then the trailer
    and its signature, chained from the final chunk's signature."""
    body = chunked_body(request, secret, region, chunks)
    final_signature = body.rsplit(b"chunk-signature=", 1)[1].split(b"\r\n", 1)[0].decode()
    stamp = request.context["timestamp"]
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    key = signing_key(secret, stamp, region)
    canonical = f"x-amz-checksum-crc32:{value}\n"
    text = "\n".join(
        ("AWS4-HMAC-SHA256-TRAILER", stamp, scope, final_signature, hashlib.sha256(canonical.encode()).hexdigest())
    )
    signature = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    if tamper:
        signature = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    trailer = f"x-amz-checksum-crc32:{value}\r\nx-amz-trailer-signature:{signature}\r\n\r\n"
    return body[: -len(b"\r\n")] + trailer.encode()  # the final chunk's empty data CRLF makes way


@pytest.mark.parametrize("tamper", [False, True])
def test_signed_trailer_checksum_and_signature(gw: GatewayStack, s3: Any, bucket: str, tamper: bool) -> None:
    chunks = [DATA[:9000], DATA[9000:]]
    key = f"main/signed-trailer-{tamper}"
    headers = {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(DATA)),
        "x-amz-trailer": "x-amz-checksum-crc32",
    }
    request = signed(gw, "PUT", f"/{bucket}/{key}", STREAMING + "-TRAILER", b"", **headers)
    secret = gw.admin.secret_access_key.get_secret_value()
    body = signed_trailer_body(request, secret, gw.region, chunks, expected("CRC32", DATA), tamper)
    check_signed_upload(send_body(request, body), s3, bucket, key, DATA, tamper)


def test_parts_are_verified_and_copies_keep_the_checksum(s3: Any, bucket: str) -> None:
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/mp")["UploadId"]
    part = b"p" * (5 * 1024 * 1024)
    with pytest.raises(ClientError) as caught:
        s3.upload_part(
            Bucket=bucket, Key="main/mp", UploadId=upload, PartNumber=1, Body=part, ChecksumSHA1=expected("SHA1", b"x")
        )
    assert code(caught) == "BadDigest"
    done = s3.upload_part(
        Bucket=bucket, Key="main/mp", UploadId=upload, PartNumber=1, Body=part, ChecksumAlgorithm="SHA1"
    )
    assert done["ChecksumSHA1"] == expected("SHA1", part)
    s3.abort_multipart_upload(Bucket=bucket, Key="main/mp", UploadId=upload)

    s3.put_object(Bucket=bucket, Key="main/src", Body=DATA, ChecksumAlgorithm="SHA256")
    s3.copy_object(
        Bucket=bucket,
        Key="main/copy",
        CopySource={"Bucket": bucket, "Key": "main/src"},
        MetadataDirective="REPLACE",
        Metadata={"new": "metadata"},
    )
    head = s3.head_object(Bucket=bucket, Key="main/copy", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == expected("SHA256", DATA)
    assert head["Metadata"] == {"new": "metadata"}


def test_a_multipart_upload_with_a_checksum_algorithm(s3: Any, bucket: str) -> None:
    key = "main/mp-sha256"
    created = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")
    upload = created["UploadId"]
    assert created["ChecksumAlgorithm"] == "SHA256"
    parts = [b"1" * (5 * 1024 * 1024), b"2" * 1000]
    with pytest.raises(ClientError) as caught:
        s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=parts[0], ChecksumAlgorithm="SHA1")
    assert code(caught) == "InvalidRequest" and "mismatch" in caught.value.response["Error"]["Message"]
    done = []
    for number, data in enumerate(parts, 1):
        answer = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data, ChecksumAlgorithm="SHA256"
        )
        assert answer["ChecksumSHA256"] == expected("SHA256", data)
        done.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA256": answer["ChecksumSHA256"]})
    listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=upload)["Parts"]
    assert [p["ChecksumSHA256"] for p in listed] == [expected("SHA256", d) for d in parts]

    wrong = [done[0], {**done[1], "ChecksumSHA256": expected("SHA256", b"other")}]
    with pytest.raises(ClientError) as caught:
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": wrong})
    assert code(caught) == "InvalidPart"

    completed = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done})
    joined = b"".join(base64.b64decode(expected("SHA256", d)) for d in parts)
    composite = f"{b64(hashlib.sha256(joined).digest())}-2"
    assert completed["ChecksumSHA256"] == composite
    got = s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == composite and got["ChecksumType"] == "COMPOSITE"
    assert got["Body"].read() == b"".join(parts)
