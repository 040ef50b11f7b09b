"""Branch protection through S3: graveler's refusal reaches boto3 as 403 AccessDenied, nothing is
written, and unprotected branches are untouched."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.support.gateway_stack import GatewayStack


def _refused(call: Any) -> None:
    with pytest.raises(ClientError) as err:
        call()
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    assert "cannot write to protected branch" in err.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    "rule",
    [
        pb.BranchProtectionRule(pattern="main", block_direct_writes=True),
        pb.BranchProtectionRule(pattern="ma*", required_approvals=1),
    ],
    ids=["block-direct-writes", "required-approvals"],
)
def test_protected_branch_refuses_s3_put_and_delete(
    gw: GatewayStack, s3: Any, bucket: str, rule: pb.BranchProtectionRule
) -> None:
    s3.put_object(Bucket=bucket, Key="main/kept.txt", Body=b"before")
    gw.graveler.CreateBranch(api.CreateBranchRequest(repository=bucket, name="dev", source_ref="main"))
    gw.graveler.SetBranchProtection(api.SetBranchProtectionRequest(repository=bucket, rules=[rule]))

    _refused(lambda: s3.put_object(Bucket=bucket, Key="main/new.txt", Body=b"x"))
    _refused(lambda: s3.put_object(Bucket=bucket, Key="main/kept.txt", Body=b"overwrite"))
    _refused(lambda: s3.delete_object(Bucket=bucket, Key="main/kept.txt"))
    _refused(
        lambda: s3.copy_object(
            Bucket=bucket, Key="main/copy.txt", CopySource={"Bucket": bucket, "Key": "main/kept.txt"}
        )
    )
    # A multipart upload's parts are not the branch's yet; its completion is the write refused.
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/parts.bin")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="main/parts.bin", UploadId=upload, PartNumber=1, Body=b"p")
    _refused(
        lambda: s3.complete_multipart_upload(
            Bucket=bucket,
            Key="main/parts.bin",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
    )
    assert s3.get_object(Bucket=bucket, Key="main/kept.txt")["Body"].read() == b"before"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="main/")
    assert [o["Key"] for o in listed.get("Contents", [])] == ["main/kept.txt"]
    # A bulk delete reports the refusal per key.
    answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/kept.txt"}]})
    assert [e["Code"] for e in answer.get("Errors", [])] == ["AccessDenied"]

    s3.put_object(Bucket=bucket, Key="dev/new.txt", Body=b"fine")
    s3.delete_object(Bucket=bucket, Key="dev/new.txt")

    gw.graveler.SetBranchProtection(api.SetBranchProtectionRequest(repository=bucket, rules=[]))
    s3.put_object(Bucket=bucket, Key="main/new.txt", Body=b"x")
