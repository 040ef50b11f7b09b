"""S3 and the REST API answer on one port at once: a signed request is S3, the rest under
/api/v1 is the API."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lakefs_sdk
import pytest
from botocore.exceptions import ClientError

from tests.e2e.api.conftest import Api


def test_s3_and_rest_on_the_same_port_concurrently(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    s3 = api.stack.client()
    branches = lakefs_sdk.BranchesApi(client)

    def s3_writes(i: int) -> str:
        key = f"obj-{i}"
        s3.put_object(Bucket=repo, Key=f"main/{key}", Body=secrets.token_bytes(64))
        return key

    def rest_reads(i: int) -> Any:
        return lakefs_sdk.RepositoriesApi(client).get_repository(repo).id

    with ThreadPoolExecutor(8) as pool:
        writes = [pool.submit(s3_writes, i) for i in range(20)]
        reads = [pool.submit(rest_reads, i) for i in range(20)]
        keys = sorted(f.result() for f in writes)
        assert {f.result() for f in reads} == {repo}
    assert [d.path for d in branches.diff_branch(repo, "main", amount=100).results] == keys
    # The S3 side sees the repository as a bucket, and an S3 request under /api/v1 is still S3.
    assert repo in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    # (path /api/v1/...: bucket "api", which does not exist, answered in S3's XML).
    with pytest.raises(ClientError) as failed:
        s3.list_objects_v2(Bucket="api", Prefix="v1/")
    assert failed.value.response["Error"]["Code"] == "NoSuchBucket"
