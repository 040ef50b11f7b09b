"""Details S3 conformance suites check that SDKs hide: control characters in listed keys and
prefixes, a Content-Encoding kept as sent, an empty continuation token echoed, SigV2's date
rules, a part uploaded twice, and CreateBucket of a bucket that exists or has dots in its name."""

from __future__ import annotations

import secrets
import socket
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest
import requests
from botocore.auth import HmacV1Auth, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError
from pydantic import SecretStr

from silt import iam_actions
from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.auth.v1 import model_pb2 as auth_model
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.gateway.test_hostile_input import error_code, head_bytes, host_of, raw_request, signed_headers
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


def test_sigv2_an_empty_x_amz_date_is_refused_not_replaced_by_date(gw: GatewayStack) -> None:
    s3 = gw.client()
    bucket = "sigv2-empty-date"
    s3.create_bucket(Bucket=bucket)
    response = _sigv2_put(gw, bucket, "k", "")
    assert response.status_code == 403 and _code(response) == "AccessDenied", response.text
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/")


@pytest.mark.parametrize("amz_date", ["Tue, 07 Jul 1950 21:53:04 GMT", "Wed, 31 Dec 1969 23:59:59 GMT"])
def test_sigv2_a_date_before_1970_is_access_denied(gw: GatewayStack, amz_date: str) -> None:
    s3 = gw.client()
    bucket = "sigv2-epoch"
    if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=bucket)
    response = _sigv2_put(gw, bucket, "k", amz_date)
    assert response.status_code == 403 and _code(response) == "AccessDenied", response.text


def test_sigv2_a_skewed_date_is_still_request_time_too_skewed(gw: GatewayStack) -> None:
    s3 = gw.client()
    bucket = "sigv2-skewed"
    s3.create_bucket(Bucket=bucket)
    response = _sigv2_put(gw, bucket, "k", "Sat, 01 Jan 2000 00:00:00 GMT")
    assert response.status_code == 403 and _code(response) == "RequestTimeTooSkewed", response.text


# --- listings ---------------------------------------------------------------------------


def test_a_prefix_with_a_newline_is_echoed_as_s3_does(gw: GatewayStack, s3: Any, bucket: str) -> None:
    """The prefix comes back as XML text (the newline a character reference); URL-encoded only
    under encoding-type=url in ListObjectsV2, which is where SDKs decode it."""
    s3.put_object(Bucket=bucket, Key="main/a", Body=b"x")
    for list_objects in (s3.list_objects, s3.list_objects_v2):  # botocore asks for encoding-type=url
        listed = list_objects(Bucket=bucket, Prefix="\n")
        assert listed["Prefix"] == "\n" and "Contents" not in listed
        assert list_objects(Bucket=bucket, Prefix="main/\n")["Prefix"] == "main/\n"
    for params, echoed in (
        ({"prefix": "\n"}, b"<Prefix>&#xA;</Prefix>"),
        ({"prefix": "\n", "encoding-type": "url"}, b"<Prefix>&#xA;</Prefix>"),
        ({"list-type": "2", "prefix": "\n"}, b"<Prefix>&#xA;</Prefix>"),
        ({"list-type": "2", "prefix": "\n", "encoding-type": "url"}, b"<Prefix>%0A</Prefix>"),
    ):
        response = signed_get(gw, f"/{bucket}", params)
        assert response.status_code == 200 and echoed in response.content, (params, response.content)
        assert ElementTree.fromstring(response.content).findtext(f"{NS}Prefix") in ("\n", "%0A")


# --- multipart uploads ------------------------------------------------------------------


def test_a_part_uploaded_twice_completes_with_the_upload_that_finished_last(
    gw: GatewayStack, s3: Any, bucket: str
) -> None:
    """Upload A of part 1 starts first and finishes last, upload B of part 1 runs in between
    (ceph's s3-tests, test_multipart_resend_first_finishes_last): the object holds A, and a
    Complete listing the part once per upload (B's ETag, then A's) succeeds, as on S3."""
    key = "main/twice"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    path = f"/{bucket}/{key}?partNumber=1&uploadId={upload}"
    first = b"A" * 8
    headers = signed_headers(gw, "PUT", path, **{"Content-Length": str(len(first))})
    url = urlsplit(gw.endpoint)
    with socket.create_connection((url.hostname, url.port), timeout=30) as slow:
        slow.sendall(head_bytes("PUT", path, headers, host_of(gw)) + first[:4])  # A has started
        b_etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"B" * 8)["ETag"]
        slow.sendall(first[4:])  # and finishes last
        answer = b""
        while chunk := slow.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    a_etag = next(
        line.split(b":", 1)[1].strip().decode() for line in answer.split(b"\r\n") if line.lower().startswith(b"etag:")
    )
    assert a_etag != b_etag
    listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"]) for p in listed] == [(1, a_etag)]
    # B alone is not the part any more.
    with pytest.raises(ClientError) as caught:
        s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": b_etag}]}
        )
    assert caught.value.response["Error"]["Code"] == "InvalidPart"
    both = [{"PartNumber": 1, "ETag": b_etag}, {"PartNumber": 1, "ETag": a_etag}]
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": both})
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == first


# --- CreateBucket -----------------------------------------------------------------------


def _creator_without_read(gw: GatewayStack) -> Credentials:
    """A user who may create repositories but not read any: none is theirs."""
    assert gw.stack.admin is not None
    channel = signed_channel(gw.stack.endpoints["auth"], gw.stack.admin)
    try:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        user = f"creator-{secrets.token_hex(4)}"
        auth.CreateUser(auth_pb2.CreateUserRequest(id=user))
        allow = auth_model.Statement(effect=auth_model.EFFECT_ALLOW, actions=[iam_actions.CREATE_REPO], resources=["*"])
        auth.CreatePolicy(auth_pb2.CreatePolicyRequest(id=user, statements=[allow]))
        auth.AttachPolicy(auth_pb2.PolicyAttachmentRequest(policy_id=user, user_id=user))
        issued = auth.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id=user))
    finally:
        channel.close()
    return Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))


def test_create_bucket_that_exists(gw: GatewayStack, gw_eu_sigv4_only: GatewayStack, s3: Any, bucket: str) -> None:
    """S3's answers today: the caller's own bucket again is 200 in us-east-1 (its legacy
    answer, nothing changes) and 409 BucketAlreadyOwnedByYou in any other region; someone
    else's is 409 BucketAlreadyExists."""
    s3.put_object(Bucket=bucket, Key="main/kept", Body=b"x")
    again = s3.create_bucket(Bucket=bucket)
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_object(Bucket=bucket, Key="main/kept")["Body"].read() == b"x"  # left as it was
    with pytest.raises(ClientError) as caught:
        gw_eu_sigv4_only.client().create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
    assert caught.value.response["Error"]["Code"] == "BucketAlreadyOwnedByYou"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    with pytest.raises(ClientError) as caught:
        gw.client(_creator_without_read(gw)).create_bucket(Bucket=bucket)
    assert caught.value.response["Error"]["Code"] == "BucketAlreadyExists"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409


def test_bucket_names_with_periods_follow_s3_rules(gw: GatewayStack, s3: Any) -> None:
    dotted = f"aaa.{secrets.token_hex(3)}.111"
    assert s3.create_bucket(Bucket=dotted)["ResponseMetadata"]["HTTPStatusCode"] == 200
    s3.put_object(Bucket=dotted, Key="main/k", Body=b"dotted")
    assert s3.get_object(Bucket=dotted, Key="main/k")["Body"].read() == b"dotted"
    assert dotted in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    for name in ("foo..bar", "foo.-bar", "foo-.bar", ".foobar", "foobar.", "192.168.5.123"):
        status, _, content = _signed_put_bucket(gw, name)
        assert status == 400 and error_code(content) == "InvalidBucketName", (name, content)


def _signed_put_bucket(gw: GatewayStack, name: str) -> tuple[int, dict[str, str], bytes]:
    headers = signed_headers(gw, "PUT", f"/{name}", **{"Content-Length": "0"})
    return raw_request(gw, head_bytes("PUT", f"/{name}", headers, host_of(gw)))
