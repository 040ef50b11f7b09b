"""A request proves its sender one way, once: repeated credentials, credentials in the header and
the query at once, and repeated values a signature covers are refused with S3 XML errors,
through real sockets (http.client sends a header as often as it is given) against the real
gateway. Each refused request is otherwise validly signed, so without the rule it would pass."""

from __future__ import annotations

import hashlib
import http.client
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from tests.support.gateway_stack import GatewayStack

ONE_MECHANISM = (
    "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string "
    "parameter or the Authorization header should be specified"
)


class _PayloadAs(S3SigV4Auth):
    """botocore's header signer, signing `payload` as the x-amz-content-sha256 value."""

    def __init__(self, credentials: BotoCredentials, region: str, payload: str) -> None:
        super().__init__(credentials, "s3", region)
        self._payload = payload

    def payload(self, request: AWSRequest) -> str:
        return self._payload


def _credentials(gw: GatewayStack) -> BotoCredentials:
    return BotoCredentials(gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value())


def _signed(
    gw: GatewayStack, method: str, path: str, body: bytes = b"", signer: S3SigV4Auth | None = None, **headers: str
) -> AWSRequest:
    request = AWSRequest(method=method, url=f"{gw.endpoint}{path}", data=body, headers=headers)
    (signer or S3SigV4Auth(_credentials(gw), "s3", gw.region)).add_auth(request)
    return request


def _send(
    gw: GatewayStack, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes = b""
) -> tuple[int, dict[str, str]]:
    """Send exactly these headers, repeats included; the status and the error's fields."""
    url = urlsplit(gw.endpoint)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    try:
        connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        content = response.read()
    finally:
        connection.close()
    fields: dict[str, str] = {}
    if content.startswith(b"<?xml"):
        fields = {child.tag: child.text or "" for child in ElementTree.fromstring(content)}
    return response.status, fields


def _headers(request: AWSRequest) -> list[tuple[str, str]]:
    pairs = [(name, str(value)) for name, value in request.headers.items() if name.lower() != "content-length"]
    if not any(name.lower() == "host" for name, _ in pairs):
        pairs.insert(0, ("Host", urlsplit(request.url).netloc))
    return pairs


def _target(request: AWSRequest) -> str:
    parts = urlsplit(request.url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _invalid_argument(answer: tuple[int, dict[str, str]], argument: str) -> dict[str, str]:
    status, fields = answer
    assert status == 400, answer
    assert fields.get("Code") == "InvalidArgument", answer
    assert fields.get("ArgumentName") == argument, answer
    return fields


def _put_object(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v")


def test_a_second_authorization_header_is_refused(gw: GatewayStack, s3: Any, bucket: str) -> None:
    _put_object(s3, bucket)
    request = _signed(gw, "GET", f"/{bucket}/main/k")
    headers = _headers(request)
    assert _send(gw, "GET", _target(request), headers)[0] == 200  # the request itself is sound
    fields = _invalid_argument(
        _send(gw, "GET", _target(request), [*headers, ("Authorization", "garbage")]), "Authorization"
    )
    assert "Only one Authorization header" in fields["Message"]
    # The garbage first and the valid one second is refused the same way.
    valid = next(value for name, value in headers if name == "Authorization")
    reordered = [(n, v) for n, v in headers if n != "Authorization"] + [
        ("Authorization", "x"),
        ("Authorization", valid),
    ]
    _invalid_argument(_send(gw, "GET", _target(request), reordered), "Authorization")


def test_a_header_signature_with_query_credentials_is_refused(gw: GatewayStack, s3: Any, bucket: str) -> None:
    _put_object(s3, bucket)
    # The header signature covers the query, extra credentials included: only the rule refuses them.
    for query in ("X-Amz-Signature=garbage", "AWSAccessKeyId=AKIAEXAMPLE&Signature=garbage", "X-Amz-Algorithm=x"):
        request = _signed(gw, "GET", f"/{bucket}/main/k?{query}")
        fields = _invalid_argument(_send(gw, "GET", _target(request), _headers(request)), "Authorization")
        assert fields["Message"] == ONE_MECHANISM


def test_a_presigned_url_with_an_authorization_header_is_refused(gw: GatewayStack, s3: Any, bucket: str) -> None:
    _put_object(s3, bucket)
    request = AWSRequest(method="GET", url=f"{gw.endpoint}/{bucket}/main/k")
    S3SigV4QueryAuth(_credentials(gw), "s3", gw.region, expires=300).add_auth(request)
    host = [("Host", urlsplit(gw.endpoint).netloc)]
    assert _send(gw, "GET", _target(request), host)[0] == 200
    fields = _invalid_argument(_send(gw, "GET", _target(request), [*host, ("Authorization", "x")]), "Authorization")
    assert fields["Message"] == ONE_MECHANISM


def test_a_repeated_payload_hash_is_refused_not_joined(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """Joined, `UNSIGNED-PAYLOAD` and a hash would be a payload hash no body check reads: the
    body would be stored unchecked against the hash the second header claims."""
    body = b"what was sent"
    claimed = hashlib.sha256(b"something else").hexdigest()
    signer = _PayloadAs(_credentials(gw), gw.region, f"UNSIGNED-PAYLOAD,{claimed}")
    request = _signed(gw, "PUT", f"/{bucket}/main/joined", body, signer)
    headers = [(n, v) for n, v in _headers(request) if n.lower() != "x-amz-content-sha256"]
    headers += [("x-amz-content-sha256", "UNSIGNED-PAYLOAD"), ("x-amz-content-sha256", claimed)]
    _invalid_argument(_send(gw, "PUT", _target(request), headers, body), "x-amz-content-sha256")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/joined")["KeyCount"] == 0
    # Signed as one header, the same value is not a payload hash either.
    single = _headers(request)
    answer = _send(gw, "PUT", _target(request), single, body)
    assert _invalid_argument(answer, "x-amz-content-sha256")["Message"].startswith("x-amz-content-sha256 must be")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/joined")["KeyCount"] == 0


def test_repeated_host_and_date_are_refused(gw: GatewayStack, s3: Any, bucket: str) -> None:
    _put_object(s3, bucket)
    host = urlsplit(gw.endpoint).netloc
    # Signed over the joined value, as a signer that joined them would sign.
    request = _signed(gw, "GET", f"/{bucket}/main/k", Host=f"{host},{host}")
    headers = [(n, v) for n, v in _headers(request) if n.lower() != "host"] + [("Host", host), ("Host", host)]
    _invalid_argument(_send(gw, "GET", _target(request), headers), "host")
    request = _signed(gw, "GET", f"/{bucket}/main/k")
    date = next(v for n, v in _headers(request) if n.lower() == "x-amz-date")
    _invalid_argument(_send(gw, "GET", _target(request), [*_headers(request), ("X-Amz-Date", date)]), "x-amz-date")


def test_an_authorization_header_with_extra_components_is_malformed(gw: GatewayStack, s3: Any, bucket: str) -> None:
    _put_object(s3, bucket)
    request = _signed(gw, "GET", f"/{bucket}/main/k")
    headers = [(n, v + (", Extra=1" if n == "Authorization" else "")) for n, v in _headers(request)]
    status, fields = _send(gw, "GET", _target(request), headers)
    assert (status, fields.get("Code")) == (400, "AuthorizationHeaderMalformed"), (status, fields)
