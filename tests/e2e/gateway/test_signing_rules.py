"""What a signature must cover, through real clients against the real gateway: `host` and every
x-amz-* header signed (S3's rule), a presigned URL's signed payload hash is the one checked,
SigV2 (on by default, refused when disabled) and its presigned URLs at most a week ahead."""

from __future__ import annotations

import base64
import hashlib
import hmac
from email.utils import formatdate
from typing import Any
from xml.etree import ElementTree

import pytest
import requests
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from tests.support.gateway_stack import GatewayStack

WEEK = 7 * 24 * 3600


def error(response: requests.Response) -> dict[str, str]:
    root = ElementTree.fromstring(response.content)
    return {child.tag: child.text or "" for child in root}


def missing(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        return exc.response["Error"]["Code"] in ("404", "NoSuchKey")
    return False


def _credentials(gw: GatewayStack) -> BotoCredentials:
    return BotoCredentials(gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value())


class _HostUnsigned(S3SigV4QueryAuth):
    """botocore's presigner, leaving `host` out of X-Amz-SignedHeaders."""

    def headers_to_sign(self, request: AWSRequest) -> Any:
        headers = super().headers_to_sign(request)
        del headers["host"]
        return headers


class _HostUnsignedHeader(S3SigV4Auth):
    """botocore's header signer, leaving `host` out of SignedHeaders."""

    def headers_to_sign(self, request: AWSRequest) -> Any:
        headers = super().headers_to_sign(request)
        del headers["host"]
        return headers


class _SignedPayloadHash(S3SigV4QueryAuth):
    """botocore's presigner with a signed X-Amz-Content-Sha256 (the URL carries it): only a
    body with that SHA-256 may be sent."""

    def __init__(self, credentials: BotoCredentials, region: str, payload_hash: str) -> None:
        super().__init__(credentials, "s3", region, expires=300)
        self._payload_hash = payload_hash

    def payload(self, request: AWSRequest) -> str:
        return self._payload_hash


def presigned(gw: GatewayStack, method: str, path: str, signer: S3SigV4QueryAuth) -> str:
    request = AWSRequest(method=method, url=f"{gw.endpoint}{path}")
    signer.add_auth(request)
    return str(request.url)


# --- unsigned x-amz-* headers ------------------------------------------------------------


def test_a_presigned_put_with_an_unsigned_copy_source_copies_nothing(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/secret", Body=b"only the signer may read this")
    url = gw.client().generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "main/drop"}, ExpiresIn=300)
    assert "X-Amz-Signature=" in url and "SignedHeaders=host" in url, url

    # The holder of the upload link turns it into a copy of an object the signer can read.
    response = requests.put(url, data=b"", headers={"x-amz-copy-source": f"/{bucket}/main/secret"}, timeout=30)
    assert response.status_code == 403, response.content
    body = error(response)
    assert body["Code"] == "AccessDenied"
    assert body["Message"] == "There were headers present in the request which were not signed"
    assert body["HeadersNotSigned"] == "x-amz-copy-source"
    assert missing(s3, bucket, "main/drop")

    # Nor may it add metadata, tags or a storage class the signer did not sign.
    response = requests.put(
        url, data=b"mine", headers={"x-amz-meta-owner": "mallory", "x-amz-tagging": "a=b"}, timeout=30
    )
    assert response.status_code == 403 and error(response)["HeadersNotSigned"] == "x-amz-meta-owner, x-amz-tagging"
    assert missing(s3, bucket, "main/drop")

    # The link itself works, for what it was signed for.
    assert requests.put(url, data=b"mine", timeout=30).status_code == 200
    assert s3.get_object(Bucket=bucket, Key="main/drop")["Body"].read() == b"mine"


def test_a_header_signature_must_cover_every_x_amz_header(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/secret", Body=b"secret")
    request = AWSRequest(method="PUT", url=f"{gw.endpoint}/{bucket}/main/c", data=b"body")
    S3SigV4Auth(_credentials(gw), "s3", gw.region).add_auth(request)
    prepared = request.prepare()
    headers = dict(prepared.headers) | {"x-amz-copy-source": f"/{bucket}/main/secret"}  # added after signing
    response = requests.put(prepared.url, data=prepared.body, headers=headers, timeout=30)
    assert response.status_code == 403 and error(response)["HeadersNotSigned"] == "x-amz-copy-source"
    assert missing(s3, bucket, "main/c")


def test_host_must_be_signed(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"data")
    # A presigned upload that signs its Content-Type but not the host it is meant for.
    request = AWSRequest(method="PUT", url=f"{gw.endpoint}/{bucket}/main/up", headers={"Content-Type": "text/plain"})
    _HostUnsigned(_credentials(gw), "s3", gw.region, expires=300).add_auth(request)
    assert "X-Amz-SignedHeaders=content-type&" in request.url, request.url
    response = requests.put(request.url, data=b"x", headers={"Content-Type": "text/plain"}, timeout=30)
    assert response.status_code == 403, response.content
    assert error(response)["Code"] == "AccessDenied" and error(response)["HeadersNotSigned"] == "host"
    assert missing(s3, bucket, "main/up")
    # Signing nothing at all: S3's answer names host too.
    url = presigned(gw, "GET", f"/{bucket}/main/k", _HostUnsigned(_credentials(gw), "s3", gw.region, expires=300))
    assert "X-Amz-SignedHeaders=&" in url or url.endswith("X-Amz-SignedHeaders="), url
    response = requests.get(url, timeout=30)
    assert response.status_code == 403 and error(response)["HeadersNotSigned"] == "host"

    request = AWSRequest(method="GET", url=f"{gw.endpoint}/{bucket}/main/k")
    _HostUnsignedHeader(_credentials(gw), "s3", gw.region).add_auth(request)
    assert "host" not in request.headers["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    prepared = request.prepare()
    response = requests.get(prepared.url, headers=dict(prepared.headers), timeout=30)
    assert response.status_code == 403 and error(response)["HeadersNotSigned"] == "host"


# --- the payload hash a presigned URL signs ------------------------------------------------


def test_a_presigned_urls_signed_payload_hash_is_checked(gw: GatewayStack, s3: Any, bucket: str) -> None:
    agreed = b"the body the signer agreed to"
    digest = hashlib.sha256(agreed).hexdigest()
    signer = _SignedPayloadHash(_credentials(gw), gw.region, digest)
    url = presigned(gw, "PUT", f"/{bucket}/main/p?X-Amz-Content-Sha256={digest}", signer)

    # Another body is refused, however the sender describes it.
    response = requests.put(url, data=b"something else", timeout=30)
    assert response.status_code == 400 and error(response)["Code"] == "XAmzContentSHA256Mismatch", response.content
    response = requests.put(
        url, data=b"something else", headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}, timeout=30
    )
    assert response.status_code == 400 and error(response)["Code"] == "InvalidRequest", response.content
    assert missing(s3, bucket, "main/p")

    assert requests.put(url, data=agreed, timeout=30).status_code == 200
    assert s3.get_object(Bucket=bucket, Key="main/p")["Body"].read() == agreed


# --- the credential scope's service --------------------------------------------------------


@pytest.mark.parametrize("service", ["iam", "sts", "S3"])
def test_a_signature_scoped_to_another_service_is_refused(gw: GatewayStack, s3: Any, bucket: str, service: str) -> None:
    """A signature whose credential scope names another service is not an S3 signature: S3
    answers 400 AuthorizationHeaderMalformed (header) or AuthorizationQueryParametersError
    (presigned URL), naming the service it expected."""
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"data")
    url = f"{gw.endpoint}/{bucket}/main/k"
    request = AWSRequest(method="GET", url=url)
    S3SigV4Auth(_credentials(gw), service, gw.region).add_auth(request)
    assert f"/{gw.region}/{service}/aws4_request" in request.headers["Authorization"]
    prepared = request.prepare()
    response = requests.get(prepared.url, headers=dict(prepared.headers), timeout=30)
    assert response.status_code == 400, response.content
    assert error(response)["Code"] == "AuthorizationHeaderMalformed"
    assert f'incorrect service "{service}". This endpoint belongs to "s3".' in error(response)["Message"]

    signed = presigned(gw, "GET", f"/{bucket}/main/k", S3SigV4QueryAuth(_credentials(gw), service, gw.region, 300))
    response = requests.get(signed, timeout=30)
    assert response.status_code == 400, response.content
    assert error(response)["Code"] == "AuthorizationQueryParametersError"
    assert error(response)["Message"].startswith("Error parsing the X-Amz-Credential parameter; incorrect service")

    # The same requests scoped to s3 are fine.
    request = AWSRequest(method="GET", url=url)
    S3SigV4Auth(_credentials(gw), "s3", gw.region).add_auth(request)
    prepared = request.prepare()
    assert requests.get(prepared.url, headers=dict(prepared.headers), timeout=30).content == b"data"
    signed = presigned(gw, "GET", f"/{bucket}/main/k", S3SigV4QueryAuth(_credentials(gw), "s3", gw.region, 300))
    assert requests.get(signed, timeout=30).content == b"data"


# --- SigV2 -------------------------------------------------------------------------------


def test_sigv2_is_refused_when_disabled(gw_eu_sigv4_only: GatewayStack, s3: Any, bucket: str) -> None:
    """gateways.s3.sigv2_enabled: false: S3's answer for a SigV4-only region, naming the key
    that turns SigV2 on, for the header and the presigned form alike; SigV4 still works."""
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"data")
    v2 = gw_eu_sigv4_only.client(signature_version="s3")
    with pytest.raises(ClientError) as exc:
        v2.get_object(Bucket=bucket, Key="main/k")
    assert exc.value.response["Error"]["Code"] == "InvalidRequest"
    assert "AWS4-HMAC-SHA256" in exc.value.response["Error"]["Message"]
    assert "gateways.s3.sigv2_enabled" in exc.value.response["Error"]["Message"]
    url = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/k"}, ExpiresIn=60)
    assert "AWSAccessKeyId=" in url
    response = requests.get(url, timeout=30)
    assert response.status_code == 400 and error(response)["Code"] == "InvalidRequest"
    assert "gateways.s3.sigv2_enabled" in error(response)["Message"]
    v4 = gw_eu_sigv4_only.client()
    assert v4.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"data"


def test_sigv2_presigned_urls_last_at_most_a_week(gw: GatewayStack) -> None:
    admin = gw.client()
    admin.create_bucket(Bucket="sigv2-expiry")
    admin.put_object(Bucket="sigv2-expiry", Key="main/k", Body=b"data")
    v2 = gw.client(signature_version="s3")
    assert v2.get_object(Bucket="sigv2-expiry", Key="main/k")["Body"].read() == b"data"
    params = {"Bucket": "sigv2-expiry", "Key": "main/k"}

    week = v2.generate_presigned_url("get_object", Params=params, ExpiresIn=WEEK - 60)
    assert requests.get(week, timeout=30).content == b"data"
    for too_long in (WEEK + 3600, 100 * 365 * 24 * 3600):
        url = v2.generate_presigned_url("get_object", Params=params, ExpiresIn=too_long)
        response = requests.get(url, timeout=30)
        assert response.status_code == 403 and error(response)["Code"] == "AccessDenied", response.content


def _v2_header(gw: GatewayStack, string_to_sign: str) -> str:
    secret = gw.admin.secret_access_key.get_secret_value().encode()
    signature = base64.b64encode(hmac.new(secret, string_to_sign.encode(), hashlib.sha1).digest()).decode()
    return f"AWS {gw.admin.access_key_id}:{signature}"


def test_a_sigv2_header_signature_must_cover_its_time(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """The Date line may be left empty only when x-amz-date is signed instead (S3's rule): a
    signature over no time at all would pass with any fresh Date sent beside it, for ever."""
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"data")
    url = f"{gw.endpoint}/{bucket}/main/k"
    now = formatdate(usegmt=True)
    timeless = {"Authorization": _v2_header(gw, f"GET\n\n\n\n/{bucket}/main/k"), "Date": now}
    response = requests.get(url, headers=timeless, timeout=30)
    assert response.status_code == 403 and error(response)["Code"] == "SignatureDoesNotMatch", response.content
    signed_amz_date = {
        "Authorization": _v2_header(gw, f"GET\n\n\n\nx-amz-date:{now}\n/{bucket}/main/k"),
        "x-amz-date": now,
    }
    assert requests.get(url, headers=signed_amz_date, timeout=30).content == b"data"
    with_date = {"Authorization": _v2_header(gw, f"GET\n\n\n{now}\n/{bucket}/main/k"), "Date": now}
    assert requests.get(url, headers=with_date, timeout=30).content == b"data"
