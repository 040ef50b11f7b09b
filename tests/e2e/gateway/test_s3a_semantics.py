"""What Hadoop's S3A connector does to a bucket, answered as S3 answers it.

S3A writes and deletes directory markers ("dir/" keys, the branch root "main/" included),
bulk-deletes keys that may not exist, renames by copy + delete, and probes directories with
max-keys=2 listings. Any error entry in its bulk deletes makes it retry forever.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError


def test_directory_markers_are_objects(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/data/t1/_temporary/0/", Body=b"")
    head = s3.head_object(Bucket=bucket, Key="main/data/t1/_temporary/0/")
    assert head["ContentLength"] == 0
    probe = s3.list_objects_v2(Bucket=bucket, Prefix="main/data/t1/", Delimiter="/", MaxKeys=2)
    assert [p["Prefix"] for p in probe["CommonPrefixes"]] == ["main/data/t1/_temporary/"]
    s3.delete_object(Bucket=bucket, Key="main/data/t1/_temporary/0/")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/data/t1/_temporary/0/")


def test_the_branch_root_marker_can_be_written_and_deleted(s3: Any, bucket: str) -> None:
    put = s3.put_object(Bucket=bucket, Key="main/", Body=b"")
    assert put["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    s3.delete_object(Bucket=bucket, Key="main/")
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="main/", Body=b"not a marker")
    assert exc.value.response["Error"]["Code"] == "InvalidArgument"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="nobranch/", Body=b"")
    assert exc.value.response["Error"]["Code"] == "NoSuchBucket"


def test_bulk_deletes_of_missing_keys_and_the_root_marker_succeed(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/data/a", Body=b"a")
    keys = ["main/data/a", "main/data/missing", "main/data/", "main/"]
    result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    assert sorted(d["Key"] for d in result["Deleted"]) == sorted(keys)
    assert not result.get("Errors")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/")["KeyCount"] == 0
    s3.delete_object(Bucket=bucket, Key="main/never-there")  # a single missing key: 204 too


def test_rename_is_copy_then_delete(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/in/part-0", Body=b"payload")
    s3.copy_object(Bucket=bucket, Key="main/out/part-0", CopySource={"Bucket": bucket, "Key": "main/in/part-0"})
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/in/part-0"}, {"Key": "main/in/"}]})
    assert s3.get_object(Bucket=bucket, Key="main/out/part-0")["Body"].read() == b"payload"
    assert s3.list_objects_v2(Bucket=bucket, Prefix="main/in/")["KeyCount"] == 0
