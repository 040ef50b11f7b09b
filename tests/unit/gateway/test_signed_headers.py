"""S3's rule on what a SigV4 signature must cover, decided before any secret is looked up:
`host` and every x-amz-* header (x-amz-content-sha256 alone excepted), and for a presigned URL
no x-amz-content-sha256 header that contradicts its signed X-Amz-Content-Sha256."""

from __future__ import annotations

from typing import Any

import pytest

from edge.core import sigv4
from edge.gateway.errors import S3Error
from edge.gateway.request import Body, Request, parse_query

CREDENTIAL = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"


async def _nothing() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def request(headers: dict[str, str], query: str = "") -> Request:
    headers = {"host": "gateway", **headers}
    return Request("PUT", "/b/main/k", query, parse_query(query), headers, "gateway", Body(_nothing))


def header_auth(signed: str, **headers: str) -> Request:
    authorization = f"AWS4-HMAC-SHA256 Credential={CREDENTIAL},SignedHeaders={signed},Signature=00"
    base = {"authorization": authorization, "x-amz-date": "20130524T000000Z", "x-amz-content-sha256": sigv4.UNSIGNED}
    return request(base | headers)


def presigned(signed: str, headers: dict[str, str], extra_query: str = "") -> Request:
    query = (
        f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={CREDENTIAL}&X-Amz-Date=20130524T000000Z"
        f"&X-Amz-Expires=60&X-Amz-SignedHeaders={signed}&X-Amz-Signature=00{extra_query}"
    )
    return request(headers, query)


def not_signed(parse: Any, req: Request) -> str:
    with pytest.raises(S3Error) as exc:
        parse(req)
    assert exc.value.code == "AccessDenied" and exc.value.message == sigv4.NOT_SIGNED_MESSAGE
    return exc.value.extra["HeadersNotSigned"]


def test_every_x_amz_header_must_be_signed() -> None:
    assert sigv4.parse_header(header_auth("host;x-amz-content-sha256;x-amz-date")).signed_headers
    # x-amz-content-sha256 is the payload hash line of the canonical request: bound anyway.
    assert sigv4.parse_header(header_auth("host;x-amz-date"))
    req = header_auth("host;x-amz-date", **{"x-amz-copy-source": "/b/main/secret", "x-amz-meta-a": "1"})
    assert not_signed(sigv4.parse_header, req) == "x-amz-copy-source, x-amz-meta-a"
    # Lookalikes are not x-amz-* headers (X-Amzn-Trace-Id is left unsigned by every SDK).
    assert sigv4.parse_header(header_auth("host;x-amz-date", **{"x-amzn-trace-id": "Root=1"}))


def test_host_must_be_signed() -> None:
    assert not_signed(sigv4.parse_header, header_auth("x-amz-content-sha256;x-amz-date")) == "host"
    assert not_signed(sigv4.parse_query, presigned("", {})) == "host"
    assert not_signed(sigv4.parse_query, presigned("content-type", {"content-type": "a/b"})) == "host"
    # Names are compared as header names: case does not matter.
    assert sigv4.parse_query(presigned("Host", {})).presigned


def test_presigned_urls_refuse_unsigned_x_amz_headers() -> None:
    assert not_signed(sigv4.parse_query, presigned("host", {"x-amz-copy-source": "/b/main/secret"})) == (
        "x-amz-copy-source"
    )
    assert not_signed(sigv4.parse_query, presigned("host", {"x-amz-decoded-content-length": "1"})) == (
        "x-amz-decoded-content-length"
    )
    claim = sigv4.parse_query(presigned("host;x-amz-meta-a", {"x-amz-meta-a": "1"}))
    assert claim.signed_headers == ["host", "x-amz-meta-a"]


def test_a_presigned_urls_payload_hash_is_the_signed_one() -> None:
    digest = "a" * 64
    assert sigv4.parse_query(presigned("host", {})).payload_hash == sigv4.UNSIGNED
    signed = presigned("host", {}, f"&X-Amz-Content-Sha256={digest}")
    assert sigv4.parse_query(signed).payload_hash == digest
    # A header may repeat the signed value, never replace it.
    same = presigned("host", {"x-amz-content-sha256": digest}, f"&X-Amz-Content-Sha256={digest}")
    assert sigv4.parse_query(same).payload_hash == digest
    for header in (sigv4.UNSIGNED, sigv4.STREAMING_UNSIGNED_TRAILER, "b" * 64):
        tampered = presigned("host", {"x-amz-content-sha256": header}, f"&X-Amz-Content-Sha256={digest}")
        with pytest.raises(S3Error) as exc:
            sigv4.parse_query(tampered)
        assert exc.value.code == "InvalidRequest"
    with pytest.raises(S3Error):
        sigv4.parse_query(presigned("host", {"x-amz-content-sha256": sigv4.STREAMING_UNSIGNED_TRAILER}))
