"""Policies scoped to branches, through real servers and real clients: lakeFS policies on
`arn:lakefs:fs:::repository/<repo>/branch/<pattern>` and Silt's own (WriteBranch on
`<repo>@dev-*`) created through the REST API, and every way to change a branch held to them: the
S3 gateway (boto3: PUT, copy, DELETE, DeleteObjects, multipart) and the REST API (lakefs-sdk:
upload, delete, commit, create and delete branches, merge into, revert, reset, hard reset,
cherry-pick, pull request merges). A refusal is S3's AccessDenied or lakeFS's 403 JSON, and a
branch's protection still binds whoever a policy lets write there."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import lakefs_sdk
import pytest
import urllib3
from botocore.exceptions import ClientError
from botocore.httpsession import URLLib3Session
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import graveler_pb2_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import Api

REPO_ARN = "arn:lakefs:fs:::repository/"
# What lakeFS gives a reader of a whole repository (ReadRepo here), as a pair of statements.
READS = [
    "fs:Read*",
    "fs:List*",
    "retention:GetGarbageCollectionRules",
    "branches:GetBranchProtectionRules",
    "pr:ReadPullRequest",
    "pr:ListPullRequests",
]


@dataclass
class User:
    id: str
    creds: Credentials
    s3: Any  # boto3's S3 client at the gateway
    sdk: lakefs_sdk.ApiClient

    @property
    def objects(self) -> lakefs_sdk.ObjectsApi:
        return lakefs_sdk.ObjectsApi(self.sdk)

    @property
    def branches(self) -> lakefs_sdk.BranchesApi:
        return lakefs_sdk.BranchesApi(self.sdk)

    @property
    def commits(self) -> lakefs_sdk.CommitsApi:
        return lakefs_sdk.CommitsApi(self.sdk)

    @property
    def refs(self) -> lakefs_sdk.RefsApi:
        return lakefs_sdk.RefsApi(self.sdk)

    def basic(self) -> dict[str, str]:
        secret = self.creds.secret_access_key.get_secret_value()
        return urllib3.make_headers(basic_auth=f"{self.creds.access_key_id}:{secret}")


def _user_with_policy(api: Api, statements: list[dict[str, Any]]) -> tuple[User, lakefs_sdk.Policy]:
    """A new user whose only policy is statements, created by the admin through the REST API."""
    auth = lakefs_sdk.AuthApi(api.sdk())
    user_id, policy_id = f"u-{secrets.token_hex(4)}", f"p-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    created = auth.create_policy(lakefs_sdk.Policy.from_dict({"id": policy_id, "statement": statements}))
    auth.attach_policy_to_user(user_id, policy_id)
    issued = auth.create_credentials(user_id)
    creds = Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))
    return User(user_id, creds, api.stack.client(creds), api.sdk(creds)), created


def _reader_of(repo: str) -> list[dict[str, Any]]:
    return [
        {"effect": "allow", "action": READS, "resource": REPO_ARN + repo},
        {"effect": "allow", "action": READS, "resource": REPO_ARN + repo + "/*"},
    ]


@pytest.fixture
def project(api: Api, repo: str) -> str:
    """The repository with one committed key on main, and a branch dev-1 from it."""
    admin = api.sdk()
    api.stack.client().put_object(Bucket=repo, Key="main/base", Body=b"base")
    lakefs_sdk.CommitsApi(admin).commit(repo, "main", lakefs_sdk.CommitCreation(message="base"))
    lakefs_sdk.BranchesApi(admin).create_branch(repo, lakefs_sdk.BranchCreation(name="dev-1", source="main"))
    return repo


def _s3_denied(call: Any) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert error["Error"]["Code"] == "AccessDenied", error
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403


def _api_denied(call: Any, says: str = "") -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value
    message: str = json.loads(caught.value.body)["message"]
    assert says in message, message
    return message


def _head(api: Api, repo: str, branch: str) -> str:
    return str(lakefs_sdk.BranchesApi(api.sdk()).get_branch(repo, branch).commit_id)


def _commit(user: User, repo: str, branch: str, message: str = "change") -> str:
    return str(user.commits.commit(repo, branch, lakefs_sdk.CommitCreation(message=message)).id)


def _upload(api: Api, user: User, repo: str, branch: str, path: str) -> urllib3.BaseHTTPResponse:
    url = f"/repositories/{repo}/branches/{branch}/objects?path={path}"
    return api.request("POST", url, body=b"data", headers={**user.basic(), "Content-Type": "application/octet-stream"})


def test_branch_statements_are_stored_and_read_back_as_enforced(api: Api, project: str) -> None:
    _, created = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["fs:*"], "resource": f"{REPO_ARN}{project}/branch/dev-*"},
            {"effect": "deny", "action": ["fs:*"], "resource": f"{REPO_ARN}{project}/branch/main"},
        ],
    )
    shown = [(s.effect, s.action, s.resource) for s in created.statement]
    branch_actions = ["CommitBranch", "RevertBranch", "CreateBranch", "DeleteBranch", "ReadBranch"]
    assert shown == [
        ("allow", branch_actions, f"{project}@dev-*"),
        ("deny", ["WriteBranch", *branch_actions], f"{project}@main"),
    ]
    assert lakefs_sdk.AuthApi(api.sdk()).get_policy(created.id) == created


def test_a_lakefs_branch_allow_commits_there_only(api: Api, project: str) -> None:
    """lakeFS's shape of "commit on dev-* only": objects writable everywhere (staged writes are
    object statements in lakeFS), every branch action on dev-*. Commits, merges, reverts and
    resets elsewhere are 403; staging on main is the object statement's, as in lakeFS."""
    user, _ = _user_with_policy(
        api,
        [
            *_reader_of(project),
            {
                "effect": "allow",
                "action": ["fs:WriteObject", "fs:DeleteObject"],
                "resource": f"{REPO_ARN}{project}/object/*",
            },
            {"effect": "allow", "action": ["fs:*"], "resource": f"{REPO_ARN}{project}/branch/dev-*"},
        ],
    )
    # On dev-*: create a branch, write, commit, revert, reset, merge main in, delete.
    user.branches.create_branch(project, lakefs_sdk.BranchCreation(name="dev-2", source="main"))
    api.stack.client().put_object(Bucket=project, Key="main/later", Body=b"later")
    lakefs_sdk.CommitsApi(api.sdk()).commit(project, "main", lakefs_sdk.CommitCreation(message="later"))
    user.s3.put_object(Bucket=project, Key="dev-2/s3-key", Body=b"s3")
    assert _upload(api, user, project, "dev-2", "api-key").status == 201
    commit = _commit(user, project, "dev-2")
    user.branches.revert_branch(project, "dev-2", lakefs_sdk.RevertCreation(ref=commit, parent_number=0))
    user.s3.put_object(Bucket=project, Key="dev-2/staged", Body=b"x")
    user.branches.reset_branch(project, "dev-2", lakefs_sdk.ResetCreation(type="reset"))
    user.refs.merge_into_branch(project, "main", "dev-2")
    user.branches.delete_branch(project, "dev-2")

    # Elsewhere: a branch of another name, and main's every change of its refs.
    before = _head(api, project, "main")
    _api_denied(
        lambda: user.branches.create_branch(project, lakefs_sdk.BranchCreation(name="feature", source="main")),
        "CreateBranch",
    )
    user.s3.put_object(Bucket=project, Key="main/staged", Body=b"x")  # fs:WriteObject on every object
    _api_denied(lambda: _commit(user, project, "main"), f"CommitBranch on {project}@main")
    _api_denied(lambda: user.refs.merge_into_branch(project, "dev-1", "main"), "CommitBranch")
    _api_denied(
        lambda: user.branches.revert_branch(project, "main", lakefs_sdk.RevertCreation(ref="main", parent_number=0))
    )
    _api_denied(
        lambda: user.branches.reset_branch(project, "main", lakefs_sdk.ResetCreation(type="reset")), "RevertBranch"
    )
    _api_denied(
        lambda: lakefs_sdk.ExperimentalApi(user.sdk).hard_reset_branch(project, "main", "main~1"), "RevertBranch"
    )
    _api_denied(
        lambda: user.branches.cherry_pick(project, "main", lakefs_sdk.CherryPickCreation(ref="dev-1")), "CommitBranch"
    )
    _api_denied(lambda: user.branches.delete_branch(project, "main"), "DeleteBranch")
    assert _head(api, project, "main") == before


def test_silt_write_branch_is_every_change_there_and_nothing_elsewhere(api: Api, project: str) -> None:
    """Silt's own "writes on dev-* only": ReadRepo on the repository, WriteBranch on dev-*. Staged
    writes through the S3 gateway and the REST API, commits and new branches there; AccessDenied
    and 403 on main, for each key of a DeleteObjects."""
    user, created = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo"], "resource": project},
            {"effect": "allow", "action": ["WriteBranch"], "resource": f"{project}@dev-*"},
        ],
    )
    assert [(s.action, s.resource) for s in created.statement][1] == (["WriteBranch"], f"{project}@dev-*")
    s3 = user.s3
    s3.put_object(Bucket=project, Key="dev-1/a", Body=b"a")
    s3.copy_object(Bucket=project, Key="dev-1/b", CopySource=f"{project}/main/base")
    upload = s3.create_multipart_upload(Bucket=project, Key="dev-1/big")["UploadId"]
    part = s3.upload_part(Bucket=project, Key="dev-1/big", UploadId=upload, PartNumber=1, Body=b"p" * 10)
    s3.complete_multipart_upload(
        Bucket=project,
        Key="dev-1/big",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    s3.delete_object(Bucket=project, Key="dev-1/b")
    assert _upload(api, user, project, "dev-1", "api-key").status == 201
    user.objects.delete_object(project, "dev-1", "api-key")
    _commit(user, project, "dev-1")
    user.branches.create_branch(project, lakefs_sdk.BranchCreation(name="dev-3", source="dev-1"))
    assert user.s3.get_object(Bucket=project, Key="dev-3/big")["Body"].read() == b"p" * 10

    _s3_denied(lambda: s3.put_object(Bucket=project, Key="main/a", Body=b"a"))
    _s3_denied(lambda: s3.copy_object(Bucket=project, Key="main/b", CopySource=f"{project}/dev-1/a"))
    _s3_denied(lambda: s3.delete_object(Bucket=project, Key="main/base"))
    _s3_denied(lambda: s3.create_multipart_upload(Bucket=project, Key="main/big"))
    outcome = s3.delete_objects(Bucket=project, Delete={"Objects": [{"Key": "dev-1/a"}, {"Key": "main/base"}]})
    assert [d["Key"] for d in outcome.get("Deleted", [])] == ["dev-1/a"]
    assert [(e["Key"], e["Code"]) for e in outcome["Errors"]] == [("main/base", "AccessDenied")]
    refused = _upload(api, user, project, "main", "api-key")
    assert refused.status == 403 and f"{project}@main" in json.loads(refused.data)["message"]
    _api_denied(lambda: user.objects.delete_object(project, "main", "base"))
    _api_denied(lambda: _commit(user, project, "main"), "CommitBranch")
    _api_denied(lambda: user.refs.merge_into_branch(project, "dev-1", "main"), "CommitBranch")
    _api_denied(lambda: user.branches.create_branch(project, lakefs_sdk.BranchCreation(name="other", source="main")))
    admin_s3 = api.stack.client()
    assert admin_s3.get_object(Bucket=project, Key="main/base")["Body"].read() == b"base"
    assert "Contents" not in admin_s3.list_objects_v2(Bucket=project, Prefix="main/a")


def test_a_deny_on_one_branch_holds_on_every_path(api: Api, project: str) -> None:
    """A writer of the whole repository with lakeFS's Deny of fs:* on main: no change to main by
    any route (staged writes at the gateway and the API, commits, merges into it, reverts,
    resets, cherry-picks, pull request merges, deleting it), while dev-1 stays writable."""
    user, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": project},
            {"effect": "deny", "action": ["fs:*"], "resource": f"{REPO_ARN}{project}/branch/main"},
        ],
    )
    user.s3.put_object(Bucket=project, Key="dev-1/a", Body=b"a")
    dev_commit = _commit(user, project, "dev-1")
    before = _head(api, project, "main")

    s3 = user.s3
    _s3_denied(lambda: s3.put_object(Bucket=project, Key="main/a", Body=b"a"))
    _s3_denied(lambda: s3.copy_object(Bucket=project, Key="main/b", CopySource=f"{project}/dev-1/a"))
    _s3_denied(lambda: s3.delete_object(Bucket=project, Key="main/base"))
    _s3_denied(lambda: s3.create_multipart_upload(Bucket=project, Key="main/big"))
    _s3_denied(lambda: s3.delete_objects(Bucket=project, Delete={"Objects": [{"Key": "main/base"}]}))
    assert _upload(api, user, project, "main", "x").status == 403
    _api_denied(lambda: user.objects.delete_object(project, "main", "base"), "DeleteObject")
    _api_denied(lambda: _commit(user, project, "main"), "CommitBranch")
    _api_denied(lambda: user.refs.merge_into_branch(project, "dev-1", "main"), "CommitBranch")
    _api_denied(lambda: user.branches.cherry_pick(project, "main", lakefs_sdk.CherryPickCreation(ref=dev_commit)))
    _api_denied(
        lambda: user.branches.revert_branch(project, "main", lakefs_sdk.RevertCreation(ref="main", parent_number=0))
    )
    _api_denied(lambda: user.branches.reset_branch(project, "main", lakefs_sdk.ResetCreation(type="reset")))
    _api_denied(lambda: lakefs_sdk.ExperimentalApi(user.sdk).hard_reset_branch(project, "main", "main~1"))
    _api_denied(lambda: user.branches.delete_branch(project, "main"), "DeleteBranch")
    _api_denied(lambda: user.branches.get_branch(project, "main"), "ReadBranch")
    _api_denied(lambda: user.refs.log_commits(project, "main~1"), "ReadBranch")
    # A pull request may be opened (that changes no branch) but not merged into main.
    pulls = lakefs_sdk.PullsApi(user.sdk)
    pull = pulls.create_pull_request(
        project, lakefs_sdk.PullRequestCreation(title="t", source_branch="dev-1", destination_branch="main")
    ).id
    _api_denied(lambda: pulls.merge_pull_request(project, pull), "CommitBranch")
    assert _head(api, project, "main") == before

    # The same user elsewhere: dev-1 keeps every change.
    user.branches.create_branch(project, lakefs_sdk.BranchCreation(name="dev-4", source="dev-1"))
    user.refs.merge_into_branch(project, "dev-4", "dev-1", lakefs_sdk.Merge(allow_empty=True))
    user.branches.delete_branch(project, "dev-4")


def test_graveler_holds_a_branch_deny_for_its_own_callers(api: Api, project: str) -> None:
    """A user calling graveler directly (the CLI, a job) is held to the same Deny: graveler asks
    the branch action on every call that changes or reads one branch."""
    user, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": project},
            {"effect": "deny", "action": ["fs:*"], "resource": f"{REPO_ARN}{project}/branch/main"},
        ],
    )
    channel = signed_channel(api.stack.stack.endpoints["graveler"], user.creds)
    try:
        graveler = graveler_pb2_grpc.GravelerServiceStub(channel)
        calls: list[Callable[[], object]] = [
            lambda: graveler.Commit(
                gapi.CommitRequest(repository=project, branch="main", message="m", allow_empty=True), timeout=30
            ),
            lambda: graveler.DeleteEntry(
                gapi.DeleteEntryRequest(repository=project, branch="main", key="base"), timeout=30
            ),
            lambda: graveler.ResetBranch(
                gapi.ResetBranchRequest(repository=project, branch="main", all=True), timeout=30
            ),
            lambda: graveler.DeleteBranch(gapi.DeleteBranchRequest(repository=project, name="main"), timeout=30),
            lambda: graveler.GetBranch(gapi.GetBranchRequest(repository=project, name="main"), timeout=30),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value
            assert f"{project}@main" in str(caught.value.details())
        dev = gapi.CommitRequest(repository=project, branch="dev-1", message="m", allow_empty=True)
        assert graveler.Commit(dev, timeout=30).committer == user.id
    finally:
        channel.close()


def test_protection_still_binds_a_branch_writer(api: Api, project: str) -> None:
    """A policy decides who may write a branch; its protection rules still bind them there."""
    user, _ = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo"], "resource": project},
            {"effect": "allow", "action": ["WriteBranch"], "resource": f"{project}@dev-*"},
        ],
    )
    user.s3.put_object(Bucket=project, Key="dev-1/a", Body=b"a")
    rule = pb.BranchProtectionRule(pattern="dev-1", block_direct_writes=True)
    api.stack.graveler.SetBranchProtection(gapi.SetBranchProtectionRequest(repository=project, rules=[rule]))
    try:
        _api_denied(lambda: _commit(user, project, "dev-1"), "protected branch")
    finally:
        api.stack.graveler.SetBranchProtection(gapi.SetBranchProtectionRequest(repository=project, rules=[]))
    _commit(user, project, "dev-1")


class _BoundSession(URLLib3Session):
    """botocore's HTTP session, connecting from one local address (a loopback alias)."""

    def __init__(self, source: str, **kwargs: Any) -> None:
        self._source = source  # read by the pool manager made in __init__
        super().__init__(**kwargs)

    def _get_pool_manager_kwargs(self, **extra_kwargs: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = super()._get_pool_manager_kwargs(source_address=(self._source, 0), **extra_kwargs)
        return kwargs


def test_a_branch_allow_with_a_condition_holds_from_its_addresses_only(api: Api, project: str) -> None:
    """A branch statement under an IpAddress condition, in both vocabularies: Silt's WriteBranch on
    dev-* and lakeFS's fs:CreateCommit / fs:ReadBranch on .../branch/dev-*, each only from
    127.0.0.2. From there the user stages through the S3 gateway, commits and merges main in
    (graveler's per-key check of the merge judges the user from the address the API reported);
    from 127.0.0.1 each of them is refused and dev-1 does not move."""
    inside, outside = "127.0.0.2", "127.0.0.1"
    from_inside = {"IpAddress": {"SourceIp": [f"{inside}/32"]}}
    user, created = _user_with_policy(
        api,
        [
            {"effect": "allow", "action": ["ReadRepo"], "resource": project},
            {"effect": "allow", "action": ["WriteBranch"], "resource": f"{project}@dev-*", "condition": from_inside},
            {
                "effect": "allow",
                "action": ["fs:CreateCommit", "fs:ReadBranch"],
                "resource": f"{REPO_ARN}{project}/branch/dev-*",
                "condition": from_inside,
            },
        ],
    )
    # The lakeFS statement's condition is on the branch actions it became, and read back so.
    assert [(s.action, s.resource, s.condition) for s in created.statement][1:] == [
        (["WriteBranch"], f"{project}@dev-*", from_inside),
        (["CommitBranch", "ReadBranch"], f"{project}@dev-*", from_inside),
    ]
    admin = api.sdk()
    api.stack.client().put_object(Bucket=project, Key="main/later", Body=b"later")
    lakefs_sdk.CommitsApi(admin).commit(project, "main", lakefs_sdk.CommitCreation(message="later"))

    def s3_from(source: str) -> Any:
        client = api.stack.client(user.creds)
        client._endpoint.http_session = _BoundSession(source, timeout=30)
        return client

    pools = {
        source: urllib3.PoolManager(source_address=(source, 0), retries=False, timeout=30)
        for source in (inside, outside)
    }

    def rest(source: str, method: str, path: str, body: dict[str, Any]) -> urllib3.BaseHTTPResponse:
        headers = {**user.basic(), "Content-Type": "application/json"}
        return pools[source].request(
            method, f"{api.stack.endpoint}/api/v1{path}", headers=headers, body=json.dumps(body).encode()
        )

    commit = f"/repositories/{project}/branches/dev-1/commits"
    merge = f"/repositories/{project}/refs/main/merge/dev-1"

    # From outside: the conditional Allows give nothing, on the gateway and the REST API alike.
    _s3_denied(lambda: s3_from(outside).put_object(Bucket=project, Key="dev-1/out", Body=b"out"))
    api.stack.client().put_object(Bucket=project, Key="dev-1/by-admin", Body=b"staged")
    before = _head(api, project, "dev-1")
    for path, body in ((commit, {"message": "outside"}), (merge, {})):
        refused = rest(outside, "POST", path, body)
        assert refused.status == 403, refused.data
        assert f"CommitBranch on {project}@dev-1" in json.loads(refused.data)["message"]
    assert _head(api, project, "dev-1") == before

    # From inside: the same calls go through.
    s3_from(inside).put_object(Bucket=project, Key="dev-1/in", Body=b"in")
    committed = rest(inside, "POST", commit, {"message": "inside"})
    assert committed.status == 201, committed.data
    merged = rest(inside, "POST", merge, {})
    assert merged.status == 200, merged.data
    admin_s3 = api.stack.client()
    assert admin_s3.get_object(Bucket=project, Key="dev-1/in")["Body"].read() == b"in"
    assert admin_s3.get_object(Bucket=project, Key="dev-1/later")["Body"].read() == b"later"
    assert "Contents" not in admin_s3.list_objects_v2(Bucket=project, Prefix="dev-1/out")
    log = lakefs_sdk.RefsApi(admin).log_commits(project, "dev-1").results
    assert [c.committer for c in log[:2]] == [user.id, user.id]
