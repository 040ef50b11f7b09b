"""Bad requests get a clear lakeFS-style JSON error with the right status, and store nothing."""

from __future__ import annotations

import json
import secrets

import pytest
import urllib3

from edge.api.paging import MAX_AFTER
from tests.e2e.api.conftest import Api


def _error(response: urllib3.BaseHTTPResponse, status: int) -> str:
    assert response.status == status, (response.status, response.data)
    assert response.headers["content-type"].startswith("application/json")
    body = json.loads(response.data)
    assert list(body) == ["message"] and isinstance(body["message"], str) and body["message"]
    message: str = body["message"]
    return message


def _post(api: Api, path: str, body: bytes) -> urllib3.BaseHTTPResponse:
    admin = api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
    headers["Content-Type"] = "application/json"
    return api.request("POST", path, body=body, headers=headers)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "missing"),
        (b"[1, 2]", "JSON object"),
        (b'{"name": 5, "storage_namespace": "local://x5"}', "name"),
        (b'{"name": "Bad_Name", "storage_namespace": "local://bad"}', "name"),
        (b'{"name": "ok-name", "storage_namespace": "ftp://elsewhere"}', "storage_namespace"),
        (b'{"name": "ok-name", "storage_namespace": "local://ok", "default_branch": ["x"]}', "default_branch"),
    ],
    ids=["malformed", "empty", "array", "wrong-type", "invalid-name", "bad-namespace", "wrong-branch-type"],
)
def test_bad_repository_bodies_are_400(api: Api, body: bytes, says: str) -> None:
    assert says in _error(_post(api, "/repositories", body), 400)
    listed = json.loads(api.request("GET", "/repositories?prefix=ok-name").data)
    assert listed["results"] == []


def test_a_body_over_the_limit_is_413(api: Api) -> None:
    name = f"big-{secrets.token_hex(4)}"
    body = json.dumps({"name": name, "storage_namespace": "local://" + "x" * 2_000_000}).encode()
    _error(_post(api, "/repositories", body), 413)
    _error(api.request("GET", f"/repositories/{name}"), 404)


@pytest.mark.parametrize(
    "query", ["amount=1000000000", "amount=1001", "amount=-2", "amount=ten", "after=" + "a" * (MAX_AFTER + 1)]
)
def test_paging_parameters_out_of_range_are_400(api: Api, query: str) -> None:
    message = _error(api.request("GET", f"/repositories?{query}"), 400)
    # The message names the parameter.
    assert message.startswith(f"invalid parameters: {query.partition('=')[0]}: "), message


def test_unknown_things_are_404(api: Api, repo: str) -> None:
    _error(api.request("GET", "/repositories/no-such-repo"), 404)
    _error(api.request("GET", f"/repositories/{repo}/branches/no-such-branch"), 404)
    _error(api.request("GET", f"/repositories/{repo}/refs/no-such-ref/commits"), 404)
    _error(api.request("GET", "/no/such/route"), 404)


def test_bad_branch_and_commit_bodies_are_400(api: Api, repo: str) -> None:
    base = f"/repositories/{repo}/branches"
    assert "source" in _error(_post(api, base, b'{"name": "x1"}'), 400)
    _error(_post(api, base, b'{"name": "bad name", "source": "main"}'), 400)
    assert "message" in _error(_post(api, f"{base}/main/commits", b'{"message": 7}'), 400)
    _error(_post(api, f"{base}/main/commits", b'{"message": "m", "metadata": {"k": 1}}'), 400)
    admin = api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")
    headers["Content-Type"] = "application/json"
    reset = api.request("PUT", f"{base}/main", body=b'{"type": "everything"}', headers=headers)
    assert "type" in _error(reset, 400)
