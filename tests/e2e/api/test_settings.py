"""Repository settings through lakefs-sdk and raw requests: branch protection rules (lakeFS's and
the older paths, ETag / If-Match, Silt's required approvals kept when a lakeFS client rewrites
the list, enforcement on S3 uploads and REST commits) and garbage-collection rules."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from botocore.exceptions import ClientError
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.errors import PROTECTED_BRANCH, PROTECTED_BRANCH_COMMIT
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import Api

PROTECTED = PROTECTED_BRANCH


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


@pytest.fixture(scope="module")
def writer(api: Api) -> Iterator[Credentials]:
    """A member of Developers: writes repositories, does not administer them."""
    user_id = f"writer-{secrets.token_hex(3)}"
    channel = signed_channel(api.stack.stack.endpoints["auth"], api.stack.admin)
    try:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        auth.CreateUser(auth_pb2.CreateUserRequest(id=user_id, description="writer"))
        auth.AddGroupMember(auth_pb2.GroupMemberRequest(group_id="Developers", user_id=user_id))
        issued = auth.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id=user_id))
        yield Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))
    finally:
        channel.close()


def _headers(credentials: Credentials, **extra: str) -> dict[str, str]:
    headers = urllib3.make_headers(
        basic_auth=f"{credentials.access_key_id}:{credentials.secret_access_key.get_secret_value()}"
    )
    headers["Content-Type"] = "application/json"
    headers.update(extra)
    return headers


def _send(
    api: Api, method: str, path: str, body: Any, credentials: Credentials | None = None, if_match: str | None = None
) -> Any:
    extra = {} if if_match is None else {"If-Match": if_match}
    return api.request(
        method, path, body=json.dumps(body).encode(), headers=_headers(credentials or api.stack.admin, **extra)
    )


def _rules(api: Api, repo: str) -> tuple[list[dict[str, Any]], str]:
    got = api.request("GET", f"/repositories/{repo}/settings/branch_protection")
    assert got.status == 200
    return json.loads(got.data), got.headers["ETag"]


def _message(response: Any) -> str:
    return str(json.loads(response.data)["message"])


def test_protected_branch_refuses_s3_uploads_and_rest_commits(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str
) -> None:
    repositories = lakefs_sdk.RepositoriesApi(client)
    assert repositories.get_branch_protection_rules(repo) == []
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    s3.put_object(Bucket=repo, Key="main/staged.txt", Body=b"before")
    repositories.set_branch_protection_rules(repo, [lakefs_sdk.BranchProtectionRule(pattern="ma*")])
    assert repositories.get_branch_protection_rules(repo) == [lakefs_sdk.BranchProtectionRule(pattern="ma*")]

    with pytest.raises(ClientError) as upload:
        s3.put_object(Bucket=repo, Key="main/new.txt", Body=b"x")
    assert upload.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert PROTECTED in upload.value.response["Error"]["Message"]
    commits = lakefs_sdk.CommitsApi(client)
    with pytest.raises(ApiException) as commit:
        commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="direct"))
    assert commit.value.status == 403 and json.loads(commit.value.body)["message"] == PROTECTED_BRANCH_COMMIT
    s3.put_object(Bucket=repo, Key="dev/new.txt", Body=b"fine")
    commits.commit(repo, "dev", lakefs_sdk.CommitCreation(message="unprotected"))

    repositories.set_branch_protection_rules(repo, [])
    commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="allowed again"))


def test_etag_and_if_match(api: Api, repo: str) -> None:
    path = f"/repositories/{repo}/settings/branch_protection"
    empty, etag = _rules(api, repo)
    assert empty == [] and etag.startswith('"')
    # If-Match "" (lakeFS): only while no rule is set.
    assert _send(api, "PUT", path, [{"pattern": "main"}], if_match="").status == 204
    assert _send(api, "PUT", path, [{"pattern": "other"}], if_match="").status == 412
    rules, current = _rules(api, repo)
    assert [r["pattern"] for r in rules] == ["main"] and current != etag
    stale = _send(api, "PUT", path, [{"pattern": "x"}], if_match=etag)
    assert stale.status == 412 and "If-Match" in _message(stale)
    assert _send(api, "PUT", path, [{"pattern": "x"}], if_match="nonsense").status == 412
    ok = _send(api, "PUT", path, [{"pattern": "main"}, {"pattern": "rel-*"}], if_match=current.strip('"'))
    assert ok.status == 204 and ok.headers["ETag"] != current
    rules, newest = _rules(api, repo)
    assert [r["pattern"] for r in rules] == ["main", "rel-*"] and newest == ok.headers["ETag"]
    assert _send(api, "PUT", path, [], if_match=current).status == 412  # used once already
    anything = _send(api, "PUT", path, [{"pattern": "main"}, {"pattern": "rel-*"}, {"pattern": "v*"}], if_match="*")
    assert anything.status == 204
    assert [r["pattern"] for r in _rules(api, repo)[0]] == ["main", "rel-*", "v*"]


def test_lakefs_rewrite_keeps_required_approvals(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    path = f"/repositories/{repo}/settings/branch_protection"
    silt = [{"pattern": "main", "required_approvals": 2, "block_direct_writes": False}]
    assert _send(api, "PUT", path, silt).status == 204
    lakefs_sdk.RepositoriesApi(client).set_branch_protection_rules(
        repo, [lakefs_sdk.BranchProtectionRule(pattern="main"), lakefs_sdk.BranchProtectionRule(pattern="rel-*")]
    )
    rules, _ = _rules(api, repo)
    assert rules == [
        {"pattern": "main", "block_direct_writes": False, "required_approvals": 2, "required_checks": []},
        {"pattern": "rel-*", "block_direct_writes": True, "required_approvals": 0, "required_checks": []},
    ]


@pytest.mark.filterwarnings("ignore:.* is deprecated:DeprecationWarning")
def test_older_branch_protection_paths(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    internal = lakefs_sdk.InternalApi(client)
    path = f"/repositories/{repo}/branch_protection"
    assert api.request("GET", path + "/set_allowed").status == 204
    internal.internal_create_branch_protection_rule(repo, lakefs_sdk.BranchProtectionRule(pattern="main"))
    internal.internal_create_branch_protection_rule(repo, lakefs_sdk.BranchProtectionRule(pattern="stable-*"))
    internal.internal_create_branch_protection_rule(repo, lakefs_sdk.BranchProtectionRule(pattern="main"))
    assert [r.pattern for r in internal.internal_get_branch_protection_rules(repo)] == ["stable-*", "main"]
    internal.internal_delete_branch_protection_rule(
        repo, lakefs_sdk.InternalDeleteBranchProtectionRuleRequest(pattern="stable-*")
    )
    assert [r.pattern for r in internal.internal_get_branch_protection_rules(repo)] == ["main"]
    gone = _send(api, "DELETE", path, {"pattern": "stable-*"})
    assert gone.status == 404 and "stable-*" in _message(gone)


def test_settings_need_an_administrator(api: Api, repo: str, writer: Credentials) -> None:
    path = f"/repositories/{repo}/settings/branch_protection"
    for who in (api.stack.reader, writer):
        assert _send(api, "PUT", path, [{"pattern": "main"}], who).status == 403
        assert _send(api, "POST", f"/repositories/{repo}/branch_protection", {"pattern": "main"}, who).status == 403
        assert api.request("GET", path, headers=_headers(who)).status == 200
        assert (
            api.request("GET", f"/repositories/{repo}/branch_protection/set_allowed", headers=_headers(who)).status
            == 403
        )
        gc = {"default_retention_days": 1, "branches": []}
        assert _send(api, "PUT", f"/repositories/{repo}/settings/gc_rules", gc, who).status == 403
        assert api.request("DELETE", f"/repositories/{repo}/settings/gc_rules", headers=_headers(who)).status == 403
    assert _rules(api, repo)[0] == []
    assert api.request("GET", f"/repositories/{repo}/settings/gc_rules").status == 404


def test_bad_branch_protection_input(api: Api, repo: str) -> None:
    path = f"/repositories/{repo}/settings/branch_protection"
    long_pattern = _send(api, "PUT", path, [{"pattern": "b" * 300}])
    assert long_pattern.status == 400 and "longer than" in _message(long_pattern)
    assert _send(api, "PUT", path, [{"pattern": ""}]).status == 400
    question = _send(api, "PUT", path, [{"pattern": "release-?"}])
    assert question.status == 400 and "only '*'" in _message(question)
    assert _send(api, "PUT", path, {"pattern": "main"}).status == 400
    assert _send(api, "PUT", path, [{"pattern": "main"}, {"pattern": "main"}]).status == 400
    nothing = _send(api, "PUT", path, [{"pattern": "main", "block_direct_writes": False}])
    assert nothing.status == 400 and "protects nothing" in _message(nothing)
    assert _send(api, "PUT", path, [{"pattern": "main", "required_approvals": 1000}]).status == 400
    too_many = _send(api, "PUT", path, [{"pattern": f"p{n}"} for n in range(101)])
    assert too_many.status == 400 and "at most 100" in _message(too_many)
    assert _send(api, "PUT", f"/repositories/{repo}-none/settings/branch_protection", []).status == 404
    assert api.request("GET", f"/repositories/{repo}-none/settings/branch_protection").status == 404
    assert _rules(api, repo)[0] == []  # nothing stored by any of them


@pytest.mark.filterwarnings("ignore:.* is deprecated:DeprecationWarning")
def test_gc_rules(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    repositories = lakefs_sdk.RepositoriesApi(client)
    internal = lakefs_sdk.InternalApi(client)
    with pytest.raises(ApiException) as unset:
        repositories.get_gc_rules(repo)
    assert unset.value.status == 404
    rules = lakefs_sdk.GarbageCollectionRules(
        default_retention_days=21,
        branches=[
            lakefs_sdk.GarbageCollectionRule(branch_id="main", retention_days=28),
            lakefs_sdk.GarbageCollectionRule(branch_id="dev", retention_days=7),
        ],
    )
    repositories.set_gc_rules(repo, rules)
    got = repositories.get_gc_rules(repo)
    assert got.default_retention_days == 21
    assert [(b.branch_id, b.retention_days) for b in got.branches] == [("dev", 7), ("main", 28)]
    assert internal.internal_get_garbage_collection_rules(repo) == got
    assert api.request("GET", f"/repositories/{repo}/gc/rules/set_allowed").status == 204

    path = f"/repositories/{repo}/settings/gc_rules"
    negative = _send(api, "PUT", path, {"default_retention_days": -1, "branches": []})
    assert negative.status == 400
    twice = {"default_retention_days": 1, "branches": [{"branch_id": "a", "retention_days": 1}] * 2}
    assert _send(api, "PUT", path, twice).status == 400
    assert _send(api, "PUT", path, {"default_retention_days": "many", "branches": []}).status == 400
    assert _send(api, "PUT", path, {"branches": []}).status == 400
    assert repositories.get_gc_rules(repo) == got  # nothing stored by the refused ones

    internal.internal_set_garbage_collection_rules(
        repo, lakefs_sdk.GarbageCollectionRules(default_retention_days=3, branches=[])
    )
    assert repositories.get_gc_rules(repo) == lakefs_sdk.GarbageCollectionRules(default_retention_days=3, branches=[])
    repositories.delete_gc_rules(repo)
    with pytest.raises(ApiException) as deleted:
        repositories.get_gc_rules(repo)
    assert deleted.value.status == 404
    internal.internal_delete_garbage_collection_rules(repo)  # deleting nothing is fine
    assert _send(api, "PUT", f"/repositories/{repo}-none/settings/gc_rules", twice | {"branches": []}).status == 404


def test_concurrent_writers_with_one_etag_one_wins(api: Api, repo: str) -> None:
    path = f"/repositories/{repo}/settings/branch_protection"
    _, etag = _rules(api, repo)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda n: _send(api, "PUT", path, [{"pattern": f"w{n}"}], if_match=etag), range(4)))
    statuses = sorted(a.status for a in answers)
    assert statuses == [204, 412, 412, 412]
    winner = next(n for n, a in enumerate(answers) if a.status == 204)
    assert [r["pattern"] for r in _rules(api, repo)[0]] == [f"w{winner}"]


def test_gc_rules_carry_silts_last_access_rules(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    """`last_access_rules` is Silt's extension: lakeFS clients ignore it and never drop it."""
    repositories = lakefs_sdk.RepositoriesApi(client)
    path = f"/repositories/{repo}/settings/gc_rules"
    expiring = [{"branch": "main", "prefixes": ["logs/", ""], "days": 30}]
    assert (
        _send(api, "PUT", path, {"default_retention_days": 5, "branches": [], "last_access_rules": expiring}).status
        == 204
    )
    assert json.loads(api.request("GET", path).data)["last_access_rules"] == expiring
    # A lakeFS client reads the rules and writes retention back: the extension stays.
    got = repositories.get_gc_rules(repo)
    assert got == lakefs_sdk.GarbageCollectionRules(default_retention_days=5, branches=[])
    repositories.set_gc_rules(repo, lakefs_sdk.GarbageCollectionRules(default_retention_days=9, branches=[]))
    stored = json.loads(api.request("GET", path).data)
    assert stored["default_retention_days"] == 9 and stored["last_access_rules"] == expiring

    for bad in (
        "not a list",
        [{"branch": "main", "prefixes": ["x"]}],
        [{"branch": "main", "prefixes": ["x"], "days": 0}],
        [{"branch": "main", "prefixes": ["x"], "days": 1, "extra": True}],
        [{"branch": "main", "prefixes": ["x" * 1025], "days": 1}],
        [{"branch": "main", "prefixes": ["x"], "days": 1}] * 101,
    ):
        body = {"default_retention_days": 1, "branches": [], "last_access_rules": bad}
        assert _send(api, "PUT", path, body).status == 400, bad
    assert json.loads(api.request("GET", path).data)["last_access_rules"] == expiring
    assert _send(api, "PUT", path, {"default_retention_days": 9, "branches": [], "last_access_rules": []}).status == 204
    assert "last_access_rules" not in json.loads(api.request("GET", path).data)
