"""Authentication at the gateway: SigV4 header and presigned, SigV2, aws-chunked uploads with
chunk signatures, UNSIGNED-PAYLOAD, clock skew, and per-operation authorization."""

from __future__ import annotations

import datetime
import hashlib
import hmac
from typing import Any
from unittest import mock

import pytest
import requests
from botocore.auth import HmacV1QueryAuth, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from tests.support.gateway_stack import GatewayStack

STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


class _DeclaredPayload(S3SigV4Auth):
    """botocore's signer, declaring the x-amz-content-sha256 the test asks for."""

    def __init__(self, credentials: BotoCredentials, region: str, payload_hash: str) -> None:
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash

    def payload(self, request: AWSRequest) -> str:
        return self._payload_hash


def signed(
    gw: GatewayStack, method: str, path: str, payload_hash: str, body: bytes = b"", **headers: str
) -> AWSRequest:
    request = AWSRequest(method=method, url=f"{gw.endpoint}{path}", headers=headers, data=body)
    creds = BotoCredentials(gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value())
    _DeclaredPayload(creds, gw.region, payload_hash).add_auth(request)
    return request


def send(request: AWSRequest) -> requests.Response:
    prepared = request.prepare()
    return requests.request(
        prepared.method, prepared.url, headers=dict(prepared.headers), data=prepared.body, timeout=30
    )


def signing_key(secret: str, stamp: str, region: str) -> bytes:
    """SigV4's derived key for the day of stamp (yyyymmddThhmmssZ), region and s3."""
    key = ("AWS4" + secret).encode()
    for part in (stamp[:8], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def chunked_body(request: AWSRequest, secret: str, region: str, chunks: list[bytes], tamper: bool = False) -> bytes:
    """The aws-chunked body for a request signed with STREAMING-AWS4-HMAC-SHA256-PAYLOAD (AWS's documented scheme)."""
    stamp = request.context["timestamp"]
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    key = signing_key(secret, stamp, region)
    previous = request.headers["Authorization"].rsplit("Signature=", 1)[1]
    out = b""
    empty = hashlib.sha256(b"").hexdigest()
    for chunk in [*chunks, b""]:
        text = "\n".join(("AWS4-HMAC-SHA256-PAYLOAD", stamp, scope, previous, empty, hashlib.sha256(chunk).hexdigest()))
        signature = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        previous = signature
        if tamper and chunk:
            chunk = chunk[:-1] + b"!"
        out += f"{len(chunk):x};chunk-signature={signature}\r\n".encode() + chunk + b"\r\n"
    return out


def send_body(request: AWSRequest, body: bytes) -> requests.Response:
    """Send a request signed before its (streaming) body was known."""
    request.data = body
    request.headers["Content-Length"] = str(len(body))
    return send(request)


def check_signed_upload(
    response: requests.Response, s3: Any, bucket: str, key: str, data: bytes, tampered: bool
) -> None:
    """A tampered signed upload is refused and stores nothing; an intact one stores data."""
    if tampered:
        assert response.status_code == 403 and b"SignatureDoesNotMatch" in response.content
        with pytest.raises(ClientError):
            s3.head_object(Bucket=bucket, Key=key)
    else:
        assert response.status_code == 200, response.content
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_streaming_chunked_upload_verifies_every_chunk(gw: GatewayStack, s3: Any, bucket: str) -> None:
    chunks = [b"a" * 65536, b"b" * 65536, b"c" * 100]
    data = b"".join(chunks)
    for tamper, key in ((False, "good"), (True, "tampered")):
        headers = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))}
        request = signed(gw, "PUT", f"/{bucket}/main/{key}", STREAMING, b"", **headers)
        body = chunked_body(request, gw.admin.secret_access_key.get_secret_value(), gw.region, chunks, tamper)
        check_signed_upload(send_body(request, body), s3, bucket, f"main/{key}", data, tamper)


def test_unsigned_payload_and_payload_hash(gw: GatewayStack, s3: Any, bucket: str) -> None:
    request = signed(gw, "PUT", f"/{bucket}/main/u", "UNSIGNED-PAYLOAD", b"unsigned")
    assert send(request).status_code == 200
    assert s3.get_object(Bucket=bucket, Key="main/u")["Body"].read() == b"unsigned"
    wrong = hashlib.sha256(b"other").hexdigest()
    request = signed(gw, "PUT", f"/{bucket}/main/w", wrong, b"payload")
    response = send(request)
    assert response.status_code == 400 and b"XAmzContentSHA256Mismatch" in response.content


def test_sigv2_with_boto3(gw: GatewayStack, bucket: str) -> None:
    v2 = gw.client(signature_version="s3")  # SigV2 in the Authorization header: AWS key:signature
    v2.put_object(Bucket=bucket, Key="main/v2 key", Body=b"two", Metadata={"m": "1"})
    assert v2.get_object(Bucket=bucket, Key="main/v2 key")["Body"].read() == b"two"
    assert [o["Key"] for o in v2.list_objects(Bucket=bucket, Prefix="main/")["Contents"]] == ["main/v2 key"]
    url = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/v2 key"}, ExpiresIn=60)
    assert requests.get(url, timeout=30).content == b"two"


def test_boto3_default_presigned_urls(gw: GatewayStack, bucket: str) -> None:
    """boto3 with no signature configuration: botocore signs requests with SigV4 but presigns
    with SigV2 (AWSAccessKeyId, Signature, Expires) against a custom endpoint; both work as
    they are, downloads and uploads alike."""
    default = gw.client(signature_version=None)
    default.put_object(Bucket=bucket, Key="main/d", Body=b"default")
    params = {"Bucket": bucket, "Key": "main/d"}
    url = default.generate_presigned_url("get_object", Params=params, ExpiresIn=60)
    assert "AWSAccessKeyId=" in url and "Signature=" in url and "Expires=" in url, url
    assert requests.get(url, timeout=30).content == b"default"
    upload = default.generate_presigned_url("put_object", Params={**params, "Key": "main/up"}, ExpiresIn=60)
    assert requests.put(upload, data=b"uploaded", timeout=30).status_code == 200
    assert default.get_object(Bucket=bucket, Key="main/up")["Body"].read() == b"uploaded"
    v4 = gw.client(signature_version="s3v4").generate_presigned_url("get_object", Params=params, ExpiresIn=60)
    assert "X-Amz-Signature=" in v4 and requests.get(v4, timeout=30).content == b"default"


@pytest.mark.parametrize("version", ["s3", "s3v4"])
def test_an_expired_presigned_url_is_access_denied(gw: GatewayStack, bucket: str, version: str) -> None:
    """A URL signed to expire in a minute, used an hour later (rather than waiting for a fresh
    one to expire): 403 AccessDenied, as S3 answers, in both signature versions."""
    client = gw.client(signature_version=version)
    client.put_object(Bucket=bucket, Key="main/e", Body=b"x")
    params = {"Bucket": bucket, "Key": "main/e"}
    an_hour_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    if version == "s3":  # SigV2 signs the epoch second the URL expires at
        expired = str(int(an_hour_ago.timestamp()) + 60)
        with mock.patch.object(HmacV1QueryAuth, "_get_date", return_value=expired):
            url = client.generate_presigned_url("get_object", Params=params, ExpiresIn=60)
        assert f"Expires={expired}" in url
    else:  # SigV4 signs when it was signed and for how long
        with mock.patch("botocore.auth.get_current_datetime", return_value=an_hour_ago):
            url = client.generate_presigned_url("get_object", Params=params, ExpiresIn=60)
        assert "X-Amz-Expires=60" in url
    response = requests.get(url, timeout=30)
    assert response.status_code == 403 and b"<Code>AccessDenied</Code>" in response.content
    assert b"Request has expired" in response.content


def test_clock_skew_of_more_than_15_minutes_is_refused(gw: GatewayStack, bucket: str) -> None:
    client = gw.client()
    for minutes, ok in ((-14, True), (-16, False), (16, False)):
        when = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(minutes=minutes)
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            if ok:
                client.head_bucket(Bucket=bucket)
                continue
            with pytest.raises(ClientError) as exc:
                client.list_objects_v2(Bucket=bucket)
            assert code(exc) == "RequestTimeTooSkewed"


def test_each_operation_is_authorized(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/r", Body=b"readable")
    reader = gw.client(gw.reader)
    assert reader.get_object(Bucket=bucket, Key="main/r")["Body"].read() == b"readable"
    reader.list_objects_v2(Bucket=bucket)
    for call in (
        lambda: reader.put_object(Bucket=bucket, Key="main/w", Body=b"x"),
        lambda: reader.delete_object(Bucket=bucket, Key="main/r"),
        lambda: reader.create_multipart_upload(Bucket=bucket, Key="main/m"),
        lambda: reader.create_bucket(Bucket=bucket + "-new"),
        lambda: reader.delete_bucket(Bucket=bucket),
        lambda: reader.copy_object(Bucket=bucket, Key="main/c", CopySource=f"{bucket}/main/r"),
    ):
        with pytest.raises(ClientError) as exc:
            call()
        assert code(exc) == "AccessDenied"
