"""S3 additional checksums at the gateway: value headers, aws-chunked trailers (unsigned and
signed), server-computed checksums, GET/HEAD with x-amz-checksum-mode, parts and copies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib
from typing import Any

import anycrc
import google_crc32c
import pytest
import requests
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from silt.graveler.v1 import graveler_pb2 as api
from tests.e2e.gateway.test_auth import (
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


def crc64nvme(data: bytes) -> int:
    """CRC-64/NVME bit by bit, as the RevEng catalogue defines it: a reference the gateway's own
    (table-driven) computation is checked against."""
    crc = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x9A6C9329AC4BC9B5 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def expected(algorithm: str, data: bytes) -> str:
    if algorithm == "CRC32":
        return b64(zlib.crc32(data).to_bytes(4, "big"))
    if algorithm == "CRC32C":
        return b64(google_crc32c.value(data).to_bytes(4, "big"))
    if algorithm == "CRC64NVME":
        return b64(crc64nvme(data).to_bytes(8, "big"))
    return b64(hashlib.new(algorithm.lower(), data).digest())


def test_the_crc64nvme_reference_is_the_catalogued_one() -> None:
    assert crc64nvme(b"123456789") == 0xAE8B14860A799888


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_a_checksum_is_verified_stored_and_returned(s3: Any, bucket: str, algorithm: str) -> None:
    key = f"main/{algorithm.lower()}"
    if algorithm in ("CRC32C", "CRC64NVME"):  # botocore computes these only with awscrt: send the value
        put = s3.put_object(Bucket=bucket, Key=key, Body=DATA, **{f"Checksum{algorithm}": expected(algorithm, DATA)})
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
        ({"x-amz-checksum-crc64nvme": b64(bytes(4))}, b"x-amz-checksum-crc64nvme"),  # 8 bytes, not 4
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


def test_a_checksum_is_neither_user_metadata_nor_a_change(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """boto3's default (request_checksum_calculation when_supported) sends a CRC32 with every
    upload; an older tool sends none. The same bytes from both are the same object: no user
    metadata either way, and no change in a diff."""
    sending = gw.client()
    checksums_seen: list[str] = []
    sending.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: checksums_seen.extend(k.lower() for k in request.headers if "checksum" in k.lower()),
    )
    sending.put_object(Bucket=bucket, Key="main/same", Body=DATA, Metadata={"owner": "me"})
    assert any(name.startswith("x-amz-checksum-crc32") or name == "x-amz-trailer" for name in checksums_seen)
    head = s3.head_object(Bucket=bucket, Key="main/same", ChecksumMode="ENABLED")
    assert head["Metadata"] == {"owner": "me"}
    assert head["ChecksumCRC32"] == expected("CRC32", DATA)
    # Kept under Silt's own key, beside (not among) the user metadata.
    entry = gw.graveler.StatEntry(api.StatEntryRequest(repository=bucket, ref="main", key="same")).entry
    assert dict(entry.metadata) == {"x-amz-meta-owner": "me", "x-silt-checksum-crc32": expected("CRC32", DATA)}
    gw.graveler.Commit(api.CommitRequest(repository=bucket, branch="main", message="with a checksum"))

    quiet = gw.client(request_checksum_calculation="when_required")
    sent: list[str] = []
    quiet.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: sent.extend(k.lower() for k in request.headers if "checksum" in k.lower()),
    )
    quiet.put_object(Bucket=bucket, Key="main/same", Body=DATA, Metadata={"owner": "me"})
    assert sent == []
    assert s3.head_object(Bucket=bucket, Key="main/same")["Metadata"] == {"owner": "me"}
    changes = gw.graveler.DiffBranch(api.DiffBranchRequest(repository=bucket, branch="main", amount=100))
    assert list(changes.items) == []


def _crc64_of_part(data: bytes) -> str:
    # Megabytes: computed by the library the gateway uses, which the single-object test above
    # checks against the bit-by-bit reference; what this test checks is how parts combine.
    return b64(int(anycrc.Model("CRC64-NVME").calc(data)).to_bytes(8, "big"))


def test_a_multipart_crc64nvme_is_of_the_whole_object(s3: Any, bucket: str) -> None:
    """S3 keeps CRC64NVME whole (FULL_OBJECT): a multipart object's value is the CRC of all its
    bytes, combined from its parts', where other algorithms compose the parts' checksums."""
    key = "main/mp-crc64"
    created = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="CRC64NVME")
    assert created["ChecksumType"] == "FULL_OBJECT"
    upload = created["UploadId"]
    parts = [b"1" * (5 * 1024 * 1024), b"tail of the object"]
    with pytest.raises(ClientError) as caught:
        wrong = expected("CRC64NVME", b"x")
        s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=parts[1], ChecksumCRC64NVME=wrong)
    assert code(caught) == "BadDigest"
    done = []
    for number, data in enumerate(parts, 1):
        value = _crc64_of_part(data)
        answer = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=data, ChecksumCRC64NVME=value
        )
        assert answer["ChecksumCRC64NVME"] == value
        done.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumCRC64NVME": value})
    completed = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done})
    whole = _crc64_of_part(b"".join(parts))
    assert completed["ChecksumCRC64NVME"] == whole and completed["ChecksumType"] == "FULL_OBJECT"
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    assert head["ChecksumCRC64NVME"] == whole and head["ChecksumType"] == "FULL_OBJECT"
