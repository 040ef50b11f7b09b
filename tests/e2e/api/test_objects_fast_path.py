"""The object fast path (edge/api/fast/objects.py) answers as FastAPI does: each request is
sent twice, plainly (the fast path takes it) and with one more query parameter no route reads
(the fast path leaves it to FastAPI, which ignores the parameter), and the two answers must
have the same status, headers (but Date and the request id) and body. Which requests the fast
path takes is tests/unit/api/test_objects_fast.py's."""

from __future__ import annotations

import json
import secrets
from typing import Any
from urllib.parse import urlencode

import lakefs_sdk
import pytest
import urllib3
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api

# Read by no route: FastAPI ignores it, the fast path declines the request because of it.
SLOW = "silt_test_slow_path=1"
VARYING = {"date", "x-request-id"}


def _basic(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _send(
    api: Api, method: str, target: str, slow: bool, headers: dict[str, str], body: Any = None
) -> urllib3.BaseHTTPResponse:
    """One request; a fresh connection each, as some answers close theirs."""
    sep = "&" if "?" in target else "?"
    url = api.base + target + (sep + SLOW if slow else "")
    with urllib3.PoolManager() as own:
        return own.request(method, url, body=body, headers=headers, retries=False, timeout=30)


def _answer(response: urllib3.BaseHTTPResponse) -> tuple[int, dict[str, str], bytes]:
    headers = {k.lower(): v for k, v in response.headers.items() if k.lower() not in VARYING}
    return response.status, headers, response.data


def _same(api: Api, method: str, target: str, headers: dict[str, str], body: Any = None) -> int:
    """Sends the request both ways; their answers must be equal. Returns the status."""
    fast = _answer(_send(api, method, target, False, headers, body))
    slow = _answer(_send(api, method, target, True, headers, body))
    assert fast == slow
    return fast[0]


@pytest.fixture(scope="module")
def stranger(api: Api) -> Credentials:
    """A user in no group: may do nothing."""
    auth = lakefs_sdk.AuthApi(api.sdk())
    user_id = f"stranger-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    issued = auth.create_credentials(user_id)
    return Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))


def _upload_both(api: Api, repo: str, headers: dict[str, str], body: bytes) -> None:
    """Uploads the same bytes to two paths of equal length, one each way: the ObjectStats agree
    but for the path, the fresh physical address and the time."""
    target = f"/repositories/{repo}/branches/main/objects?path="
    fast = _send(api, "POST", target + "up/fast", False, headers, body)
    slow = _send(api, "POST", target + "up/slow", True, headers, body)
    (fast_status, fast_headers, fast_body), (slow_status, slow_headers, slow_body) = _answer(fast), _answer(slow)
    assert (fast_status, fast_headers) == (slow_status, slow_headers)
    assert fast_status == 201, fast_body
    fast_stats, slow_stats = json.loads(fast_body), json.loads(slow_body)
    assert list(fast_stats) == list(slow_stats)  # same fields in the same order
    assert (fast_stats.pop("path"), slow_stats.pop("path")) == ("up/fast", "up/slow")
    for varying in ("physical_address", "mtime"):
        fast_stats.pop(varying), slow_stats.pop(varying)
    assert fast_stats == slow_stats


def test_uploads_and_reads_agree(api: Api, repo: str) -> None:
    admin = _basic(api.stack.admin)
    data = secrets.token_bytes(3000)
    raw = {**admin, "Content-Type": "application/x-thing", "X-Lakefs-Meta-Colour": "blue"}
    _upload_both(api, repo, raw, data)
    boundary = "silt-boundary"
    form = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="content"; filename="f"\r\n'
            f"Content-Type: text/csv\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    _upload_both(api, repo, {**admin, "Content-Type": f"multipart/form-data; boundary={boundary}"}, form)

    read = f"/repositories/{repo}/refs/main/objects?path=up/fast"
    assert _same(api, "GET", read, admin) == 200
    assert _same(api, "GET", read + "&presign=false", admin) == 200
    assert _same(api, "HEAD", read, admin) == 200
    for byte_range, status in [("bytes=1-3", 206), ("bytes=-10", 206), ("bytes=2999-", 206), ("bytes=5000-", 416)]:
        assert _same(api, "GET", read, {**admin, "Range": byte_range}) == status
        assert _same(api, "HEAD", read, {**admin, "Range": byte_range}) == status
    etag = _send(api, "HEAD", read, False, admin).headers["ETag"]
    assert _same(api, "GET", read, {**admin, "If-None-Match": etag}) == 304
    # An empty object: no body to read.
    empty = f"/repositories/{repo}/branches/main/objects?path=empty"
    assert _send(api, "POST", empty, False, admin, b"").status == 201
    assert _same(api, "GET", f"/repositories/{repo}/refs/main/objects?path=empty", admin) == 200


def test_refusals_agree(api: Api, repo: str, stranger: Credentials) -> None:
    admin = _basic(api.stack.admin)
    put = f"/repositories/{repo}/branches/main/objects?path=f"
    assert _send(api, "POST", put, False, admin, b"x").status == 201
    read = f"/repositories/{repo}/refs/main/objects?path=f"
    wrong = Credentials(api.stack.admin.access_key_id, SecretStr("not-the-secret"))
    cases: list[tuple[str, str, dict[str, str], int]] = [
        # credentials
        ("GET", read, {}, 401),
        ("POST", put, {}, 401),
        ("GET", read, _basic(wrong), 401),
        ("POST", put, _basic(wrong), 401),
        ("GET", read, {"Authorization": "Basic !!!"}, 401),
        ("GET", read, {"Authorization": "Digest x"}, 401),
        ("GET", read, {"Authorization": "Bearer not-a-token"}, 401),
        ("GET", read, {"Cookie": "internal_auth_session=not-a-token"}, 401),
        # a state-changing request on a cookie must come from this host's pages
        ("POST", put, {"Cookie": "internal_auth_session=not-a-token"}, 403),
        # permissions
        ("GET", read, _basic(stranger), 403),
        ("HEAD", read, _basic(stranger), 403),
        ("POST", put, _basic(api.stack.reader), 403),
        # what is not there
        ("GET", "/repositories/no-such-repo/refs/main/objects?path=f", admin, 404),
        ("HEAD", "/repositories/no-such-repo/refs/main/objects?path=f", admin, 404),
        ("POST", "/repositories/no-such-repo/branches/main/objects?path=f", admin, 404),
        ("GET", f"/repositories/{repo}/refs/nope/objects?path=f", admin, 404),
        ("POST", f"/repositories/{repo}/branches/nope/objects?path=f", admin, 404),
        ("GET", f"/repositories/{repo}/refs/main/objects?path=missing", admin, 404),
        ("HEAD", f"/repositories/{repo}/refs/main/objects?path=missing", admin, 404),
        # bad paths
        ("GET", f"/repositories/{repo}/refs/main/objects", admin, 400),
        ("GET", f"/repositories/{repo}/refs/main/objects?path=", admin, 400),
        ("POST", f"/repositories/{repo}/branches/main/objects", admin, 400),
        ("POST", f"/repositories/{repo}/branches/main/objects?path=" + "é" * 600, admin, 400),
        # bad headers
        ("POST", put, {**admin, "X-Lakefs-Meta-Big": "v" * 3000}, 400),
        ("POST", put, {**admin, "If-None-Match": '"abc"'}, 501),
        ("POST", put, {**admin, "If-None-Match": "*"}, 412),
        ("POST", put, {**admin, "Content-Length": str(6 * 1024**3)}, 413),
    ]
    for method, target, headers, status in cases:
        body = b"x" if method == "POST" else None
        assert _same(api, method, target, headers, body) == status, (method, target, headers)


def test_session_cookie_agrees(api: Api, repo: str) -> None:
    admin = api.stack.admin
    login = {"access_key_id": admin.access_key_id, "secret_access_key": admin.secret_access_key.get_secret_value()}
    reply = api.request(
        "POST", "/auth/login", body=json.dumps(login).encode(), headers={"Content-Type": "application/json"}
    )
    assert reply.status == 200, reply.data
    cookie = {"Cookie": reply.headers["set-cookie"].split(";", 1)[0]}
    put = f"/repositories/{repo}/branches/main/objects?path=f"
    assert _same(api, "POST", put, cookie, b"x") == 403  # no Origin
    assert _same(api, "POST", put, {**cookie, "Origin": "http://elsewhere.example"}, b"x") == 403
    assert _send(api, "POST", put, False, {**cookie, "Origin": api.stack.endpoint}, b"x").status == 201
    assert _same(api, "GET", f"/repositories/{repo}/refs/main/objects?path=f", cookie) == 200


def test_listings_agree(api: Api, repo: str, stranger: Credentials) -> None:
    admin = _basic(api.stack.admin)
    objects = {
        "ls/a.csv": {"Content-Type": "text/csv", "X-Lakefs-Meta-Owner": "me"},
        "ls/dir/ünï 数据.parquet": {},
        "ls/dir/sub/x": {"X-Lakefs-Meta-Quoted": 'say "hi"'},
        "ls/z": {"Content-Type": "application/json"},
    }
    for key, headers in objects.items():
        target = f"/repositories/{repo}/branches/main/objects?{urlencode({'path': key})}"
        assert _send(api, "POST", target, False, {**admin, **headers}, key.encode()).status == 201
    ls = f"/repositories/{repo}/refs/main/objects/ls"
    for query in [
        "",
        "prefix=ls/",
        "prefix=ls/&amount=2",
        "prefix=ls/&amount=2&after=ls/dir/sub/x",
        "prefix=ls/&delimiter=/",
        "prefix=ls/dir/&delimiter=/&user_metadata=false",
        "prefix=ls/&user_metadata=true&presign=false&amount=-1",
        "prefix=ls/&amount=0",
        "prefix=nothing/",
    ]:
        assert _same(api, "GET", ls + "?" + query, admin) == 200, query
    page = json.loads(_send(api, "GET", ls + "?prefix=ls/&amount=2", False, admin).data)
    assert [row["path"] for row in page["results"]] == ["ls/a.csv", "ls/dir/sub/x"]
    assert page["pagination"] == {"has_more": True, "next_offset": "ls/dir/sub/x", "results": 2, "max_per_page": 2}
    # Refusals: credentials, permissions, what is not there.
    for target, headers, status in [
        (ls, {}, 401),
        (ls, _basic(stranger), 403),
        ("/repositories/no-such-repo/refs/main/objects/ls", admin, 404),
        (f"/repositories/{repo}/refs/nope/objects/ls", admin, 404),
    ]:
        assert _same(api, "GET", target, headers) == status, (target, status)
