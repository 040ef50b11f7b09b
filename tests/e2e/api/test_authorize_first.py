"""Routes authorize before they read a request body: a caller without the right gets 403 for
any body, and the server never reads or parses what it sends. Where the resource to authorize
is named in the body (a new repository, branch, user, group or policy, and the unauthenticated login),
the body is read first but kept small."""

from __future__ import annotations

import json
import secrets

import pytest
import urllib3

from tests.e2e.api.conftest import Api

# Larger than api.max_body_bytes (1 MiB by default): read, it would be a 413.
OVERSIZED = b'{"pattern":"a"},' * 70_000

# Every write route whose repository is in its path, with its method.
WRITE_ROUTES = [
    ("PUT", "/settings/branch_protection"),
    ("POST", "/branch_protection"),
    ("DELETE", "/branch_protection"),
    ("PUT", "/settings/gc_rules"),
    ("POST", "/gc/rules"),
    ("POST", "/gc/prepare_uncommited"),
    ("PUT", "/branches/main"),
    ("POST", "/branches/main/commits"),
    ("POST", "/branches/main/revert"),
    ("POST", "/branches/main/cherry-pick"),
    ("POST", "/tags"),
    ("POST", "/refs/main/merge/main"),
    ("POST", "/pulls"),
    ("PATCH", "/pulls/some-id"),
    ("POST", "/pulls/some-id/reviews"),
    ("POST", "/pulls/some-id/comments"),
    ("POST", "/metadata"),
    ("DELETE", "/metadata"),
    ("POST", "/branches/main/objects/delete"),
    ("POST", "/branches/main/objects/copy?dest_path=c"),
    ("PUT", "/branches/main/objects/stat/user_metadata?path=a"),
    ("PUT", "/branches/main/staging/pmpu/some-id/parts/1?path=a"),
    ("PUT", "/branches/main/staging/pmpu/some-id/parts/1/copy?path=a"),
    ("PUT", "/branches/main/staging/pmpu/some-id?path=a"),
    ("DELETE", "/branches/main/staging/pmpu/some-id?path=a"),
]


def _headers(api: Api, who: str, content_type: str | None = "application/json") -> dict[str, str]:
    creds = api.stack.reader if who == "reader" else api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")
    if content_type:
        headers["Content-Type"] = content_type
    return headers


def _status(response: urllib3.BaseHTTPResponse) -> tuple[int, str]:
    assert response.headers["content-type"].startswith("application/json"), response.data
    body = json.loads(response.data)
    assert list(body) == ["message"], body
    return response.status, str(body["message"])


@pytest.mark.parametrize(("method", "path"), WRITE_ROUTES, ids=[f"{m} {p}" for m, p in WRITE_ROUTES])
def test_a_reader_gets_403_whatever_the_body(api: Api, repo: str, method: str, path: str) -> None:
    url = f"/repositories/{repo}{path}"
    # Malformed JSON, and a body not declared JSON: 400 and 415 for the admin, 403 for the reader.
    for body, content_type, admin_status in ((b"{not json", "application/json", 400), (b"x=1", "text/plain", 415)):
        as_admin = api.request(method, url, body=body, headers=_headers(api, "admin", content_type))
        assert _status(as_admin)[0] == admin_status
        status, message = _status(api.request(method, url, body=body, headers=_headers(api, "reader", content_type)))
        assert status == 403 and "reader" in message, (status, message)


def test_a_readers_oversized_body_is_refused_before_it_is_read(api: Api, repo: str) -> None:
    url = f"/repositories/{repo}/settings/branch_protection"
    body = b"[" + OVERSIZED + b'{"pattern":"a"}]'
    assert _status(api.request("PUT", url, body=body, headers=_headers(api, "admin")))[0] == 413
    status, message = _status(api.request("PUT", url, body=body, headers=_headers(api, "reader")))
    assert status == 403 and "SetBranchProtection" in message, (status, message)
    # Nothing was stored.
    rules = api.request("GET", url)
    assert rules.status == 200 and json.loads(rules.data) == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/repositories", {"name": "r-big", "storage_namespace": "local://" + "x" * 20_000}),
        ("/repositories/any-repo/branches", {"name": "b", "source": "main" + "~1" * 10_000}),
        ("/auth/users", {"id": "u" * 20_000}),
        ("/auth/groups", {"id": "g" * 20_000}),
        ("/auth/login", {"access_key_id": "a" * 20_000, "secret_access_key": "s"}),
    ],
    ids=["repository", "branch", "user", "group", "login"],
)
def test_bodies_read_before_authorizing_are_small(api: Api, path: str, body: dict[str, str]) -> None:
    """Well under api.max_body_bytes, yet refused: these are read before anyone is authorized."""
    status, message = _status(api.request("POST", path, body=json.dumps(body), headers=_headers(api, "reader")))
    assert status == 413 and "16384" in message, (status, message)


def test_a_policy_body_has_its_own_cap(api: Api) -> None:
    statement = {"effect": "allow", "action": ["fs:ReadObject"], "resource": "*"}
    policy = {"id": f"p-{secrets.token_hex(4)}", "statement": [statement] * 3000}  # ~220 KB
    status, message = _status(
        api.request("POST", "/auth/policies", body=json.dumps(policy), headers=_headers(api, "admin"))
    )
    assert status == 413 and str(128 * 1024) in message, (status, message)
    assert api.request("GET", f"/auth/policies/{policy['id']}").status == 404
