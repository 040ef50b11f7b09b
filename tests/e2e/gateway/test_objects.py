"""The S3 gateway with boto3 (SigV4): objects, copies, deletes, refs and addressing."""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from silt.graveler.v1 import graveler_pb2 as api
from tests.support.gateway_stack import DOMAIN, GatewayStack


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_put_get_head_with_metadata(s3: Any, bucket: str) -> None:
    put = s3.put_object(
        Bucket=bucket, Key="main/dir/a.txt", Body=b"hello", ContentType="text/plain", Metadata={"Owner": "me"}
    )
    assert put["ETag"] == f'"{hashlib.md5(b"hello").hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="main/dir/a.txt")
    assert got["Body"].read() == b"hello"
    assert got["ContentType"] == "text/plain"
    assert got["Metadata"] == {"owner": "me"}
    assert got["ETag"] == put["ETag"]
    head = s3.head_object(Bucket=bucket, Key="main/dir/a.txt")
    assert head["ContentLength"] == 5
    assert head["LastModified"] == got["LastModified"]


def test_content_md5_is_verified(s3: Any, bucket: str) -> None:
    good = base64.b64encode(hashlib.md5(b"data").digest()).decode()
    s3.put_object(Bucket=bucket, Key="main/ok", Body=b"data", ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/bad", Body=b"data", ContentMD5=bad)
    assert code(exc) == "BadDigest"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/bad")


def test_ranges_and_conditions(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/r", Body=b"0123456789")
    assert s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=2-4")["Body"].read() == b"234"
    assert s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=7-")["Body"].read() == b"789"
    assert s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=-3")["Body"].read() == b"789"
    got = s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=8-100")
    assert got["ContentRange"] == "bytes 8-9/10"
    etag = got["ETag"]
    assert s3.get_object(Bucket=bucket, Key="main/r", IfMatch=etag)["Body"].read() == b"0123456789"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="main/r", IfMatch='"nope"')
    assert code(exc) == "PreconditionFailed"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="main/r", IfNoneMatch=etag)
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    modified = got["LastModified"]
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="main/r", IfModifiedSince=modified)
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="main/r", IfUnmodifiedSince=modified.replace(year=2000))
    assert code(exc) == "PreconditionFailed"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="main/r", Range="bytes=10-20")
    assert code(exc) == "InvalidRange"


def test_response_overrides(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/o", Body=b"x")
    got = s3.get_object(
        Bucket=bucket, Key="main/o", ResponseContentType="text/csv", ResponseContentDisposition="attachment"
    )
    assert got["ContentType"] == "text/csv"
    assert got["ContentDisposition"] == "attachment"


def test_reads_from_tags_commits_and_expressions_and_refuses_writes_there(
    gw: GatewayStack, s3: Any, bucket: str
) -> None:
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v1")
    commit = gw.graveler.Commit(api.CommitRequest(repository=bucket, branch="main", message="one"))
    gw.graveler.CreateTag(api.CreateTagRequest(repository=bucket, id="v1", ref="main"))
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v2")
    gw.graveler.Commit(api.CommitRequest(repository=bucket, branch="main", message="two"))
    assert s3.get_object(Bucket=bucket, Key="v1/k")["Body"].read() == b"v1"
    assert s3.get_object(Bucket=bucket, Key=f"{commit.id}/k")["Body"].read() == b"v1"
    assert s3.get_object(Bucket=bucket, Key="main~1/k")["Body"].read() == b"v1"
    assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"v2"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="v1/k", Body=b"no")
    assert code(exc) == "MethodNotAllowed"
    assert "not a branch" in exc.value.response["Error"]["Message"]


def test_copy_object(s3: Any, bucket: str, gw: GatewayStack) -> None:
    s3.put_object(Bucket=bucket, Key="main/src", Body=b"payload", ContentType="text/a", Metadata={"a": "1"})
    s3.copy_object(Bucket=bucket, Key="main/same", CopySource={"Bucket": bucket, "Key": "main/src"})
    same = s3.get_object(Bucket=bucket, Key="main/same")
    assert same["Body"].read() == b"payload" and same["Metadata"] == {"a": "1"} and same["ContentType"] == "text/a"
    gw.graveler.CreateBranch(api.CreateBranchRequest(repository=bucket, name="dev", source_ref="main"))
    s3.copy_object(
        Bucket=bucket,
        Key="dev/replaced",
        CopySource=f"{bucket}/main/src",
        MetadataDirective="REPLACE",
        ContentType="text/b",
        Metadata={"b": "2"},
    )
    replaced = s3.head_object(Bucket=bucket, Key="dev/replaced")
    assert replaced["Metadata"] == {"b": "2"} and replaced["ContentType"] == "text/b"
    other = bucket + "-x"
    s3.create_bucket(Bucket=other)
    s3.copy_object(Bucket=other, Key="main/copied", CopySource={"Bucket": bucket, "Key": "main/src"})
    assert s3.get_object(Bucket=other, Key="main/copied")["Body"].read() == b"payload"


def test_delete_and_delete_objects(s3: Any, bucket: str) -> None:
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"main/d/{i}", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="main/d/0")
    s3.delete_object(Bucket=bucket, Key="main/d/never-existed")
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="main/d/0")
    assert code(exc) == "NoSuchKey"
    result = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "main/d/1"}, {"Key": "main/d/2"}, {"Key": "nobranch/d/3"}]}
    )
    assert sorted(d["Key"] for d in result["Deleted"]) == ["main/d/1", "main/d/2"]
    assert [e["Key"] for e in result["Errors"]] == ["nobranch/d/3"]
    quiet = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/d/3"}], "Quiet": True})
    assert "Deleted" not in quiet
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]]
    assert keys == ["main/d/4"]


def test_buckets(gw: GatewayStack, s3: Any, bucket: str) -> None:
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert bucket in names
    s3.head_bucket(Bucket=bucket)
    assert s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") in (None, "")
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/x", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=bucket)
    assert code(exc) == "BucketNotEmpty"
    s3.delete_object(Bucket=bucket, Key="main/x")
    s3.delete_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.head_bucket(Bucket=bucket)
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    # The reader sees only what it may read: every repository here (Analysts read all).
    reader_names = [b["Name"] for b in gw.client(gw.reader).list_buckets()["Buckets"]]
    assert set(reader_names) == {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_virtual_host_addressing(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/v", Body=b"vhost")
    port = gw.endpoint.rsplit(":", 1)[1]

    def to_loopback(request: Any, **_: Any) -> None:
        # No DNS for <bucket>.s3.local here: connect to loopback, keep the Host header.
        request.headers["Host"] = f"{bucket}.{DOMAIN}:{port}"
        request.url = request.url.replace(f"{bucket}.{DOMAIN}", "127.0.0.1")

    client2 = boto3.client(
        "s3",
        endpoint_url=f"http://{DOMAIN}:{port}",
        aws_access_key_id=gw.admin.access_key_id,
        aws_secret_access_key=gw.admin.secret_access_key.get_secret_value(),
        region_name="us-east-1",
        config=boto3.session.Config(s3={"addressing_style": "virtual"}),
    )
    client2.meta.events.register_first("before-send.s3", to_loopback)
    assert client2.get_object(Bucket=bucket, Key="main/v")["Body"].read() == b"vhost"


def test_presigned_get_and_put(gw: GatewayStack, s3: Any, bucket: str) -> None:
    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=60)
    assert requests.put(put_url, data=b"presigned", timeout=30).status_code == 200
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "main/p"}, ExpiresIn=60)
    response = requests.get(get_url, timeout=30)
    assert response.status_code == 200 and response.content == b"presigned"
    tampered = get_url.replace("main/p", "main/q")
    assert requests.get(tampered, timeout=30).status_code == 403


def test_unsupported_operations_say_not_implemented(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/t", Body=b"x")
    for call in (
        lambda: s3.get_bucket_acl(Bucket=bucket),
        lambda: s3.get_object_tagging(Bucket=bucket, Key="main/t"),
        lambda: s3.put_object_tagging(Bucket=bucket, Key="main/t", Tagging={"TagSet": []}),
        lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket),
        lambda: s3.list_object_versions(Bucket=bucket),
        lambda: s3.get_bucket_policy(Bucket=bucket),
    ):
        with pytest.raises(ClientError) as exc:
            call()
        assert code(exc) == "NotImplemented"


def test_large_streamed_put_and_get(s3: Any, bucket: str) -> None:
    data = io.BytesIO(bytes(range(256)) * (40 * 4096))  # 40 MiB in one PutObject
    s3.put_object(Bucket=bucket, Key="main/large", Body=data)
    got = s3.get_object(Bucket=bucket, Key="main/large")["Body"].read()
    assert got == data.getvalue()


def test_copy_source_conditions(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="main/cond-src", Body=b"conditional")["ETag"]
    source = {"Bucket": bucket, "Key": "main/cond-src"}
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    refused = [
        {"CopySourceIfMatch": '"0123456789abcdef0123456789abcdef"'},
        {"CopySourceIfNoneMatch": etag},
        {"CopySourceIfModifiedSince": future},
        {"CopySourceIfUnmodifiedSince": past},
        # If-None-Match decides over If-Modified-Since, and fails here.
        {"CopySourceIfNoneMatch": etag, "CopySourceIfModifiedSince": past},
    ]
    for conditions in refused:
        with pytest.raises(ClientError) as caught:
            s3.copy_object(Bucket=bucket, Key="main/cond-dst", CopySource=source, **conditions)
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412, conditions
        assert code(caught) == "PreconditionFailed"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/cond-dst")

    accepted = [
        {"CopySourceIfMatch": etag},
        {"CopySourceIfNoneMatch": '"0123456789abcdef0123456789abcdef"'},
        {"CopySourceIfModifiedSince": past},
        {"CopySourceIfUnmodifiedSince": future},
        # If-Match decides over If-Unmodified-Since, and holds here.
        {"CopySourceIfMatch": etag, "CopySourceIfUnmodifiedSince": past},
    ]
    for i, conditions in enumerate(accepted):
        s3.copy_object(Bucket=bucket, Key=f"main/cond-dst-{i}", CopySource=source, **conditions)
        assert s3.get_object(Bucket=bucket, Key=f"main/cond-dst-{i}")["Body"].read() == b"conditional"

    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/cond-mp")["UploadId"]
    with pytest.raises(ClientError) as caught:
        s3.upload_part_copy(
            Bucket=bucket,
            Key="main/cond-mp",
            UploadId=upload,
            PartNumber=1,
            CopySource=source,
            CopySourceIfNoneMatch=etag,
        )
    assert code(caught) == "PreconditionFailed"
    part = s3.upload_part_copy(
        Bucket=bucket, Key="main/cond-mp", UploadId=upload, PartNumber=1, CopySource=source, CopySourceIfMatch=etag
    )
    assert part["CopyPartResult"]["ETag"] == etag
    s3.abort_multipart_upload(Bucket=bucket, Key="main/cond-mp", UploadId=upload)


def test_objects_are_served_inert_to_browsers(s3: Any, bucket: str) -> None:
    """An uploaded HTML page shares the REST API's origin (and its session cookie): the browser
    must neither sniff a type nor run the page's scripts with that origin's rights."""
    page = b"<html><script>fetch('/api/v1/repositories')</script></html>"
    s3.put_object(Bucket=bucket, Key="main/evil.html", Body=page, ContentType="text/html")
    for answer in (
        s3.get_object(Bucket=bucket, Key="main/evil.html"),
        s3.head_object(Bucket=bucket, Key="main/evil.html"),
        s3.get_object(Bucket=bucket, Key="main/evil.html", Range="bytes=0-5", ResponseContentType="text/html"),
    ):
        headers = answer["ResponseMetadata"]["HTTPHeaders"]
        assert headers["content-type"] == "text/html"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["content-security-policy"] == "sandbox"
