"""SigV4 verification against the worked examples in AWS's S3 documentation
("Signature Calculations for the Authorization Header" and "Transferring Payload in
Multiple Chunks"), so the implementation is checked against AWS rather than against itself."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import pytest

from edge.core import sigv4
from edge.gateway.errors import S3Error
from edge.gateway.request import Body, Request, parse_query

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
WHEN = datetime(2013, 5, 24, 0, 0, 30, tzinfo=UTC)


async def _nothing() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def request(method: str, path: str, headers: dict[str, str], query: str = "") -> Request:
    return Request(method, path, query, parse_query(query), headers, headers.get("host", ""), Body(_nothing))


def signing_key(secret: str, claim: sigv4.V4Request) -> bytes:
    """AWS's derived key of the claim's scope; auth computes it (services/auth/signatures.py)."""
    key = ("AWS4" + secret).encode()
    for part in (claim.date, claim.region, claim.service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def verify(req: Request, claim: sigv4.V4Request, secret: str, now: datetime) -> bytes:
    """The gateway's checks with the key auth would return for secret."""
    sigv4.check_claim(claim, "us-east-1", now, 900)
    key = signing_key(secret, claim)
    if not sigv4.signature_matches(key, sigv4.strings_to_sign(req, claim), claim.signature):
        raise S3Error("SignatureDoesNotMatch")
    return key


def authorization(signed: str, signature: str) -> str:
    credential = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
    return f"AWS4-HMAC-SHA256 Credential={credential},SignedHeaders={signed},Signature={signature}"


def test_get_object_example() -> None:
    headers = {
        "host": "examplebucket.s3.amazonaws.com",
        "range": "bytes=0-9",
        "x-amz-content-sha256": sigv4.EMPTY_SHA256,
        "x-amz-date": "20130524T000000Z",
    }
    headers["authorization"] = authorization(
        "host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )
    req = request("GET", "/test.txt", headers)
    claim = sigv4.parse_header(req)
    verify(req, claim, SECRET, WHEN)
    with pytest.raises(S3Error) as exc:
        verify(req, claim, SECRET[:-1] + "X", WHEN)
    assert exc.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error) as exc:
        verify(req, claim, SECRET, datetime(2013, 5, 24, 0, 16, tzinfo=UTC))
    assert exc.value.code == "RequestTimeTooSkewed"


def test_streaming_put_example_seed_and_first_chunk() -> None:
    headers = {
        "host": "s3.amazonaws.com",
        "content-encoding": "aws-chunked",
        "content-length": "66824",
        "x-amz-content-sha256": sigv4.STREAMING,
        "x-amz-date": "20130524T000000Z",
        "x-amz-decoded-content-length": "66560",
        "x-amz-storage-class": "REDUCED_REDUNDANCY",
    }
    seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    headers["authorization"] = authorization(
        "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
        "x-amz-decoded-content-length;x-amz-storage-class",
        seed,
    )
    req = request("PUT", "/examplebucket/chunkObject.txt", headers)
    claim = sigv4.parse_header(req)
    key = verify(req, claim, SECRET, WHEN)
    first = sigv4.chunk_signature(key, claim, seed, hashlib.sha256(b"a" * 65536).hexdigest())
    assert first == "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
