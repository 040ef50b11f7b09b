"""Details S3 conformance suites check that SDKs hide: control characters in listed keys, a
Content-Encoding kept as sent, an empty continuation token echoed, and SigV2's date rules."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest
import requests
from botocore.auth import HmacV1Auth, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from tests.support.gateway_stack import GatewayStack

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def _credentials(gw: GatewayStack) -> BotoCredentials:
    return BotoCredentials(gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value())


def signed_get(gw: GatewayStack, path: str, params: dict[str, str]) -> requests.Response:
    """A SigV4-signed GET with exactly these query parameters (no SDK adds encoding-type)."""
    request = AWSRequest(method="GET", url=f"{gw.endpoint}{path}", params=params)
    S3SigV4Auth(_credentials(gw), "s3", gw.region).add_auth(request)
    prepared = request.prepare()
    return requests.get(prepared.url, headers=dict(prepared.headers), timeout=30)


def test_control_characters_in_keys_come_back_as_character_references(gw: GatewayStack, s3: Any, bucket: str) -> None:
    keys = ["ctl/a\x01b", "ctl/cr\rlf\nend", "ctl/tab\there"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=f"main/{key}", Body=b"x")
    response = signed_get(gw, f"/{bucket}", {"list-type": "2", "prefix": "main/ctl/"})
    assert response.status_code == 200, response.text
    body = response.content
    # No raw control character is in the document; each is a character reference.
    assert not any(b < 0x20 and b not in (0x0A,) for b in body.split(b"?>", 1)[1]), body
    assert b"a&#x1;b" in body and b"cr&#xD;lf&#xA;end" in body and b"tab&#x9;here" in body
    # The references that XML 1.0 allows parse back to the exact keys (a CR is not turned into LF).
    parsable = body.replace(b"&#x1;", b"")
    listed = [e.text for e in ElementTree.fromstring(parsable).iter(f"{NS}Key")]
    assert listed == sorted(["main/ctl/ab", "main/ctl/cr\rlf\nend", "main/ctl/tab\there"])
    # SDKs ask for encoding-type=url and get every key exactly.
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/ctl/")["Contents"]) == sorted(
        f"main/{k}" for k in keys
    )


def test_an_empty_continuation_token_is_echoed(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/a", Body=b"x")
    response = signed_get(gw, f"/{bucket}", {"list-type": "2", "continuation-token": ""})
    assert response.status_code == 200, response.text
    root = ElementTree.fromstring(response.content)
    token = root.find(f"{NS}ContinuationToken")
    assert token is not None and (token.text or "") == ""
    assert [e.text for e in root.iter(f"{NS}Key")] == ["main/a"]
    absent = ElementTree.fromstring(signed_get(gw, f"/{bucket}", {"list-type": "2"}).content)
    assert absent.find(f"{NS}ContinuationToken") is None


@pytest.mark.parametrize(
    ("sent", "stored"),
    [("deflate, gzip", "deflate, gzip"), ("gzip", "gzip"), ("aws-chunked, gzip", "gzip")],
)
def test_content_encoding_is_kept_as_sent(s3: Any, bucket: str, sent: str, stored: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/enc", Body=b"x", ContentEncoding=sent)
    assert s3.head_object(Bucket=bucket, Key="main/enc")["ContentEncoding"] == stored


def _sigv2_put(gw: GatewayStack, bucket: str, key: str, amz_date: str) -> requests.Response:
    request = AWSRequest(
        method="PUT", url=f"{gw.endpoint}/{bucket}/main/{key}", data=b"body", headers={"x-amz-date": amz_date}
    )
    HmacV1Auth(_credentials(gw)).add_auth(request)  # also sets a valid Date header
    prepared = request.prepare()
    return requests.put(prepared.url, headers=dict(prepared.headers), data=b"body", timeout=30)


def _code(response: requests.Response) -> str:
    return ElementTree.fromstring(response.content).findtext("Code") or ""


def test_sigv2_an_empty_x_amz_date_is_refused_not_replaced_by_date(gw_sigv2: GatewayStack) -> None:
    s3 = gw_sigv2.client()
    bucket = "sigv2-empty-date"
    s3.create_bucket(Bucket=bucket)
    response = _sigv2_put(gw_sigv2, bucket, "k", "")
    assert response.status_code == 403 and _code(response) == "AccessDenied", response.text
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/")


@pytest.mark.parametrize("amz_date", ["Tue, 07 Jul 1950 21:53:04 GMT", "Wed, 31 Dec 1969 23:59:59 GMT"])
def test_sigv2_a_date_before_1970_is_access_denied(gw_sigv2: GatewayStack, amz_date: str) -> None:
    s3 = gw_sigv2.client()
    bucket = "sigv2-epoch"
    if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=bucket)
    response = _sigv2_put(gw_sigv2, bucket, "k", amz_date)
    assert response.status_code == 403 and _code(response) == "AccessDenied", response.text


def test_sigv2_a_skewed_date_is_still_request_time_too_skewed(gw_sigv2: GatewayStack) -> None:
    s3 = gw_sigv2.client()
    bucket = "sigv2-skewed"
    s3.create_bucket(Bucket=bucket)
    response = _sigv2_put(gw_sigv2, bucket, "k", "Sat, 01 Jan 2000 00:00:00 GMT")
    assert response.status_code == 403 and _code(response) == "RequestTimeTooSkewed", response.text
