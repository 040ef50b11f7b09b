"""Multipart uploads through the gateway with boto3."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

MIB = 1024 * 1024


def code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_100_mib_multipart_file(s3: Any, bucket: str, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    with open(source, "wb") as f:
        for _ in range(100):
            f.write(os.urandom(MIB))
    config = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB, max_concurrency=4)
    s3.upload_file(str(source), bucket, "main/big.bin", Config=config)
    head = s3.head_object(Bucket=bucket, Key="main/big.bin")
    assert head["ContentLength"] == 100 * MIB
    assert head["ETag"].endswith('-13"')
    target = tmp_path / "back.bin"
    s3.download_file(bucket, "main/big.bin", str(target), Config=config)
    assert hashlib.md5(target.read_bytes()).digest() == hashlib.md5(source.read_bytes()).digest()


def test_part_validation_listing_and_abort(s3: Any, bucket: str) -> None:
    key = "main/parts"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ContentType="text/x")["UploadId"]
    p1 = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"a" * (5 * MIB))["ETag"]
    p2 = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=2, Body=b"b" * 10)["ETag"]
    parts = s3.list_parts(Bucket=bucket, Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, p1, 5 * MIB), (2, p2, 10)]
    uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [(key, upload)]

    def complete(parts: list[dict[str, Any]]) -> Any:
        return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})

    with pytest.raises(ClientError) as exc:
        complete([{"PartNumber": 2, "ETag": p2}, {"PartNumber": 1, "ETag": p1}])
    assert code(exc) == "InvalidPartOrder"
    with pytest.raises(ClientError) as exc:
        complete([{"PartNumber": 1, "ETag": p1}, {"PartNumber": 2, "ETag": '"0123"'}])
    assert code(exc) == "InvalidPart"
    with pytest.raises(ClientError) as exc:
        complete([{"PartNumber": 1, "ETag": p1}, {"PartNumber": 3, "ETag": p2}])
    assert code(exc) == "InvalidPart"
    small = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=3, Body=b"c")["ETag"]
    with pytest.raises(ClientError) as exc:
        complete([{"PartNumber": 2, "ETag": p2}, {"PartNumber": 3, "ETag": small}])
    assert code(exc) == "EntityTooSmall"
    done = complete([{"PartNumber": 1, "ETag": p1}, {"PartNumber": 2, "ETag": p2}])
    digests = b"".join(bytes.fromhex(e.strip('"')) for e in (p1, p2))
    assert done["ETag"] == f'"{hashlib.md5(digests).hexdigest()}-2"'
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["ContentLength"] == 5 * MIB + 10 and got["ContentType"] == "text/x"
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []

    other = s3.create_multipart_upload(Bucket=bucket, Key="main/aborted")["UploadId"]
    s3.abort_multipart_upload(Bucket=bucket, Key="main/aborted", UploadId=other)
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=bucket, Key="main/aborted", UploadId=other, PartNumber=1, Body=b"x")
    assert code(exc) == "NoSuchUpload"


def test_upload_part_copy_with_range(s3: Any, bucket: str) -> None:
    source = bytes(range(256)) * (24 * 1024)  # 6 MiB
    s3.put_object(Bucket=bucket, Key="main/source", Body=source)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/assembled")["UploadId"]
    first = s3.upload_part_copy(
        Bucket=bucket,
        Key="main/assembled",
        UploadId=upload,
        PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "main/source"},
        CopySourceRange=f"bytes=0-{5 * MIB - 1}",
    )["CopyPartResult"]["ETag"]
    second = s3.upload_part_copy(
        Bucket=bucket,
        Key="main/assembled",
        UploadId=upload,
        PartNumber=2,
        CopySource=f"{bucket}/main/source",
        CopySourceRange="bytes=100-199",
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="main/assembled",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": first}, {"PartNumber": 2, "ETag": second}]},
    )
    got = s3.get_object(Bucket=bucket, Key="main/assembled")["Body"].read()
    assert got == source[: 5 * MIB] + source[100:200]


def test_uploads_survive_a_gateway_restart(gw: Any, s3: Any, bucket: str) -> None:
    import signal

    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/restart")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="main/restart", UploadId=upload, PartNumber=1, Body=b"z")["ETag"]
    stack = gw.stack
    stack.kill("gateway", signal.SIGTERM)
    # The suite's stack runs without the launcher's monitor (restart=False): start it again by hand.
    stack._spawn(stack._services["gateway"])
    stack.wait_ready("gateway")
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="main/restart",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    assert s3.get_object(Bucket=bucket, Key="main/restart")["Body"].read() == b"z"


def test_list_multipart_uploads_pages(s3: Any, bucket: str) -> None:
    started = [
        (key, s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"])
        for key in ("main/u/a", "main/u/b", "main/u/b", "main/u/c")
    ]
    seen: list[tuple[str, str]] = []
    kwargs: dict[str, Any] = {"Bucket": bucket, "MaxUploads": 1}
    for _ in range(10):
        page = s3.list_multipart_uploads(**kwargs)
        seen += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        if not page["IsTruncated"]:
            break
        kwargs.update(KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"])
    assert sorted(seen) == sorted(started)
    assert len(seen) == 4
    for key, upload in started:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
