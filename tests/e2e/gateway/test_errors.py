"""Every S3 error code the gateway answers: right code, right status, an XML body with a request id."""

from __future__ import annotations

import signal
from typing import Any
from xml.etree import ElementTree

import pytest
import requests
from botocore.exceptions import ClientError

from tests.support.gateway_stack import GatewayStack
from tests.support.wait import wait_until


def fails(call: Any, code: str, status: int) -> ClientError:
    with pytest.raises(ClientError) as exc:
        call()
    response = exc.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == status
    if status != 304 and "Error" in response and response["Error"].get("Code") not in (None, str(status)):
        assert response["Error"]["Code"] == code
    assert response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-request-id")
    return exc.value


def xml_error(response: requests.Response) -> dict[str, str]:
    root = ElementTree.fromstring(response.content)
    return {child.tag: child.text or "" for child in root}


def test_object_and_bucket_errors(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"0123")
    fails(lambda: s3.get_object(Bucket="no-such-repo", Key="main/k"), "NoSuchBucket", 404)
    fails(lambda: s3.list_objects_v2(Bucket="no-such-repo"), "NoSuchBucket", 404)
    fails(lambda: s3.get_object(Bucket=bucket, Key="main/nope"), "NoSuchKey", 404)
    fails(lambda: s3.get_object(Bucket=bucket, Key="main/k", Range="bytes=4-"), "InvalidRange", 416)
    fails(lambda: s3.get_object(Bucket=bucket, Key="main/k", IfMatch='"x"'), "PreconditionFailed", 412)
    etag = s3.head_object(Bucket=bucket, Key="main/k")["ETag"]
    fails(lambda: s3.get_object(Bucket=bucket, Key="main/k", IfNoneMatch=etag), "NotModified", 304)
    wrong_md5 = "AAAAAAAAAAAAAAAAAAAAAA=="
    fails(lambda: s3.put_object(Bucket=bucket, Key="main/b", Body=b"x", ContentMD5=wrong_md5), "BadDigest", 400)
    fails(lambda: s3.list_objects_v2(Bucket=bucket, Delimiter="|" * 1025), "InvalidArgument", 400)
    fails(lambda: s3.get_bucket_acl(Bucket=bucket), "NotImplemented", 501)
    fails(lambda: s3.put_object(Bucket=bucket, Key="nobranch/k", Body=b"x"), "NoSuchBucket", 404)


def test_multipart_errors(s3: Any, bucket: str) -> None:
    fails(
        lambda: s3.upload_part(Bucket=bucket, Key="main/m", UploadId="0" * 32, PartNumber=1, Body=b"x"),
        "NoSuchUpload",
        404,
    )
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/m")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="main/m", UploadId=upload, PartNumber=1, Body=b"x")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="main/m", UploadId=upload, PartNumber=2, Body=b"y")["ETag"]

    def complete(parts: list[tuple[int, str]]) -> Any:
        return lambda: s3.complete_multipart_upload(
            Bucket=bucket,
            Key="main/m",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
        )

    fails(complete([(2, e2), (1, e1)]), "InvalidPartOrder", 400)
    fails(complete([(1, e2)]), "InvalidPart", 400)
    fails(complete([(1, e1), (2, e2)]), "EntityTooSmall", 400)
    fails(
        lambda: s3.upload_part(Bucket=bucket, Key="main/m", UploadId=upload, PartNumber=10001, Body=b"x"),
        "InvalidArgument",
        400,
    )


def test_raw_errors(gw: GatewayStack, s3: Any, bucket: str) -> None:
    anonymous = requests.get(f"{gw.endpoint}/{bucket}/main/k", timeout=30)
    assert anonymous.status_code == 403 and xml_error(anonymous)["Code"] == "AccessDenied"
    assert xml_error(anonymous)["RequestId"] == anonymous.headers["x-amz-request-id"]
    bad_name = requests.get(f"{gw.endpoint}/Bad_Name/", timeout=30)
    assert bad_name.status_code == 400 and xml_error(bad_name)["Code"] == "InvalidBucketName"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/x")["UploadId"]
    url = s3.generate_presigned_url(
        "complete_multipart_upload", Params={"Bucket": bucket, "Key": "main/x", "UploadId": upload}, ExpiresIn=60
    )
    malformed = requests.post(url, data=b"<not xml", timeout=30)
    assert malformed.status_code == 400 and xml_error(malformed)["Code"] == "MalformedXML"


def test_authentication_errors(gw: GatewayStack, bucket: str) -> None:
    from silt.rpc.signing import Credentials

    unknown = gw.client(Credentials("AKIDONOTEXIST000000", gw.admin.secret_access_key))
    fails(lambda: unknown.list_objects_v2(Bucket=bucket), "InvalidAccessKeyId", 403)
    wrong = gw.client(Credentials(gw.admin.access_key_id, gw.reader.secret_access_key))
    fails(lambda: wrong.list_objects_v2(Bucket=bucket), "SignatureDoesNotMatch", 403)
    fails(lambda: gw.client(gw.reader).put_object(Bucket=bucket, Key="main/z", Body=b"z"), "AccessDenied", 403)


def test_method_not_allowed_for_writes_to_non_branches(gw: GatewayStack, s3: Any, bucket: str) -> None:
    from silt.graveler.v1 import graveler_pb2 as api

    gw.graveler.CreateTag(api.CreateTagRequest(repository=bucket, id="t1", ref="main"))
    fails(lambda: s3.put_object(Bucket=bucket, Key="t1/k", Body=b"x"), "MethodNotAllowed", 405)
    # The target is answered before the body's headers are looked at, as S3 resolves the bucket
    # before it reads the body: a bad Content-MD5 on a write to a tag is still 405.
    bad_md5 = "not base64!"
    fails(lambda: s3.put_object(Bucket=bucket, Key="t1/k", Body=b"x", ContentMD5=bad_md5), "MethodNotAllowed", 405)
    fails(lambda: s3.put_object(Bucket=bucket, Key="gone/k", Body=b"x", ContentMD5=bad_md5), "NoSuchBucket", 404)
    fails(lambda: s3.put_object(Bucket=bucket, Key="main/k", Body=b"x", ContentMD5=bad_md5), "InvalidDigest", 400)


def test_service_unavailable_when_graveler_is_down(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"x")
    stack = gw.stack
    stack.kill("graveler", signal.SIGKILL)
    try:
        # Reads are answered by the gateway itself from the KV store (gateways.s3.direct_reads);
        # writes need graveler.
        assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"x"
        assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]] == ["main/k"]
        error = fails(lambda: s3.put_object(Bucket=bucket, Key="main/k2", Body=b"y"), "ServiceUnavailable", 503)
        assert error.response["Error"]["Code"] == "ServiceUnavailable"  # graveler down: no overload
    finally:
        # The suite's stack runs without the launcher's monitor (restart=False): start it again by hand.
        stack._spawn(stack._services["graveler"])
        stack.wait_ready("graveler")

    # Served again once the gateway's channel reconnects: its backoff is at most 1 s
    # (silt/rpc/signing.py RECONNECT_SOON), so a request right after the restart may still get a 503.
    def served() -> bool:
        try:
            s3.put_object(Bucket=bucket, Key="main/k2", Body=b"y")
            return bool(s3.get_object(Bucket=bucket, Key="main/k2")["Body"].read() == b"y")
        except ClientError as exc:
            assert exc.response["Error"]["Code"] in ("ServiceUnavailable", "SlowDown"), exc.response
            return False

    wait_until(served, 10.0, "the gateway serving again after graveler's restart", interval=0.2)
