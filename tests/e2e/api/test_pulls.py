"""Pull requests through lakefs-sdk's PullsApi and raw requests: the whole life of one (create,
get, list by status, update, close, reopen, merge), merges that required approvals block until
a second user approves through Silt's review path, comments, conflicts, and bad input."""

from __future__ import annotations

import json
import secrets
from typing import Any

import lakefs_sdk
import pytest
import urllib3
from click.testing import CliRunner
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from cli.common import State
from cli.main import cli
from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.client import Client, Settings
from silt.graveler.v1 import graveler_pb2 as api_pb2
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import Api, error_message

ADMIN = "admin"  # the stack's admin user (services/auth/setup.py DEFAULT_ADMIN)


@pytest.fixture(scope="module")
def s3(api: Api) -> Any:
    return api.stack.client()


def _new_developer(api: Api, prefix: str = "dev") -> tuple[str, Credentials]:
    """A user who may write (Developers), with an access key."""
    user_id = f"{prefix}-{secrets.token_hex(3)}"
    channel = signed_channel(api.stack.stack.endpoints["auth"], api.stack.admin)
    try:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        auth.CreateUser(auth_pb2.CreateUserRequest(id=user_id, description="pull request reviewer"))
        auth.AddGroupMember(auth_pb2.GroupMemberRequest(group_id="Developers", user_id=user_id))
        issued = auth.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id=user_id))
        return user_id, Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))
    finally:
        channel.close()


@pytest.fixture(scope="module")
def developer(api: Api) -> tuple[str, Credentials]:
    """A second user who may write: a reviewer other than the author."""
    return _new_developer(api)


@pytest.fixture(scope="module")
def third(api: Api) -> tuple[str, Credentials]:
    """A third writer: neither the author nor a committer to the pull requests' sources."""
    return _new_developer(api, "third")


def _basic(credentials: Credentials) -> dict[str, str]:
    return urllib3.make_headers(
        basic_auth=f"{credentials.access_key_id}:{credentials.secret_access_key.get_secret_value()}"
    )


def _json(api: Api, method: str, path: str, body: Any, credentials: Credentials | None = None) -> Any:
    headers = _basic(credentials or api.stack.admin)
    headers["Content-Type"] = "application/json"
    return api.request(method, path, body=json.dumps(body).encode(), headers=headers)


def _feature(client: lakefs_sdk.ApiClient, s3: Any, repo: str, branch: str, key: str, data: bytes) -> str:
    """A branch from main with one committed object; its head commit."""
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name=branch, source="main"))
    s3.put_object(Bucket=repo, Key=f"{branch}/{key}", Body=data)
    return lakefs_sdk.CommitsApi(client).commit(repo, branch, lakefs_sdk.CommitCreation(message=f"add {key}")).id


def _refused(call: Any, status: int) -> str:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == status, err.value.body
    return str(json.loads(err.value.body)["message"])


def test_pull_request_life(api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    pulls = lakefs_sdk.PullsApi(client)
    source_head = _feature(client, s3, repo, "feature", "a.csv", b"x,y\n1,2\n")
    main_head = lakefs_sdk.BranchesApi(client).get_branch(repo, "main").commit_id
    creation = lakefs_sdk.PullRequestCreation(
        title="add a.csv", description="first data", source_branch="feature", destination_branch="main"
    )
    pull_id = pulls.create_pull_request(repo, creation).id

    got = pulls.get_pull_request(repo, pull_id)
    assert (got.id, got.status, got.title, got.description) == (pull_id, "open", "add a.csv", "first data")
    assert (got.author, got.source_branch, got.destination_branch) == (ADMIN, "feature", "main")
    assert got.creation_date.tzinfo is not None and got.closed_date is None and got.merged_commit_id is None
    raw = json.loads(api.request("GET", f"/repositories/{repo}/pulls/{pull_id}").data)
    assert lakefs_sdk.PullRequest.from_dict(raw) == got
    assert (raw["approvals"], raw["required_approvals"], raw["merge_blocked_reason"]) == (0, 0, "")

    assert [p.id for p in pulls.list_pull_requests(repo, status="open").results] == [pull_id]
    assert pulls.list_pull_requests(repo, status="closed").results == []
    listed = pulls.list_pull_requests(repo)
    assert [p.id for p in listed.results] == [pull_id] and listed.pagination.has_more is False

    pulls.update_pull_request(repo, pull_id, lakefs_sdk.PullRequestBasic(title="add a.csv (v2)"))
    assert pulls.get_pull_request(repo, pull_id).title == "add a.csv (v2)"
    assert pulls.get_pull_request(repo, pull_id).description == "first data"

    pulls.update_pull_request(repo, pull_id, lakefs_sdk.PullRequestBasic(status="closed"))
    closed = pulls.get_pull_request(repo, pull_id)
    assert closed.status == "closed" and closed.closed_date is not None
    assert [p.id for p in pulls.list_pull_requests(repo, status="closed").results] == [pull_id]
    assert pulls.list_pull_requests(repo, status="open").results == []
    assert "closed" in _refused(lambda: pulls.merge_pull_request(repo, pull_id), 400)

    pulls.update_pull_request(repo, pull_id, lakefs_sdk.PullRequestBasic(status="open"))
    assert pulls.get_pull_request(repo, pull_id).status == "open"

    reference = pulls.merge_pull_request(repo, pull_id).reference
    merged = pulls.get_pull_request(repo, pull_id)
    assert (merged.status, merged.merged_commit_id) == ("merged", reference)
    commit = lakefs_sdk.CommitsApi(client).get_commit(repo, "main")
    assert commit.id == reference and commit.parents == [main_head, source_head]
    assert commit.committer == ADMIN and pull_id in commit.message
    # lakeFS: "closed" lists closed and merged pull requests; Silt's "merged" only merged ones.
    assert [p.id for p in pulls.list_pull_requests(repo, status="closed").results] == [pull_id]
    assert [p.id for p in pulls.list_pull_requests(repo, status="merged").results] == [pull_id]
    assert "merged" in _refused(lambda: pulls.merge_pull_request(repo, pull_id), 400)
    reopen = lakefs_sdk.PullRequestBasic(status="open")
    assert "merged" in _refused(lambda: pulls.update_pull_request(repo, pull_id, reopen), 400)


def test_list_paging_and_status_filters(client: lakefs_sdk.ApiClient, repo: str) -> None:
    pulls = lakefs_sdk.PullsApi(client)
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    ids = []
    for n in range(5):
        creation = lakefs_sdk.PullRequestCreation(title=f"pr {n}", source_branch="dev", destination_branch="main")
        ids.append(pulls.create_pull_request(repo, creation).id)
    assert ids == sorted(ids)  # ids order by creation
    for closing in (ids[1], ids[3]):
        pulls.update_pull_request(repo, closing, lakefs_sdk.PullRequestBasic(status="closed"))

    seen: list[str] = []
    after = ""
    for _ in range(5):
        page = pulls.list_pull_requests(repo, after=after, amount=2)
        seen += [p.id for p in page.results]
        if not page.pagination.has_more:
            break
        assert page.pagination.next_offset == page.results[-1].id
        after = page.pagination.next_offset
    assert seen == ids

    first = pulls.list_pull_requests(repo, status="open", amount=2)
    assert [p.id for p in first.results] == [ids[0], ids[2]] and first.pagination.has_more
    rest = pulls.list_pull_requests(repo, status="open", amount=2, after=first.pagination.next_offset)
    assert [p.id for p in rest.results] == [ids[4]] and not rest.pagination.has_more
    closed = pulls.list_pull_requests(repo, status="closed", amount=1)
    assert [p.id for p in closed.results] == [ids[1]] and closed.pagination.has_more
    closed_rest = pulls.list_pull_requests(repo, status="closed", after=closed.pagination.next_offset)
    assert [p.id for p in closed_rest.results] == [ids[3]] and not closed_rest.pagination.has_more
    assert [p.id for p in pulls.list_pull_requests(repo, prefix=ids[2]).results] == [ids[2]]


def test_merge_needs_the_required_approvals(
    api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str, developer: tuple[str, Credentials]
) -> None:
    reviewer, reviewer_credentials = developer
    pulls = lakefs_sdk.PullsApi(client)
    _feature(client, s3, repo, "feature", "b.csv", b"1\n")
    rules = _json(
        api, "PUT", f"/repositories/{repo}/settings/branch_protection", [{"pattern": "main", "required_approvals": 1}]
    )
    assert rules.status == 204, rules.data
    creation = lakefs_sdk.PullRequestCreation(title="needs review", source_branch="feature", destination_branch="main")
    pull_id = pulls.create_pull_request(repo, creation).id
    path = f"/repositories/{repo}/pulls/{pull_id}"

    message = _refused(lambda: pulls.merge_pull_request(repo, pull_id), 403)
    assert "cannot write to protected branch" in message and "0 of 1" in message
    blocked = json.loads(api.request("GET", path).data)
    assert blocked["required_approvals"] == 1 and "0 of 1" in blocked["merge_blocked_reason"]

    # The author cannot approve their own pull request; a reader cannot review at all.
    own = _json(api, "POST", path + "/reviews", {"verdict": "approve"})
    assert own.status == 400 and "cannot review" in json.loads(own.data)["message"]
    assert _json(api, "POST", path + "/reviews", {"verdict": "approve"}, api.stack.reader).status == 403
    bad = _json(api, "POST", path + "/reviews", {"verdict": "maybe"}, reviewer_credentials)
    assert bad.status == 400 and "verdict" in json.loads(bad.data)["message"]

    changes = _json(api, "POST", path + "/reviews", {"verdict": "request_changes", "body": "fix"}, reviewer_credentials)
    assert changes.status == 201 and "changes requested" in json.loads(changes.data)["merge_blocked_reason"]
    assert "changes requested" in _refused(lambda: pulls.merge_pull_request(repo, pull_id), 403)
    approved = _json(api, "POST", path + "/reviews", {"verdict": "approve", "body": "lgtm"}, reviewer_credentials)
    assert approved.status == 201
    standing = json.loads(approved.data)
    assert (standing["approvals"], standing["merge_blocked_reason"]) == (1, "")
    reviews = json.loads(api.request("GET", path + "/reviews").data)
    assert [(r["author"], r["verdict"], r["body"], r["current"]) for r in reviews["results"]] == [
        (reviewer, "approve", "lgtm", True)
    ]

    reference = pulls.merge_pull_request(repo, pull_id).reference
    assert lakefs_sdk.BranchesApi(client).get_branch(repo, "main").commit_id == reference
    assert pulls.get_pull_request(repo, pull_id).status == "merged"


def test_comments(api: Api, client: lakefs_sdk.ApiClient, repo: str, developer: tuple[str, Credentials]) -> None:
    reviewer, reviewer_credentials = developer
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    creation = lakefs_sdk.PullRequestCreation(title="talk", source_branch="dev", destination_branch="main")
    pull_id = lakefs_sdk.PullsApi(client).create_pull_request(repo, creation).id
    path = f"/repositories/{repo}/pulls/{pull_id}/comments"
    first = _json(api, "POST", path, {"body": "why?"})
    second = _json(api, "POST", path, {"body": "because"}, reviewer_credentials)
    assert (first.status, second.status) == (201, 201)
    assert _json(api, "POST", path, {"body": ""}).status == 400
    assert _json(api, "POST", path, {"body": "x"}, api.stack.reader).status == 403
    listed = json.loads(api.request("GET", path).data)
    assert [(c["author"], c["body"]) for c in listed["results"]] == [(ADMIN, "why?"), (reviewer, "because")]
    assert listed["pagination"]["has_more"] is False
    page = json.loads(api.request("GET", path + "?amount=1").data)
    assert [c["body"] for c in page["results"]] == ["why?"] and page["pagination"]["has_more"]
    rest = json.loads(api.request("GET", path + f"?amount=1&after={page['pagination']['next_offset']}").data)
    assert [c["body"] for c in rest["results"]] == ["because"] and not rest["pagination"]["has_more"]


def test_merge_conflict_is_409_and_stays_open(client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    pulls = lakefs_sdk.PullsApi(client)
    _feature(client, s3, repo, "feature", "same.txt", b"feature side")
    s3.put_object(Bucket=repo, Key="main/same.txt", Body=b"main side")
    lakefs_sdk.CommitsApi(client).commit(repo, "main", lakefs_sdk.CommitCreation(message="main side"))
    creation = lakefs_sdk.PullRequestCreation(title="clash", source_branch="feature", destination_branch="main")
    pull_id = pulls.create_pull_request(repo, creation).id
    with pytest.raises(ApiException) as err:
        pulls.merge_pull_request(repo, pull_id)
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert "same.txt" in body["message"] and lakefs_sdk.MergeResult.from_dict(body).reference == ""
    assert pulls.get_pull_request(repo, pull_id).status == "open"


def test_merge_with_a_strategy_resolves_conflicts(api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> None:
    """Silt's optional merge body: a strategy, named as for a direct merge."""
    pulls = lakefs_sdk.PullsApi(client)
    _feature(client, s3, repo, "feature", "same.txt", b"feature side")
    s3.put_object(Bucket=repo, Key="main/same.txt", Body=b"main side")
    lakefs_sdk.CommitsApi(client).commit(repo, "main", lakefs_sdk.CommitCreation(message="main side"))
    creation = lakefs_sdk.PullRequestCreation(title="clash", source_branch="feature", destination_branch="main")
    pull_id = pulls.create_pull_request(repo, creation).id
    merge = f"/repositories/{repo}/pulls/{pull_id}/merge"
    invalid = _json(api, "PUT", merge, {"strategy": "theirs"})
    assert invalid.status == 400 and "strategy" in json.loads(invalid.data)["message"]
    assert _json(api, "PUT", merge, {"strategy": 3}).status == 400
    assert pulls.get_pull_request(repo, pull_id).status == "open"
    merged = _json(api, "PUT", merge, {"strategy": "source-wins"})
    assert merged.status == 200, merged.data
    assert pulls.get_pull_request(repo, pull_id).merged_commit_id == json.loads(merged.data)["reference"]
    assert s3.get_object(Bucket=repo, Key="main/same.txt")["Body"].read() == b"feature side"


def test_bad_input(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    pulls = lakefs_sdk.PullsApi(client)
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    assert "not found" in _refused(lambda: pulls.get_pull_request(repo, "00000000deadbeef00000000"), 404)
    _refused(lambda: pulls.merge_pull_request(repo, "00000000deadbeef00000000"), 404)
    _refused(lambda: pulls.list_pull_requests(f"{repo}-none"), 404)
    invalid = api.request("GET", f"/repositories/{repo}/pulls?status=pending")
    assert invalid.status == 400 and "status" in json.loads(invalid.data)["message"]
    path = f"/repositories/{repo}/pulls"
    assert _json(api, "POST", path, {"source_branch": "dev", "destination_branch": "main"}).status == 400
    same = _json(api, "POST", path, {"title": "t", "source_branch": "main", "destination_branch": "main"})
    assert same.status == 400 and "differ" in json.loads(same.data)["message"]
    missing = _json(api, "POST", path, {"title": "t", "source_branch": "nope", "destination_branch": "main"})
    assert missing.status == 404
    long_title = _json(api, "POST", path, {"title": "t" * 2000, "source_branch": "dev", "destination_branch": "main"})
    assert long_title.status == 400 and "title" in json.loads(long_title.data)["message"]
    reader = _json(
        api, "POST", path, {"title": "t", "source_branch": "dev", "destination_branch": "main"}, api.stack.reader
    )
    assert reader.status == 403
    assert pulls.list_pull_requests(repo).results == []  # nothing stored by any of them

    pull_id = pulls.create_pull_request(
        repo, lakefs_sdk.PullRequestCreation(title="t", source_branch="dev", destination_branch="main")
    ).id
    merged = _json(api, "PATCH", f"{path}/{pull_id}", {"status": "merged"})
    assert merged.status == 400 and "merge" in json.loads(merged.data)["message"]
    assert _json(api, "PATCH", f"{path}/{pull_id}", {"status": "done"}).status == 400
    assert _json(api, "PATCH", f"{path}/{pull_id}", {"title": ""}).status == 400
    assert _json(api, "PATCH", f"{path}/{pull_id}", {"title": "x"}, api.stack.reader).status == 403
    assert pulls.get_pull_request(repo, pull_id).title == "t"
    assert lakefs_sdk.PullsApi(api.sdk(api.stack.reader)).get_pull_request(repo, pull_id).id == pull_id


def _push(api: Api, credentials: Credentials, repo: str, branch: str, key: str) -> lakefs_sdk.Commit:
    """An object written through S3 and committed through the REST API, both as credentials' user."""
    api.stack.client(credentials).put_object(Bucket=repo, Key=f"{branch}/{key}", Body=key.encode())
    commits = lakefs_sdk.CommitsApi(api.sdk(credentials))
    return commits.commit(repo, branch, lakefs_sdk.CommitCreation(message=f"add {key}"))


def _protected_pull(api: Api, client: lakefs_sdk.ApiClient, s3: Any, repo: str) -> tuple[str, str]:
    """A pull request by the admin from feature into main, which requires one approval: (id, path)."""
    _feature(client, s3, repo, "feature", "a.csv", b"1\n")
    rule = [{"pattern": "main", "required_approvals": 1}]
    assert _json(api, "PUT", f"/repositories/{repo}/settings/branch_protection", rule).status == 204
    creation = lakefs_sdk.PullRequestCreation(title="reviewed", source_branch="feature", destination_branch="main")
    pull_id = lakefs_sdk.PullsApi(client).create_pull_request(repo, creation).id
    return pull_id, f"/repositories/{repo}/pulls/{pull_id}"


def _approve(api: Api, path: str, credentials: Credentials) -> Any:
    approved = _json(api, "POST", path + "/reviews", {"verdict": "approve"}, credentials)
    assert approved.status == 201, approved.data
    return json.loads(approved.data)


def _merge_as(api: Api, path: str, credentials: Credentials) -> urllib3.BaseHTTPResponse:
    return api.request("PUT", path + "/merge", headers=_basic(credentials))


def test_a_committer_to_the_source_cannot_approve_it(
    api: Api,
    client: lakefs_sdk.ApiClient,
    s3: Any,
    repo: str,
    developer: tuple[str, Credentials],
    third: tuple[str, Credentials],
) -> None:
    """B, not the author, pushes to A's pull request, approves and merges: refused, as B's change
    would reach the protected branch reviewed by nobody else. C's approval then lets it through."""
    pusher, pusher_credentials = developer
    _, reviewer_credentials = third
    pull_id, path = _protected_pull(api, client, s3, repo)
    assert _push(api, pusher_credentials, repo, "feature", "b.csv").committer == pusher

    standing = _approve(api, path, pusher_credentials)
    assert standing["approvals"] == 0
    assert "0 of 1" in standing["merge_blocked_reason"] and pusher in standing["merge_blocked_reason"]
    for credentials in (pusher_credentials, api.stack.admin):
        message = error_message(_merge_as(api, path, credentials), 403)
        assert "cannot write to protected branch" in message and "do not count" in message
    main = lakefs_sdk.BranchesApi(client).get_branch(repo, "main").commit_id
    assert lakefs_sdk.PullsApi(client).get_pull_request(repo, pull_id).status == "open"

    assert _approve(api, path, reviewer_credentials)["approvals"] == 1
    merged = _merge_as(api, path, pusher_credentials)
    assert merged.status == 200, merged.data
    head = lakefs_sdk.CommitsApi(client).get_commit(repo, "main")
    assert head.id == json.loads(merged.data)["reference"] and head.parents[0] == main
    assert head.committer == pusher


def test_any_push_after_an_approval_makes_it_stale(
    api: Api,
    client: lakefs_sdk.ApiClient,
    s3: Any,
    repo: str,
    developer: tuple[str, Credentials],
    third: tuple[str, Credentials],
) -> None:
    _, other_credentials = developer
    _, reviewer_credentials = third
    pull_id, path = _protected_pull(api, client, s3, repo)
    for n, credentials in enumerate((other_credentials, api.stack.admin)):  # not the author, the author
        assert _approve(api, path, reviewer_credentials)["approvals"] == 1
        _push(api, credentials, repo, "feature", f"late-{n}.csv")
        stale = json.loads(api.request("GET", path).data)
        assert stale["approvals"] == 0 and "0 of 1" in stale["merge_blocked_reason"]
        message = error_message(_merge_as(api, path, reviewer_credentials), 403)
        assert "cannot write to protected branch" in message
    assert _approve(api, path, reviewer_credentials)["approvals"] == 1
    assert _merge_as(api, path, reviewer_credentials).status == 200
    assert lakefs_sdk.PullsApi(client).get_pull_request(repo, pull_id).status == "merged"


def test_commits_through_the_api_are_recorded_as_by_the_user(
    api: Api, client: lakefs_sdk.ApiClient, repo: str, developer: tuple[str, Credentials]
) -> None:
    """As graveler records them, not only as the API shows them: the committer is the user the
    API authenticated, for commits, merges, cherry-picks and reverts, never the API's service user."""
    user, credentials = developer
    made = [_push(api, credentials, repo, "main", "x.csv").id]
    mine = api.sdk(credentials)
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="side", source="main"))
    side = _push(api, api.stack.admin, repo, "side", "y.csv").id
    made.append(lakefs_sdk.RefsApi(mine).merge_into_branch(repo, "side", "main").reference)
    lakefs_sdk.BranchesApi(client).create_branch(repo, lakefs_sdk.BranchCreation(name="picks", source=made[0]))
    made.append(lakefs_sdk.BranchesApi(mine).cherry_pick(repo, "picks", lakefs_sdk.CherryPickCreation(ref=side)).id)
    revert = lakefs_sdk.RevertCreation(ref="picks", parent_number=0)
    lakefs_sdk.BranchesApi(mine).revert_branch(repo, "picks", revert)
    made.append(lakefs_sdk.BranchesApi(client).get_branch(repo, "picks").commit_id)
    for commit_id in made:
        recorded = api.stack.graveler.GetCommit(api_pb2.GetCommitRequest(repository=repo, commit_id=commit_id))
        assert recorded.committer == user, (commit_id, recorded.committer)
        assert "silt.requested-committer" not in recorded.metadata
        shown = lakefs_sdk.CommitsApi(client).get_commit(repo, commit_id)
        assert shown.committer == user and "silt.requested-committer" not in (shown.metadata or {})
    logged = lakefs_sdk.RefsApi(client).log_commits(repo, "main", amount=3).results
    assert [(c.id, c.committer) for c in logged] == [(made[1], user), (side, ADMIN), (made[0], user)]


def test_commits_through_the_cli_are_by_its_user(api: Api, repo: str, developer: tuple[str, Credentials]) -> None:
    user, credentials = developer
    endpoints = api.stack.stack.endpoints
    settings = Settings(endpoints["graveler"], endpoints["auth"], api.stack.endpoint, "us-east-1", credentials, "test")
    api.stack.client(credentials).put_object(Bucket=repo, Key="main/cli.csv", Body=b"1")
    result = CliRunner().invoke(
        cli, ["--json", "commit", f"silt://{repo}/main", "-m", "from the cli"], obj=State(_client=Client(settings))
    )
    assert result.exit_code == 0, result.output
    commit_id = json.loads(result.stdout)["id"]
    recorded = api.stack.graveler.GetCommit(api_pb2.GetCommitRequest(repository=repo, commit_id=commit_id))
    assert recorded.committer == user
