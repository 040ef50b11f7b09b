"""The gateway on the S3 block adapter (moto_server as the object store, the e2e tests' shared
s3_stack): the same data path, with real S3 multipart uploads and server-side copies underneath."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.gateway_stack import GatewayStack

pytestmark = pytest.mark.s3
MIB = 1024 * 1024


def test_objects_multipart_and_copies_on_s3(s3_stack: GatewayStack) -> None:
    # The e2e tests' stack on S3 (tests/e2e/conftest.py): its repositories' namespaces are in moto.
    s3: Any = s3_stack.client()
    s3.create_bucket(Bucket="on-s3")
    s3.create_bucket(Bucket="on-s3-other")
    s3.put_object(Bucket="on-s3", Key="main/a", Body=b"0123456789", ContentType="text/plain")
    assert s3.get_object(Bucket="on-s3", Key="main/a", Range="bytes=3-5")["Body"].read() == b"345"
    part = b"p" * (5 * MIB)
    upload = s3.create_multipart_upload(Bucket="on-s3", Key="main/mp")["UploadId"]
    e1 = s3.upload_part(Bucket="on-s3", Key="main/mp", UploadId=upload, PartNumber=1, Body=part)["ETag"]
    e2 = s3.upload_part_copy(
        Bucket="on-s3",
        Key="main/mp",
        UploadId=upload,
        PartNumber=2,
        CopySource="on-s3/main/a",
        CopySourceRange="bytes=0-3",
    )["CopyPartResult"]["ETag"]
    done = s3.complete_multipart_upload(
        Bucket="on-s3",
        Key="main/mp",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    assert done["ETag"].endswith('-2"')
    assert s3.get_object(Bucket="on-s3", Key="main/mp")["Body"].read() == part + b"0123"
    s3.copy_object(Bucket="on-s3-other", Key="main/copied", CopySource="on-s3/main/a")
    assert s3.get_object(Bucket="on-s3-other", Key="main/copied")["Body"].read() == b"0123456789"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="on-s3", Prefix="main/")["Contents"]]
    assert keys == ["main/a", "main/mp"]
