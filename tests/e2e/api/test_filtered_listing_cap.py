"""A listing filtered per key scans at most MAX_SCANNED entries per request (edge/core/filtered_scan.py),
through real servers and real clients: more hidden keys than that before the one key a user may
read, listed by the REST API (lakefs-sdk: objects and a branch's diff) and the S3 gateway (boto3:
ListObjectsV2 and ListObjects). Each first page stops at the cap with nothing to show, says there is
more, and continues with a cursor that shows no hidden key; the next page brings the readable key.
A cursor forged, altered or taken to another listing is refused."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import lakefs_sdk
import pytest
from botocore.exceptions import ClientError
from lakefs_sdk.exceptions import ApiException

from edge.core.filtered_scan import CURSOR_MARK, MAX_SCANNED
from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import model_pb2 as pb
from tests.e2e.api.conftest import Api
from tests.e2e.api.test_object_policies import REPO_ARN, User, _user_with_policy

HIDDEN = MAX_SCANNED + 50


@pytest.fixture
def crowded(api: Api, repo: str) -> str:
    """The repository with HIDDEN keys under gold/ staged on main, then raw/x."""
    items = [_staged(f"gold/{i:05d}") for i in range(HIDDEN)] + [_staged("raw/x")]
    batches = [items[i : i + 256] for i in range(0, len(items), 256)]
    with ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda batch: api.stack.graveler.StageEntries(
                    gapi.StageEntriesRequest(repository=repo, branch="main", entries=batch), timeout=60
                ),
                batches,
            )
        )
    return repo


def _staged(key: str) -> gapi.StagedEntry:
    return gapi.StagedEntry(key=key, entry=pb.Entry(physical_address=f"data/{key}", size=1, etag="0" * 32))


def _raw_reader(api: Api, repo: str) -> User:
    allow = {"effect": "allow", "action": ["fs:ReadObject", "fs:ListObjects"]}
    user, _ = _user_with_policy(api, [{**allow, "resource": f"{REPO_ARN}{repo}/object/raw/*"}])
    return user


def _status(call: object) -> tuple[int, str]:
    with pytest.raises(ApiException) as caught:
        call()  # type: ignore[operator]
    return caught.value.status, json.loads(caught.value.body)["message"]


def test_rest_listing_stops_at_the_cap_and_resumes_from_a_sealed_cursor(api: Api, crowded: str) -> None:
    user = _raw_reader(api, crowded)
    first = user.objects.list_objects(crowded, "main", amount=10)
    assert first.results == [] and first.pagination.has_more
    cursor = first.pagination.next_offset
    assert cursor.startswith(CURSOR_MARK) and "gold" not in cursor
    rest = user.objects.list_objects(crowded, "main", amount=10, after=cursor)
    assert [r.path for r in rest.results] == ["raw/x"] and not rest.pagination.has_more

    # Forged, altered, or handed to another listing or user: 400, nothing listed.
    assert _status(lambda: user.objects.list_objects(crowded, "main", after=CURSOR_MARK + "Z29sZC8wMDA"))[0] == 400
    altered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    assert _status(lambda: user.objects.list_objects(crowded, "main", after=altered))[0] == 400
    assert _status(lambda: user.objects.list_objects(crowded, "main", prefix="g", after=cursor))[0] == 400
    other = _raw_reader(api, crowded)
    assert _status(lambda: other.objects.list_objects(crowded, "main", after=cursor))[0] == 400
    # A plain key as `after` is a key where the user may read; among hidden keys it is refused,
    # lest the cap tell how many hidden keys follow it (a binary search would spell them out).
    plain = user.objects.list_objects(crowded, "main", after="raw/a")
    assert [r.path for r in plain.results] == ["raw/x"]
    status, message = _status(lambda: user.objects.list_objects(crowded, "main", after=f"gold/{HIDDEN - 1:05d}"))
    assert status == 400 and "gold" not in message
    assert _status(lambda: user.objects.list_objects(crowded, "main", after="gold/0"))[0] == 400


def test_rest_diff_stops_at_the_cap_too(api: Api, crowded: str) -> None:
    # ReadRepo, as lakeFS's actions grant it, with a Deny on gold/*: filtered, every key but those.
    reads = ["fs:Read*", "fs:List*", "retention:GetGarbageCollectionRules", "branches:GetBranchProtectionRules"]
    reads += ["pr:ReadPullRequest", "pr:ListPullRequests"]
    user, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": reads, "resource": f"{REPO_ARN}{crowded}"},
            {"effect": "allow", "action": reads, "resource": f"{REPO_ARN}{crowded}/*"},
            {"effect": "deny", "action": ["fs:ReadObject"], "resource": f"{REPO_ARN}{crowded}/object/gold/*"},
        ],
    )
    branches = lakefs_sdk.BranchesApi(user.sdk)
    first = branches.diff_branch(crowded, "main", amount=10)
    assert first.results == [] and first.pagination.has_more
    cursor = first.pagination.next_offset
    assert cursor.startswith(CURSOR_MARK) and "gold" not in cursor
    rest = branches.diff_branch(crowded, "main", amount=10, after=cursor)
    assert [d.path for d in rest.results] == ["raw/x"] and not rest.pagination.has_more
    # The objects listing's cursor is not the diff's.
    listing = user.objects.list_objects(crowded, "main", amount=10).pagination.next_offset
    assert _status(lambda: branches.diff_branch(crowded, "main", after=listing))[0] == 400


@pytest.mark.parametrize("v2", [True, False])
def test_s3_listing_stops_at_the_cap_and_resumes_from_a_sealed_token(api: Api, crowded: str, v2: bool) -> None:
    user = _raw_reader(api, crowded)
    s3 = user.s3
    if v2:
        first = s3.list_objects_v2(Bucket=crowded, Prefix="main/", MaxKeys=10)
        token = first["NextContinuationToken"]
    else:
        first = s3.list_objects(Bucket=crowded, Prefix="main/", MaxKeys=10)
        token = first["NextMarker"]
    assert "Contents" not in first and first["IsTruncated"]
    assert token.startswith(CURSOR_MARK) and "gold" not in token
    if v2:
        rest = s3.list_objects_v2(Bucket=crowded, Prefix="main/", MaxKeys=10, ContinuationToken=token)
    else:
        rest = s3.list_objects(Bucket=crowded, Prefix="main/", MaxKeys=10, Marker=token)
    assert [c["Key"] for c in rest["Contents"]] == ["main/raw/x"] and not rest["IsTruncated"]
    # Every page of a paginator, as clients walk a listing.
    name = "list_objects_v2" if v2 else "list_objects"
    pages = list(s3.get_paginator(name).paginate(Bucket=crowded, Prefix="main/"))
    assert [c["Key"] for p in pages for c in p.get("Contents", [])] == ["main/raw/x"]

    altered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    with pytest.raises(ClientError) as caught:
        if v2:
            s3.list_objects_v2(Bucket=crowded, Prefix="main/", ContinuationToken=altered)
        else:
            s3.list_objects(Bucket=crowded, Prefix="main/", Marker=altered)
    assert caught.value.response["Error"]["Code"] == "InvalidArgument"
    with pytest.raises(ClientError) as caught:  # a hidden key named as the position
        if v2:
            s3.list_objects_v2(Bucket=crowded, Prefix="main/", StartAfter="main/gold/0")
        else:
            s3.list_objects(Bucket=crowded, Prefix="main/", Marker="main/gold/0")
    assert caught.value.response["Error"]["Code"] == "InvalidArgument"
    named = {"StartAfter": "main/raw/a"} if v2 else {"Marker": "main/raw/a"}
    after_raw = (
        s3.list_objects_v2(Bucket=crowded, Prefix="main/", **named)
        if v2
        else s3.list_objects(Bucket=crowded, Prefix="main/", **named)
    )
    assert [c["Key"] for c in after_raw["Contents"]] == ["main/raw/x"]
    with pytest.raises(ClientError) as caught:  # another listing's
        if v2:
            s3.list_objects_v2(Bucket=crowded, Prefix="main/g", ContinuationToken=token)
        else:
            s3.list_objects(Bucket=crowded, Prefix="main/g", Marker=token)
    assert caught.value.response["Error"]["Code"] == "InvalidArgument"
