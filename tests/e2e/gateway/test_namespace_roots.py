"""CreateBucket goes through graveler's namespace rules: with graveler.allowed_namespace_roots
set, a bucket whose templated namespace lies outside them is refused with an S3 error and
not created, one inside works, and a repository created with no namespace is stored below
the first root and served by the gateway. Real processes, a real S3 client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from silt.graveler.v1 import graveler_pb2 as api
from tests.support.gateway_stack import GatewayStack, gateway_stack


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    overrides = {
        "graveler": {"allowed_namespace_roots": ["local://lake/"]},
        # Outside the roots on purpose: the top of the local store, where no root allows a bucket.
        "gateways": {"s3": {"storage_namespace_template": "local://{repo}"}},
    }
    with gateway_stack(tmp_path_factory.mktemp("gateway-roots"), overrides=overrides) as stack:
        yield stack


def test_create_bucket_outside_the_roots_is_refused(lake: GatewayStack) -> None:
    s3: Any = lake.client()
    with pytest.raises(ClientError) as caught:
        s3.create_bucket(Bucket="outside-roots")
    error = caught.value.response
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "InvalidArgument"), error
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "outside-roots" not in names


def test_a_derived_namespace_is_below_the_first_root_and_served(lake: GatewayStack) -> None:
    info = lake.graveler.CreateRepository(api.CreateRepositoryRequest(name="derived"))
    assert info.storage_namespace == "local://lake/derived"
    s3: Any = lake.client()
    s3.put_object(Bucket="derived", Key="main/k", Body=b"bytes")
    assert s3.get_object(Bucket="derived", Key="main/k")["Body"].read() == b"bytes"
    assert (lake.stack.data_dir / "data" / "lake" / "derived").is_dir()
