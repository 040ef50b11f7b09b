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


def test_list_multipart_uploads_with_a_delimiter(s3: Any, bucket: str) -> None:
    keys = ["main/d/a/1", "main/d/a/2", "main/d/b", "main/d/c/1", "main/d/e f"]
    started = [(key, s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]) for key in keys]
    try:
        page = s3.list_multipart_uploads(Bucket=bucket, Prefix="main/d/", Delimiter="/")
        assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["main/d/a/", "main/d/c/"]
        assert [u["Key"] for u in page["Uploads"]] == ["main/d/b", "main/d/e f"]
        assert page["Delimiter"] == "/"

        # One item per page: a common prefix counts once, and the next page starts after it.
        seen: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": "main/d/", "Delimiter": "/", "MaxUploads": 1}
        for _ in range(10):
            page = s3.list_multipart_uploads(**kwargs)
            seen += [p["Prefix"] for p in page.get("CommonPrefixes", [])] + [u["Key"] for u in page.get("Uploads", [])]
            if not page["IsTruncated"]:
                break
            kwargs.update(KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"])
        assert seen == ["main/d/a/", "main/d/b", "main/d/c/", "main/d/e f"]

        encoded = s3.list_multipart_uploads(Bucket=bucket, Prefix="main/d/e", EncodingType="url")
        # boto3 decodes url-encoded keys of ListObjects only: here the key arrives as sent.
        assert [u["Key"] for u in encoded["Uploads"]] == ["main/d/e%20f"]
    finally:
        for key, upload in started:
            s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)


def test_get_and_head_by_part_number(s3: Any, bucket: str) -> None:
    mib = 1024 * 1024
    parts = [os.urandom(5 * mib), os.urandom(5 * mib), os.urandom(mib + 7)]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="main/parts")["UploadId"]
    done = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(Bucket=bucket, Key="main/parts", UploadId=upload, PartNumber=n, Body=p)["ETag"],
        }
        for n, p in enumerate(parts, 1)
    ]
    s3.complete_multipart_upload(Bucket=bucket, Key="main/parts", UploadId=upload, MultipartUpload={"Parts": done})
    total = sum(map(len, parts))
    start = 0
    for number, data in enumerate(parts, 1):
        got = s3.get_object(Bucket=bucket, Key="main/parts", PartNumber=number)
        assert got["Body"].read() == data
        assert got["PartsCount"] == 3
        assert got["ContentRange"] == f"bytes {start}-{start + len(data) - 1}/{total}"
        head = s3.head_object(Bucket=bucket, Key="main/parts", PartNumber=number)
        assert head["ContentLength"] == len(data) and head["PartsCount"] == 3
        start += len(data)
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="main/parts", PartNumber=4)
    assert caught.value.response["Error"]["Code"] == "InvalidPart"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="main/parts", PartNumber=1, Range="bytes=0-1")
    assert caught.value.response["Error"]["Code"] == "InvalidRequest"

    # Copies keep the layout; a single-part object is its own part 1.
    s3.copy_object(Bucket=bucket, Key="main/parts-copy", CopySource={"Bucket": bucket, "Key": "main/parts"})
    assert s3.get_object(Bucket=bucket, Key="main/parts-copy", PartNumber=2)["Body"].read() == parts[1]
    s3.put_object(Bucket=bucket, Key="main/single", Body=b"one part")
    single = s3.get_object(Bucket=bucket, Key="main/single", PartNumber=1)
    assert single["Body"].read() == b"one part" and "PartsCount" not in single
    with pytest.raises(ClientError) as caught:
        s3.head_object(Bucket=bucket, Key="main/single", PartNumber=2)
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=bucket, Key="main/single", PartNumber=2)
    assert caught.value.response["Error"]["Code"] == "InvalidPart"
