"""Policies scoped to objects, through real servers and real clients: a lakeFS policy on
`arn:lakefs:fs:::repository/<repo>/object/raw/*` created through the REST API, and every way to
reach an object held to it: the S3 gateway (boto3: GET, HEAD, copy, PUT, DELETE, multipart,
ListObjects v1/v2), the REST API (lakefs-sdk: get, stat, ls, upload, delete, staging, copy) and
presigned URLs. A refusal is S3's AccessDenied or lakeFS's 403 JSON; a listing shows only what
the caller may read."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from botocore.exceptions import ClientError
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api

REPO_ARN = "arn:lakefs:fs:::repository/"
KEYS = {"raw/a": b"raw a", "raw/sub/c": b"raw c", "gold/b": b"gold b", "top": b"top"}
HTTP = urllib3.PoolManager(retries=False, timeout=30)


@dataclass
class User:
    creds: Credentials
    s3: Any  # boto3's S3 client at the gateway
    sdk: lakefs_sdk.ApiClient

    @property
    def objects(self) -> lakefs_sdk.ObjectsApi:
        return lakefs_sdk.ObjectsApi(self.sdk)

    def basic(self) -> dict[str, str]:
        secret = self.creds.secret_access_key.get_secret_value()
        return urllib3.make_headers(basic_auth=f"{self.creds.access_key_id}:{secret}")


def _user_with_policy(api: Api, statements: list[dict[str, Any]]) -> tuple[User, lakefs_sdk.Policy]:
    """A new user whose only policy is statements (lakeFS's vocabulary), created by the admin
    through the REST API as the UI's policy editor does."""
    auth = lakefs_sdk.AuthApi(api.sdk())
    user_id, policy_id = f"u-{secrets.token_hex(4)}", f"p-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    created = auth.create_policy(lakefs_sdk.Policy.from_dict({"id": policy_id, "statement": statements}))
    auth.attach_policy_to_user(user_id, policy_id)
    issued = auth.create_credentials(user_id)
    creds = Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))
    return User(creds, api.stack.client(creds), api.sdk(creds)), created


@pytest.fixture
def weather(api: Api, repo: str) -> str:
    """The repository with KEYS on main."""
    admin = api.stack.client()
    for key, data in KEYS.items():
        admin.put_object(Bucket=repo, Key=f"main/{key}", Body=data)
    return repo


def _s3_code(call: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    code: str = caught.value.response["Error"]["Code"]
    return code


def _s3_denied(call: Any) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert error["Error"]["Code"] == "AccessDenied", error
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403


def _api_denied(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value
    message: str = json.loads(caught.value.body)["message"]
    return message


def _s3_keys(user: User, repo: str, v2: bool = True, **args: Any) -> tuple[list[str], list[str]]:
    listing = user.s3.list_objects_v2 if v2 else user.s3.list_objects
    page = listing(Bucket=repo, **args)
    keys = [item["Key"] for item in page.get("Contents", [])]
    prefixes = [item["Prefix"] for item in page.get("CommonPrefixes", [])]
    return keys, prefixes


def _api_paths(user: User, repo: str, **args: Any) -> list[str]:
    return [row.path for row in user.objects.list_objects(repo, "main", **args).results]


READ_RAW = {"effect": "allow", "action": ["fs:ReadObject", "fs:ListObjects"]}


def test_the_policy_is_stored_and_read_back_as_enforced(api: Api, weather: str) -> None:
    _, created = _user_with_policy(api, [{**READ_RAW, "resource": f"{REPO_ARN}{weather}/object/raw/*"}])
    shown = [(s.effect, s.action, s.resource) for s in created.statement]
    assert shown == [("allow", ["ReadObject"], f"{weather}/raw/*")]
    assert lakefs_sdk.AuthApi(api.sdk()).get_policy(created.id) == created


def test_prefix_limited_reads_on_every_path(api: Api, weather: str) -> None:
    user, _ = _user_with_policy(api, [{**READ_RAW, "resource": f"{REPO_ARN}{weather}/object/raw/*"}])

    # S3 gateway: GET, HEAD, ranged GET; the bucket is there for the reader.
    assert user.s3.get_object(Bucket=weather, Key="main/raw/a")["Body"].read() == KEYS["raw/a"]
    assert user.s3.head_object(Bucket=weather, Key="main/raw/sub/c")["ContentLength"] == len(KEYS["raw/sub/c"])
    user.s3.head_bucket(Bucket=weather)
    _s3_denied(lambda: user.s3.get_object(Bucket=weather, Key="main/gold/b"))
    _s3_denied(lambda: user.s3.get_object(Bucket=weather, Key="main/gold/missing"))  # no existence oracle
    assert _s3_code(lambda: user.s3.head_object(Bucket=weather, Key="main/gold/b")) == "403"
    _s3_denied(lambda: user.s3.get_object(Bucket=weather, Key="main/top", Range="bytes=0-1"))

    # S3 listings: the repository root, a branch, v1 and v2, with and without a delimiter.
    assert _s3_keys(user, weather, Delimiter="/") == ([], ["main/"])
    assert _s3_keys(user, weather, Prefix="main/", Delimiter="/") == ([], ["main/raw/"])
    assert _s3_keys(user, weather, v2=False, Prefix="main/", Delimiter="/") == ([], ["main/raw/"])
    assert _s3_keys(user, weather, Prefix="main/") == (["main/raw/a", "main/raw/sub/c"], [])
    assert _s3_keys(user, weather, v2=False, Prefix="main/") == (["main/raw/a", "main/raw/sub/c"], [])
    assert _s3_keys(user, weather, Prefix="main/gold/") == ([], [])
    # Paging over refused keys: one key a page, each page still only readable keys.
    first = user.s3.list_objects_v2(Bucket=weather, Prefix="main/", MaxKeys=1)
    assert [i["Key"] for i in first["Contents"]] == ["main/raw/a"] and first["IsTruncated"]
    rest = user.s3.list_objects_v2(
        Bucket=weather, Prefix="main/", MaxKeys=1, ContinuationToken=first["NextContinuationToken"]
    )
    assert [i["Key"] for i in rest["Contents"]] == ["main/raw/sub/c"]

    # REST API: get, stat, ls (root, delimited, paged), what the UI's object browser calls.
    assert user.objects.get_object(weather, "main", "raw/a") == KEYS["raw/a"]
    assert user.objects.stat_object(weather, "main", "raw/sub/c").size_bytes == len(KEYS["raw/sub/c"])
    assert "gold/b" in _api_denied(lambda: user.objects.get_object(weather, "main", "gold/b"))
    _api_denied(lambda: user.objects.stat_object(weather, "main", "gold/b"))
    with pytest.raises(ApiException) as head:  # a HEAD answer has no body
        user.objects.head_object(weather, "main", "top")
    assert head.value.status == 403
    assert _api_paths(user, weather, delimiter="/") == ["raw/"]
    assert _api_paths(user, weather) == ["raw/a", "raw/sub/c"]
    assert _api_paths(user, weather, prefix="raw/", delimiter="/") == ["raw/a", "raw/sub/"]
    assert _api_paths(user, weather, prefix="gold/") == []
    page = user.objects.list_objects(weather, "main", amount=1)
    assert [r.path for r in page.results] == ["raw/a"] and page.pagination.has_more
    after = user.objects.list_objects(weather, "main", amount=1, after=page.pagination.next_offset)
    assert [r.path for r in after.results] == ["raw/sub/c"]
    assert not after.pagination.has_more  # `top` follows, unreadable: nothing is said of it

    # Presigned: issued for a readable key (the URL then needs no credentials), refused otherwise.
    stat = user.objects.stat_object(weather, "main", "raw/a", presign=True)
    assert HTTP.request("GET", stat.physical_address).data == KEYS["raw/a"]
    assert user.objects.get_object(weather, "main", "raw/a", presign=True) == KEYS["raw/a"]
    _api_denied(lambda: user.objects.get_object(weather, "main", "gold/b", presign=True))
    _api_denied(lambda: user.objects.stat_object(weather, "main", "gold/b", presign=True))
    listed = user.objects.list_objects(weather, "main", presign=True).results
    assert [r.path for r in listed] == ["raw/a", "raw/sub/c"]

    # Nothing else of the repository comes with object reads, nor any write.
    _api_denied(lambda: lakefs_sdk.BranchesApi(user.sdk).list_branches(weather))
    _s3_denied(lambda: user.s3.put_object(Bucket=weather, Key="main/raw/new", Body=b"x"))
    _api_denied(lambda: user.objects.delete_object(weather, "main", "raw/a"))
    _s3_denied(lambda: user.s3.list_objects_v2(Bucket=f"{weather}-not-mine"))


def test_prefix_limited_writes_on_every_path(api: Api, weather: str) -> None:
    resource = f"{REPO_ARN}{weather}/object/raw/*"
    user, created = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["fs:ReadObject", "fs:WriteObject", "fs:DeleteObject"], "resource": resource},
        ],
    )
    assert [s.action for s in created.statement] == [["ReadObject", "WriteObject", "DeleteObject"]]
    s3 = user.s3

    # S3 gateway: PUT, copy (source and destination), DELETE, DeleteObjects, multipart.
    s3.put_object(Bucket=weather, Key="main/raw/new", Body=b"new")
    _s3_denied(lambda: s3.put_object(Bucket=weather, Key="main/gold/new", Body=b"x"))
    s3.copy_object(Bucket=weather, Key="main/raw/copy", CopySource=f"{weather}/main/raw/a")
    _s3_denied(lambda: s3.copy_object(Bucket=weather, Key="main/gold/copy", CopySource=f"{weather}/main/raw/a"))
    _s3_denied(lambda: s3.copy_object(Bucket=weather, Key="main/raw/stolen", CopySource=f"{weather}/main/gold/b"))
    _s3_denied(lambda: s3.delete_object(Bucket=weather, Key="main/gold/b"))
    s3.delete_object(Bucket=weather, Key="main/raw/copy")
    outcome = s3.delete_objects(Bucket=weather, Delete={"Objects": [{"Key": "main/raw/new"}, {"Key": "main/gold/b"}]})
    assert [d["Key"] for d in outcome.get("Deleted", [])] == ["main/raw/new"]
    assert [(e["Key"], e["Code"]) for e in outcome["Errors"]] == [("main/gold/b", "AccessDenied")]
    _s3_denied(lambda: s3.create_multipart_upload(Bucket=weather, Key="main/gold/big"))
    upload = s3.create_multipart_upload(Bucket=weather, Key="main/raw/big")["UploadId"]
    part = s3.upload_part(Bucket=weather, Key="main/raw/big", UploadId=upload, PartNumber=1, Body=b"p" * 10)
    s3.complete_multipart_upload(
        Bucket=weather,
        Key="main/raw/big",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.get_object(Bucket=weather, Key="main/raw/big")["Body"].read() == b"p" * 10

    # REST API: upload, copy, delete, bulk delete, the staging flow.
    admin_s3 = api.stack.client()
    upload_path = f"/repositories/{weather}/branches/main/objects?path="
    headers = {**user.basic(), "Content-Type": "application/octet-stream"}
    assert api.request("POST", upload_path + "raw/r", body=b"r", headers=headers).status == 201
    refused = api.request("POST", upload_path + "gold/r", body=b"r", headers=headers)
    assert refused.status == 403 and "gold/r" in json.loads(refused.data)["message"]
    _api_denied(lambda: user.objects.delete_object(weather, "main", "gold/b"))
    user.objects.delete_object(weather, "main", "raw/r")
    copy = lakefs_sdk.ObjectCopyCreation(src_path="raw/a")
    user.objects.copy_object(weather, "main", "raw/a2", copy)
    _api_denied(lambda: user.objects.copy_object(weather, "main", "gold/a2", copy))
    stolen = lakefs_sdk.ObjectCopyCreation(src_path="gold/b")
    _api_denied(lambda: user.objects.copy_object(weather, "main", "raw/b2", stolen))
    errors = user.objects.delete_objects(weather, "main", lakefs_sdk.PathList(paths=["raw/a2", "gold/b"])).errors
    assert [(e.path, e.status_code) for e in errors] == [("gold/b", 403)]
    staging = lakefs_sdk.StagingApi(user.sdk)
    assert staging.get_physical_address(weather, "main", "raw/staged").physical_address
    _api_denied(lambda: staging.get_physical_address(weather, "main", "gold/staged"))

    # A writer that may not read: heads the bucket, writes raw/, reads nothing.
    writer, _ = _user_with_policy(api, [{"effect": "allow", "action": ["fs:WriteObject"], "resource": resource}])
    writer.s3.head_bucket(Bucket=weather)
    writer.s3.put_object(Bucket=weather, Key="main/raw/blind", Body=b"b")
    _s3_denied(lambda: writer.s3.get_object(Bucket=weather, Key="main/raw/blind"))
    _s3_denied(lambda: writer.s3.list_objects_v2(Bucket=weather, Prefix="main/"))
    s3.delete_object(Bucket=weather, Key="main/raw/blind")

    # What the admin sees: the writes under raw/ landed, gold/ untouched.
    keys = [o["Key"] for o in admin_s3.list_objects_v2(Bucket=weather, Prefix="main/")["Contents"]]
    assert keys == ["main/gold/b", "main/raw/a", "main/raw/big", "main/raw/sub/c", "main/top"]


def test_object_deny_wins_over_a_whole_repository_allow(api: Api, weather: str) -> None:
    reads = ["fs:Read*", "fs:List*", "retention:GetGarbageCollectionRules", "branches:GetBranchProtectionRules"]
    reads += ["pr:ReadPullRequest", "pr:ListPullRequests"]
    user, created = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": reads, "resource": f"{REPO_ARN}{weather}"},
            {"effect": "allow", "action": reads, "resource": f"{REPO_ARN}{weather}/*"},
            {"effect": "deny", "action": ["fs:ReadObject"], "resource": f"{REPO_ARN}{weather}/object/gold/*"},
        ],
    )
    assert [(s.effect, s.action, s.resource) for s in created.statement] == [
        ("allow", ["ReadRepo"], weather),
        ("deny", ["ReadObject"], f"{weather}/gold/*"),
    ]
    assert user.s3.get_object(Bucket=weather, Key="main/top")["Body"].read() == KEYS["top"]
    _s3_denied(lambda: user.s3.get_object(Bucket=weather, Key="main/gold/b"))
    _api_denied(lambda: user.objects.get_object(weather, "main", "gold/b"))
    assert _s3_keys(user, weather, Prefix="main/", Delimiter="/") == (["main/top"], ["main/raw/"])
    assert _api_paths(user, weather, delimiter="/") == ["raw/", "top"]
    assert _api_paths(user, weather) == ["raw/a", "raw/sub/c", "top"]
    # The repository itself stays readable: branches, as before.
    branches = lakefs_sdk.BranchesApi(user.sdk)
    assert [b.id for b in branches.list_branches(weather).results] == ["main"]

    # Diffs show only the changes to readable keys; what shows keys unfiltered is refused.
    changed = [d.path for d in branches.diff_branch(weather, "main").results]
    assert changed == ["raw/a", "raw/sub/c", "top"]
    assert [d.path for d in branches.diff_branch(weather, "main", delimiter="/").results] == ["raw/", "top"]
    first = branches.diff_branch(weather, "main", amount=1)  # gold/b sorts first, hidden
    assert [d.path for d in first.results] == ["raw/a"]
    assert (first.pagination.has_more, first.pagination.next_offset) == (True, "raw/a")
    rest = branches.diff_branch(weather, "main", amount=5, after=first.pagination.next_offset)
    assert [d.path for d in rest.results] == ["raw/sub/c", "top"] and not rest.pagination.has_more
    admin = api.sdk()
    lakefs_sdk.CommitsApi(admin).commit(weather, "main", lakefs_sdk.CommitCreation(message="keys"))
    lakefs_sdk.BranchesApi(admin).create_branch(weather, lakefs_sdk.BranchCreation(name="dev", source="main"))
    admin_s3 = api.stack.client()
    for key in ("gold/new", "raw/new"):
        admin_s3.put_object(Bucket=weather, Key=f"dev/{key}", Body=b"new")
    lakefs_sdk.CommitsApi(admin).commit(weather, "dev", lakefs_sdk.CommitCreation(message="more"))
    refs = lakefs_sdk.RefsApi(user.sdk)
    assert [d.path for d in refs.diff_refs(weather, "main", "dev", type="two_dot").results] == ["raw/new"]
    assert [d.path for d in lakefs_sdk.RefsApi(admin).diff_refs(weather, "main", "dev").results] == [
        "gold/new",
        "raw/new",
    ]
    assert "every key" in _api_denied(lambda: refs.log_commits(weather, "dev", objects=["gold/new"]))
    assert [c.message for c in refs.log_commits(weather, "dev").results][:2] == ["more", "keys"]
    summary = api.request("GET", f"/repositories/{weather}/refs/main/diff/dev/summary", headers=user.basic())
    assert summary.status == 403 and "every key" in json.loads(summary.data)["message"]
    _s3_denied(lambda: user.s3.list_multipart_uploads(Bucket=weather))


def test_with_the_repository_as_lakefs_gives_it_the_repository_opens(api: Api, weather: str) -> None:
    """lakeFS's reader of some keys also gets the repository, its branches, commits and tags
    (and fs:ListObjects on it): here ReadRefs, which opens the repository in the web UI and
    lakeFS's clients and reads no key."""
    refs = ["fs:ReadRepository", "fs:ReadBranch", "fs:ListBranches", "fs:ReadCommit", "fs:ListCommits"]
    refs += ["fs:ReadTag", "fs:ListTags", "fs:ListObjects"]
    user, created = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": refs, "resource": f"{REPO_ARN}{weather}"},
            {"effect": "allow", "action": refs, "resource": f"{REPO_ARN}{weather}/*"},
            {**READ_RAW, "resource": f"{REPO_ARN}{weather}/object/raw/*"},
        ],
    )
    assert [(s.action, s.resource) for s in created.statement] == [
        (["ReadRefs"], weather),
        (["ReadObject"], f"{weather}/raw/*"),
    ]
    # What the web UI loads to open the repository, and lakeFS's clients before reading.
    assert lakefs_sdk.RepositoriesApi(user.sdk).get_repository(weather).id == weather
    assert weather in [r.id for r in lakefs_sdk.RepositoriesApi(user.sdk).list_repositories().results]
    assert [b.id for b in lakefs_sdk.BranchesApi(user.sdk).list_branches(weather).results] == ["main"]
    assert lakefs_sdk.BranchesApi(user.sdk).get_branch(weather, "main").id == "main"
    assert lakefs_sdk.RefsApi(user.sdk).log_commits(weather, "main").results
    assert weather in [b["Name"] for b in user.s3.list_buckets()["Buckets"]]
    # Keys as before: raw/ only.
    assert _api_paths(user, weather, delimiter="/") == ["raw/"]
    assert user.objects.get_object(weather, "main", "raw/a") == KEYS["raw/a"]
    _api_denied(lambda: user.objects.get_object(weather, "main", "gold/b"))
    # What shows keys unfiltered, or reads the repository whole, needs ReadRepo.
    _api_denied(lambda: lakefs_sdk.BranchesApi(user.sdk).diff_branch(weather, "main"))
    _api_denied(lambda: lakefs_sdk.RefsApi(user.sdk).log_commits(weather, "main", objects=["gold/b"]))


def test_an_object_deny_holds_on_presigned_multipart_and_committed_metadata(api: Api, weather: str) -> None:
    """Routes that name a key besides the usual object calls: a presigned multipart upload (its
    key, and a part copied from another key) asks per key; the committed metadata, whose ranges
    list every key, is refused to a caller any key is refused to."""
    user, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": weather},
            {"effect": "deny", "action": ["ReadObject", "WriteObject"], "resource": f"{weather}/gold/*"},
        ],
    )
    staging = f"/repositories/{weather}/branches/main/staging/pmpu"
    refused = api.request("POST", f"{staging}?path=gold/x&parts=1", headers=user.basic())
    assert refused.status == 403, refused.data
    opened = api.request("POST", f"{staging}?path=raw/x&parts=1", headers=user.basic())
    assert opened.status == 201, opened.data
    upload = json.loads(opened.data)
    copy = {
        "physical_address": upload["physical_address"],
        "copy_source": {"repository": weather, "ref": "main", "path": "gold/b"},
    }
    copied = api.request(
        "PUT",
        f"{staging}/{upload['upload_id']}/parts/1/copy?path=raw/x",
        body=json.dumps(copy),
        headers={**user.basic(), "Content-Type": "application/json"},
    )
    assert copied.status == 403 and "gold/b" in json.loads(copied.data)["message"]

    commit = lakefs_sdk.CommitsApi(api.sdk()).commit(weather, "main", lakefs_sdk.CommitCreation(message="keys"))
    metarange = api.request(
        "GET", f"/repositories/{weather}/metadata/meta_range/{commit.meta_range_id}", headers=user.basic()
    )
    assert metarange.status == 403 and "every key" in json.loads(metarange.data)["message"]
    admin_view = api.request("GET", f"/repositories/{weather}/metadata/meta_range/{commit.meta_range_id}")
    assert admin_view.status == 200
