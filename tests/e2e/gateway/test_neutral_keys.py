"""Ref-neutral addresses at the S3 gateway (`@<branch>/<key>`): a write stages the key on the
branch and records it once; a read goes by the key alone, after the branch or the key is gone;
a listing and a delete act on the branch; authorization is the key's."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import pytest
from botocore.exceptions import ClientError
from pydantic import SecretStr

from silt import iam_actions
from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.auth.v1 import model_pb2 as auth_model
from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.rpc.signing import Credentials, signed_channel
from tests.support.gateway_stack import GatewayStack

KEY = "db/t/data/00000-0-a.parquet"


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def _branch(gw: GatewayStack, bucket: str, name: str) -> None:
    gw.graveler.CreateBranch(api.CreateBranchRequest(repository=bucket, name=name, source_ref="main"))


def test_written_once_then_read_by_key_alone(gw: GatewayStack, s3: Any, bucket: str) -> None:
    _branch(gw, bucket, "b1")
    body = b"parquet bytes " * 100
    put = s3.put_object(Bucket=bucket, Key=f"@b1/{KEY}", Body=body)
    assert put["ETag"].strip('"') == hashlib.md5(body).hexdigest()
    # Staged on the branch as `b1/<key>` would be.
    assert s3.get_object(Bucket=bucket, Key=f"b1/{KEY}")["Body"].read() == body
    # An identical retry is taken; other bytes never are, through any branch.
    s3.put_object(Bucket=bucket, Key=f"@b1/{KEY}", Body=body)
    for where in ("b1", "main"):
        with pytest.raises(ClientError) as refused:
            s3.put_object(Bucket=bucket, Key=f"@{where}/{KEY}", Body=b"other bytes")
        assert code(refused) == "PreconditionFailed"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    with pytest.raises(ClientError) as absent:
        s3.head_object(Bucket=bucket, Key=f"main/{KEY}")  # the refused write staged nothing
    assert absent.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404

    # The branch deleted, the key rewritten elsewhere: the address still reads the file, from
    # whichever branch name it carries.
    gw.graveler.DeleteBranch(api.DeleteBranchRequest(repository=bucket, name="b1"))
    s3.put_object(Bucket=bucket, Key=f"main/{KEY}", Body=b"rewritten through the branch form")
    for address in (f"@b1/{KEY}", f"@main/{KEY}", f"@gone-forever/{KEY}"):
        assert s3.get_object(Bucket=bucket, Key=address)["Body"].read() == body
    head = s3.head_object(Bucket=bucket, Key=f"@b1/{KEY}")
    assert head["ContentLength"] == len(body)
    ranged = s3.get_object(Bucket=bucket, Key=f"@b1/{KEY}", Range="bytes=7-11")
    assert ranged["Body"].read() == body[7:12]
    assert ranged["ContentRange"] == f"bytes 7-11/{len(body)}"
    with pytest.raises(ClientError) as unchanged:
        s3.get_object(Bucket=bucket, Key=f"@b1/{KEY}", IfNoneMatch=put["ETag"])
    assert unchanged.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=bucket, Key="@main/never/written")
    assert code(missing) == "NoSuchKey"


def test_list_and_delete_act_on_the_branch(s3: Any, bucket: str) -> None:
    for name in ("a", "b"):
        s3.put_object(Bucket=bucket, Key=f"@main/db/t/data/{name}", Body=name.encode())
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="@main/db/t/")
    assert [o["Key"] for o in listed["Contents"]] == ["@main/db/t/data/a", "@main/db/t/data/b"]
    rolled = s3.list_objects_v2(Bucket=bucket, Prefix="@main/db/", Delimiter="/")
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["@main/db/t/"]
    s3.delete_object(Bucket=bucket, Key="@main/db/t/data/a")
    bulk = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "@main/db/t/data/b"}, {"Key": "@main/db/"}]})
    assert not bulk.get("Errors")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/db/")
    # Deleted on the branch; the record stays (another ref's snapshots may name the file).
    assert s3.get_object(Bucket=bucket, Key="@main/db/t/data/a")["Body"].read() == b"a"


def test_multipart_upload_is_recorded(s3: Any, bucket: str) -> None:
    key = "@main/db/t/data/big.parquet"
    part = b"p" * (5 * 1024 * 1024)
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=part)["ETag"]
    tail = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=2, Body=b"end")["ETag"]
    parts = [{"PartNumber": 1, "ETag": etag}, {"PartNumber": 2, "ETag": tail}]
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    s3.delete_object(Bucket=bucket, Key="main/db/t/data/big.parquet")
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(part) + 3
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key=key, Body=b"small")
    assert code(refused) == "PreconditionFailed"


def test_copy_to_and_from_the_form(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/plain", Body=b"copied")
    s3.copy_object(Bucket=bucket, Key="@main/db/copy", CopySource={"Bucket": bucket, "Key": "main/plain"})
    s3.delete_object(Bucket=bucket, Key="main/db/copy")
    assert s3.get_object(Bucket=bucket, Key="@x/db/copy")["Body"].read() == b"copied"  # recorded
    s3.copy_object(Bucket=bucket, Key="main/again", CopySource={"Bucket": bucket, "Key": "@gone/db/copy"})
    assert s3.get_object(Bucket=bucket, Key="main/again")["Body"].read() == b"copied"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/parts")["UploadId"]
    part = s3.upload_part_copy(
        Bucket=bucket,
        Key="main/parts",
        UploadId=upload,
        PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "@x/db/copy"},
    )
    parts = [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]
    s3.complete_multipart_upload(Bucket=bucket, Key="main/parts", UploadId=upload, MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key="main/parts")["Body"].read() == b"copied"


def test_collected_bytes_are_no_such_key(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="@main/x/file", Body=b"soon gone")
    recorded = gw.graveler.GetNeutralEntry(api.GetNeutralEntryRequest(repository=bucket, key="x/file")).entry
    # What garbage collection's sweep does to bytes no commit or staging holds.
    LocalAdapter(gw.stack.data_dir / "data").delete(f"local://{bucket}", recorded.physical_address)
    for read in (s3.get_object, s3.head_object):
        with pytest.raises(ClientError) as gone:
            read(Bucket=bucket, Key="@main/x/file")
        assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_malformed_markers_are_refused_plainly(s3: Any, bucket: str) -> None:
    for key in ("@/db/file", "@main~1/db/file", "@a@b/db/file", "@.hidden/db/file"):
        for call in (
            lambda k: s3.get_object(Bucket=bucket, Key=k),
            lambda k: s3.put_object(Bucket=bucket, Key=k, Body=b"x"),
        ):
            with pytest.raises(ClientError) as refused:
                call(key)
            assert code(refused) == "InvalidArgument"
            assert "@<branch>/<key>" in refused.value.response["Error"]["Message"]


def _reader_of(gw: GatewayStack, bucket: str, prefix: str) -> Credentials:
    """A user who may read the repository's keys under prefix only."""
    assert gw.stack.admin is not None
    channel = signed_channel(gw.stack.endpoints["auth"], gw.stack.admin)
    try:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        user = f"narrow-{secrets.token_hex(4)}"
        auth.CreateUser(auth_pb2.CreateUserRequest(id=user))
        # ReadObject on the prefix alone: ReadRepo would hold every key's read.
        statements = [
            auth_model.Statement(
                effect=auth_model.EFFECT_ALLOW, actions=[iam_actions.READ_OBJECT], resources=[f"{bucket}/{prefix}*"]
            )
        ]
        auth.CreatePolicy(auth_pb2.CreatePolicyRequest(id=user, statements=statements))
        auth.AttachPolicy(auth_pb2.PolicyAttachmentRequest(policy_id=user, user_id=user))
        issued = auth.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id=user))
    finally:
        channel.close()
    return Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))


def test_reads_are_authorized_as_the_key(gw: GatewayStack, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="@main/open/file", Body=b"open")
    s3.put_object(Bucket=bucket, Key="@main/secret/file", Body=b"secret")
    narrow = gw.client(_reader_of(gw, bucket, "open/"))
    assert narrow.get_object(Bucket=bucket, Key="@anything/open/file")["Body"].read() == b"open"
    for key in ("@main/secret/file", "@other/secret/file", "@main/secret/never-written"):
        with pytest.raises(ClientError) as refused:
            narrow.get_object(Bucket=bucket, Key=key)
        assert code(refused) == "AccessDenied"
    reader = gw.client(gw.reader)  # ReadRepo alone (Analysts): reads, never writes
    assert reader.get_object(Bucket=bucket, Key="@main/secret/file")["Body"].read() == b"secret"
    with pytest.raises(ClientError) as refused:
        reader.put_object(Bucket=bucket, Key="@main/new/file", Body=b"x")
    assert code(refused) == "AccessDenied"
