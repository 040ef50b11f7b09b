"""ListObjects v1 and v2 through the gateway: parameters, refs at the root, and a model test of
pagination with delimiters against a plain sorted list."""

from __future__ import annotations

import secrets
from typing import Any

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
    """S3: a key whose rest after the prefix holds the delimiter rolls up to its first occurrence."""
    items = set()
    for key in keys:
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if delimiter and delimiter in rest:
            items.add(prefix + rest[: rest.index(delimiter) + len(delimiter)])
        else:
            items.add(key)
    return sorted(items)


def model_root(refs: list[str], prefix: str, delimiter: str) -> set[str]:
    """At the root, a ref is a "directory" even when empty: its keys' common prefix, if they all share one."""
    out = set()
    for ref in refs:
        rest = f"{ref}/"[len(prefix) :]
        if "/" not in prefix and ref.startswith(prefix) and delimiter and delimiter in rest:
            out.add(prefix + rest[: rest.index(delimiter) + len(delimiter)])
    return out


def list_everything(s3: Any, v2: bool, max_keys: int, **kwargs: Any) -> list[str]:
    """Every key and common prefix of every page, following NextContinuationToken or NextMarker."""
    listed: list[str] = []
    kwargs["MaxKeys"] = max_keys
    for _ in range(200):
        page = s3.list_objects_v2(**kwargs) if v2 else s3.list_objects(**kwargs)
        found = [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        assert len(found) <= max_keys
        if kwargs.get("Delimiter"):
            assert page["Delimiter"] == kwargs["Delimiter"]
        listed += sorted(found)
        if not page["IsTruncated"]:
            return listed
        if v2:
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        else:
            # boto3 asked for encoding-type=url itself, so it has already decoded NextMarker.
            kwargs["Marker"] = page.get("NextMarker") or sorted(found)[-1]
    raise AssertionError("pagination did not end")


def test_any_delimiter(gw: GatewayStack, s3: Any, bucket: str) -> None:
    stage(gw, bucket, ["a-1", "a-2/x", "b", "c-d-e", "c/f", "%-g"])
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="-")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["main/%-", "main/a-", "main/c-"]
    assert [o["Key"] for o in listed["Contents"]] == ["main/b", "main/c/f"]
    assert listed["Delimiter"] == "-" and listed["KeyCount"] == 5
    deeper = s3.list_objects_v2(Bucket=bucket, Prefix="main/c-", Delimiter="-")
    assert [p["Prefix"] for p in deeper["CommonPrefixes"]] == ["main/c-d-"]
    assert "Contents" not in deeper
    # A multi-character delimiter, and one that needs escaping with encoding-type=url.
    two = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="2/")
    assert [p["Prefix"] for p in two["CommonPrefixes"]] == ["main/a-2/"]
    percent = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="%")
    assert [p["Prefix"] for p in percent["CommonPrefixes"]] == ["main/%"]
    assert percent["Delimiter"] == "%"
    raw = s3.list_objects_v2(Bucket=bucket, Prefix="main/", Delimiter="%", EncodingType="url")
    assert raw["Delimiter"] == "%25" and [p["Prefix"] for p in raw["CommonPrefixes"]] == ["main/%25"]
    # Pages of one continue past each common prefix, v2 and v1 alike.
    expected = ["main/%-", "main/a-", "main/b", "main/c-", "main/c/f"]
    for v2 in (True, False):
        assert list_everything(s3, v2, 1, Bucket=bucket, Prefix="main/", Delimiter="-") == expected


def test_any_delimiter_at_the_root(gw: GatewayStack, s3: Any, bucket: str) -> None:
    for name in ["dev-a", "dev-b", "dev"]:
        gw.graveler.CreateBranch(api.CreateBranchRequest(repository=bucket, name=name, source_ref="main"))
    stage(gw, bucket, ["x-1", "x-2", "y"], branch="dev")
    stage(gw, bucket, ["z"], branch="main")
    # "dev-a/" and "dev-b/" collapse into one common prefix; "dev/" and "main/" hold no "-".
    expected = ["dev-", "dev/x-", "dev/y", "main/z"]
    for v2 in (True, False):
        for max_keys in (1, 2, 1000):
            assert list_everything(s3, v2, max_keys, Bucket=bucket, Delimiter="-") == expected
    root = s3.list_objects_v2(Bucket=bucket, Delimiter="-")
    assert [p["Prefix"] for p in root["CommonPrefixes"]] == ["dev-", "dev/x-"]
    assert [o["Key"] for o in root["Contents"]] == ["dev/y", "main/z"]
    # The delimiter found in the ref name after the prefix: every ref starting "d" is "de".
    assert list_everything(s3, True, 1000, Bucket=bucket, Prefix="d", Delimiter="e") == ["de"]
    assert list_everything(s3, True, 1000, Bucket=bucket, Prefix="ma", Delimiter="n") == ["main"]
    assert list_everything(s3, True, 1000, Bucket=bucket, Prefix="dev", Delimiter="/") == ["dev-a/", "dev-b/", "dev/"]
    # "v/" is only in "dev/", so only it collapses; the other refs are listed, and are empty.
    assert list_everything(s3, True, 1000, Bucket=bucket, Prefix="de", Delimiter="v/") == ["dev/"]
    # An occurrence that starts inside the prefix does not count: dev's keys are listed.
    with_slash = list_everything(s3, True, 1000, Bucket=bucket, Prefix="dev", Delimiter="v/")
    assert with_slash == ["dev/x-1", "dev/x-2", "dev/y"]


_segment = st.sampled_from(["a", "b", "c", "a-b", "a.b", "ab", "a%2b", "-"])
_key = st.lists(_segment, min_size=1, max_size=4).map("/".join)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(_key, min_size=0, max_size=25, unique=True),
    prefix=st.sampled_from(
        ["", "m", "main", "x", "main/", "main/a", "main/a/", "main/a/b", "main/b/", "main/a-b/", "main/a%"]
    ),
    delimiter=st.sampled_from(["", "/", "-", "a", "%2", "b/"]),
    extra_branch=st.sampled_from(["", "dev-a", "ma", "m-b"]),
    max_keys=st.integers(min_value=1, max_value=6),
    v2=st.booleans(),
)
def test_pagination_matches_a_sorted_list(
    gw: GatewayStack,
    s3: Any,
    keys: list[str],
    prefix: str,
    delimiter: str,
    extra_branch: str,
    max_keys: int,
    v2: bool,
) -> None:
    repo = f"m-{secrets.token_hex(5)}"
    s3.create_bucket(Bucket=repo)
    refs = ["main"]
    if extra_branch:  # an empty branch: a common prefix at the root only when it collapses
        gw.graveler.CreateBranch(api.CreateBranchRequest(repository=repo, name=extra_branch, source_ref="main"))
        refs.append(extra_branch)
    stage(gw, repo, keys)
    full_keys = [f"main/{k}" for k in keys]
    expected = sorted(set(model_listing(full_keys, prefix, delimiter)) | model_root(refs, prefix, delimiter))
    listed = list_everything(s3, v2, max_keys, Bucket=repo, Prefix=prefix, Delimiter=delimiter)
    assert listed == expected
