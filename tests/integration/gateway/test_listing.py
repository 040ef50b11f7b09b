"""ListObjects v1 and v2 through the gateway: parameters, refs at the root, and a model test of
pagination with delimiters against a plain sorted list."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import unquote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.support.gateway_stack import GatewayStack


def stage(gw: GatewayStack, repo: str, keys: list[str], branch: str = "main") -> None:
    for key in keys:
        entry = pb.Entry(physical_address=f"data/{secrets.token_hex(8)}", size=1, etag="0" * 32)
        gw.graveler.StageEntry(api.StageEntryRequest(repository=repo, branch=branch, key=key, entry=entry))


def test_refs_are_common_prefixes_at_the_root(gw: GatewayStack, s3: Any, bucket: str) -> None:
    gw.graveler.CreateBranch(api.CreateBranchRequest(repository=bucket, name="dev", source_ref="main"))
    stage(gw, bucket, ["a", "b/c"], branch="dev")
    root = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in root["CommonPrefixes"]] == ["dev/", "main/"]
    recursive = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in recursive["Contents"]] == ["dev/a", "dev/b/c"]
    inside = s3.list_objects_v2(Bucket=bucket, Prefix="dev/", Delimiter="/")
    assert [o["Key"] for o in inside["Contents"]] == ["dev/a"]
    assert [p["Prefix"] for p in inside["CommonPrefixes"]] == ["dev/b/"]


def test_parameters(gw: GatewayStack, s3: Any, bucket: str) -> None:
    keys = [f"k/{i:02d}" for i in range(7)] + ["sp ace/+plus", "z/ü"]
    stage(gw, bucket, keys)
    page = s3.list_objects_v2(Bucket=bucket, Prefix="main/k/", MaxKeys=3, StartAfter="main/k/01")
    assert [o["Key"] for o in page["Contents"]] == ["main/k/02", "main/k/03", "main/k/04"]
    assert page["IsTruncated"] and page["KeyCount"] == 3
    nxt = s3.list_objects_v2(Bucket=bucket, Prefix="main/k/", ContinuationToken=page["NextContinuationToken"])
    assert [o["Key"] for o in nxt["Contents"]] == ["main/k/05", "main/k/06"]
    assert not nxt["IsTruncated"]
    v1 = s3.list_objects(Bucket=bucket, Prefix="main/k/", Marker="main/k/04", MaxKeys=1)
    assert [o["Key"] for o in v1["Contents"]] == ["main/k/05"] and v1["IsTruncated"]
    assert "Owner" in v1["Contents"][0]
    assert "Owner" not in page["Contents"][0]
    owned = s3.list_objects_v2(Bucket=bucket, Prefix="main/k/", FetchOwner=True, MaxKeys=1)
    assert owned["Contents"][0]["Owner"]["ID"] == "admin"
    raw = s3.list_objects_v2(Bucket=bucket, Prefix="main/sp", EncodingType="url")
    # Asked for explicitly, boto3 leaves the encoding in place (it decodes only what it asked for itself).
    assert [o["Key"] for o in raw["Contents"]] == ["main/sp%20ace/%2Bplus"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/z/")["Contents"]] == ["main/z/ü"]


def model_listing(keys: list[str], prefix: str, delimiter: str) -> list[str]:
    items = set()
    for key in keys:
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if delimiter and delimiter in rest:
            items.add(prefix + rest[: rest.index(delimiter) + 1])
        else:
            items.add(key)
    return sorted(items)


_segment = st.sampled_from(["a", "b", "c", "a-b", "a.b", "ab"])
_key = st.lists(_segment, min_size=1, max_size=4).map("/".join)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(_key, min_size=0, max_size=25, unique=True),
    prefix=st.sampled_from(["", "a", "a/", "a/b", "b/", "a-b/"]),
    delimiter=st.sampled_from(["", "/"]),
    max_keys=st.integers(min_value=1, max_value=6),
    v2=st.booleans(),
)
def test_pagination_matches_a_sorted_list(
    gw: GatewayStack, s3: Any, keys: list[str], prefix: str, delimiter: str, max_keys: int, v2: bool
) -> None:
    repo = f"m-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=repo)
    stage(gw, repo, keys)
    expected = model_listing([f"main/{k}" for k in keys], f"main/{prefix}", delimiter)
    listed: list[str] = []
    kwargs: dict[str, Any] = {"Bucket": repo, "Prefix": f"main/{prefix}", "MaxKeys": max_keys, "Delimiter": delimiter}
    for _ in range(100):
        page = s3.list_objects_v2(**kwargs) if v2 else s3.list_objects(**kwargs)
        found = [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        assert len(found) <= max_keys
        listed += sorted(found)
        if not page["IsTruncated"]:
            break
        if v2:
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        else:
            kwargs["Marker"] = unquote(page.get("NextMarker") or sorted(found)[-1])
    assert listed == expected
