"""Fixes from the REST API's review: listings with a prefix end, a protected branch is 403,
JSON bodies must say so and cookie-authenticated writes must come from this host, a 405 names
the allowed methods, and header-limit refusals on /api/v1 are JSON."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import ForbiddenException

from silt.errors import PROTECTED_BRANCH_COMMIT
from silt.graveler.v1 import graveler_pb2 as api_pb
from silt.graveler.v1 import model_pb2 as pb
from tests.e2e.api.conftest import Api


def _message(response: urllib3.BaseHTTPResponse, status: int) -> str:
    assert response.status == status, (response.status, response.data)
    assert response.headers["content-type"].startswith("application/json")
    body = json.loads(response.data)
    assert list(body) == ["message"] and body["message"]
    message: str = body["message"]
    return message


def _basic(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")


def _login(api: Api) -> urllib3.BaseHTTPResponse:
    admin = api.stack.admin
    login = api.request(
        "POST",
        "/auth/login",
        headers={"Content-Type": "application/json"},
        body=json.dumps(
            {"access_key_id": admin.access_key_id, "secret_access_key": admin.secret_access_key.get_secret_value()}
        ),
    )
    assert login.status == 200, login.data
    return login


def _admin_cookie(api: Api) -> str:
    return _login(api).headers["set-cookie"].split(";", 1)[0]


def test_a_prefix_after_other_names_is_listed_promptly(client: lakefs_sdk.ApiClient, repo: str) -> None:
    branches = lakefs_sdk.BranchesApi(client)
    for name in ("a1", "a2", "a3", "c"):
        branches.create_branch(repo, lakefs_sdk.BranchCreation(name=name, source="main"))
    started = time.monotonic()
    listed = branches.list_branches(repo, prefix="c", amount=1)
    assert [r.id for r in listed.results] == ["c"]
    assert time.monotonic() - started < 5  # it used to ask graveler for the same page until the deadline
    # Paging by one through the names with a prefix that others sort before.
    first = branches.list_branches(repo, prefix="a", amount=1)
    assert [r.id for r in first.results] == ["a1"] and first.pagination.has_more
    rest = branches.list_branches(repo, prefix="a", after=first.pagination.next_offset, amount=5)
    assert [r.id for r in rest.results] == ["a2", "a3"] and not rest.pagination.has_more
    assert branches.list_branches(repo, prefix="b", amount=1).results == []


def test_a_protected_branch_refuses_a_commit_with_403(api: Api, client: lakefs_sdk.ApiClient, repo: str) -> None:
    api.stack.client().put_object(Bucket=repo, Key="main/a.txt", Body=b"a")
    rule = pb.BranchProtectionRule(pattern="main", block_direct_writes=True)
    api.stack.graveler.SetBranchProtection(api_pb.SetBranchProtectionRequest(repository=repo, rules=[rule]))
    with pytest.raises(ForbiddenException) as refused:
        lakefs_sdk.CommitsApi(client).commit(repo, "main", lakefs_sdk.CommitCreation(message="m"))
    # lakeFS's text exactly (lakectl and scripts compare the whole message), the rule beside it.
    assert json.loads(refused.value.body or "{}") == {
        "message": PROTECTED_BRANCH_COMMIT,
        "branch_protection": {"branch": "main", "rules": ["main"]},
    }


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_a_json_body_must_be_declared_json(api: Api, repo: str, content_type: str | None) -> None:
    headers = _basic(api)
    if content_type:
        headers["Content-Type"] = content_type
    body = b'{"name": "from-a-form", "source": "main"}'
    assert "application/json" in _message(
        api.request("POST", f"/repositories/{repo}/branches", body=body, headers=headers), 415
    )
    _message(api.request("GET", f"/repositories/{repo}/branches/from-a-form"), 404)
    headers["Content-Type"] = "application/json; charset=utf-8"
    created = api.request("POST", f"/repositories/{repo}/branches", body=body, headers=headers)
    assert created.status == 201, created.data


def test_cookie_authenticated_writes_must_come_from_this_host(api: Api, repo: str) -> None:
    cookie = _admin_cookie(api)
    path = f"/repositories/{repo}/branches"

    def create(name: str, **extra: str) -> urllib3.BaseHTTPResponse:
        headers = {"Cookie": cookie, "Content-Type": "application/json", **extra}
        body = json.dumps({"name": name, "source": "main"})
        return api.request("POST", path, body=body, headers=headers)

    assert "cross-site" in _message(create("x1", Origin="https://evil.example"), 403)
    assert "cross-site" in _message(create("x2", Referer="https://evil.example/page"), 403)
    _message(create("x3", Origin="null"), 403)
    # Neither header: browsers always send Origin on a write, so this one cannot be trusted.
    assert "must send Origin" in _message(create("x4"), 403)
    # Reads are not refused; this host's own pages may write.
    reading = api.request("GET", path, headers={"Cookie": cookie, "Origin": "https://evil.example"})
    assert reading.status == 200
    assert create("y1", Origin=api.stack.endpoint).status == 201
    assert create("y2", Referer=api.stack.endpoint + "/repositories").status == 201
    # Basic credentials are never sent by a browser on its own: no Origin check, with or without one.
    basic = {**_basic(api), "Content-Type": "application/json", "Origin": "https://elsewhere.example"}
    assert api.request("POST", path, body=b'{"name": "y3", "source": "main"}', headers=basic).status == 201
    del basic["Origin"]
    assert api.request("POST", path, body=b'{"name": "y4", "source": "main"}', headers=basic).status == 201
    names = {r["id"] for r in json.loads(api.request("GET", path).data)["results"]}
    assert {"y1", "y2", "y3", "y4"} <= names and not names & {"x1", "x2", "x3", "x4"}


def test_a_cookie_authenticated_write_without_a_body_needs_origin_too(api: Api) -> None:
    """Routes with no JSON body (so no 415 rule) rely on the Origin check alone."""
    cookie = _admin_cookie(api)
    path = "/auth/users/reader/credentials"
    before = json.loads(api.request("GET", path).data)["results"]
    assert "must send Origin" in _message(api.request("POST", path, headers={"Cookie": cookie}), 403)
    form = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
    _message(api.request("POST", path, headers=form, body=b"a=1"), 403)
    assert json.loads(api.request("GET", path).data)["results"] == before
    created = api.request("POST", path, headers={"Cookie": cookie, "Origin": api.stack.endpoint})
    assert created.status == 201, created.data
    api.request("DELETE", f"{path}/{json.loads(created.data)['access_key_id']}")


@pytest.mark.parametrize(
    ("extra", "status"),
    [({}, 403), ({"Origin": "https://evil.example"}, 403), ({"Origin": "ORIGIN"}, 204), ({"Referer": "ORIGIN/x"}, 204)],
    ids=["no-origin", "cross-site", "same-origin", "same-origin-referer"],
)
def test_logout_with_the_cookie_must_come_from_this_host(api: Api, extra: dict[str, str], status: int) -> None:
    headers = {"Cookie": _admin_cookie(api), **{k: v.replace("ORIGIN", api.stack.endpoint) for k, v in extra.items()}}
    response = api.request("POST", "/auth/logout", headers=headers)
    if status == 403:
        assert "cross-site" in _message(response, 403)
        assert "set-cookie" not in response.headers
    else:
        assert response.status == 204 and "Max-Age=0" in response.headers["set-cookie"]


def test_logout_without_the_cookie_needs_no_origin(api: Api) -> None:
    response = api.request("POST", "/auth/logout", headers={})
    assert response.status == 204


def test_a_wrong_method_is_405_with_allow(api: Api) -> None:
    answer = api.request("PATCH", "/repositories")
    _message(answer, 405)
    assert set(answer.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


def test_a_header_over_the_limit_on_the_api_is_json(api: Api) -> None:
    url = urlsplit(api.stack.endpoint)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"GET /api/v1/healthcheck HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head.lower(), head
    assert list(json.loads(body)) == ["message"]


def test_the_session_cookie_is_secure_when_configured(api: Api, import_api: Api) -> None:
    # By default it follows the scheme: this stack speaks http.
    assert "secure" not in _login(api).headers["set-cookie"].lower()
    # import_api is configured with api.secure_cookies, as behind a TLS-terminating proxy.
    behind_a_proxy = import_api
    attributes = [a.strip().lower() for a in _login(behind_a_proxy).headers["set-cookie"].split(";")]
    assert "secure" in attributes and "httponly" in attributes
    same_origin = {"Cookie": _admin_cookie(behind_a_proxy), "Origin": behind_a_proxy.stack.endpoint}
    logout = behind_a_proxy.request("POST", "/auth/logout", headers=same_origin)
    assert logout.status == 204 and "secure" in logout.headers["set-cookie"].lower()
