"""Helpers of the object diff and query tests: uploads, a commit and a branch, the two calls."""

from __future__ import annotations

import io
import json
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import urllib3

from tests.e2e.api.conftest import Api, json_post


def auth(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")


def upload(api: Api, repo: str, path: str, body: bytes, content_type: str = "application/octet-stream") -> None:
    response = api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects?path={quote(path)}",
        body=body,
        headers={**auth(api), "Content-Type": content_type},
    )
    assert response.status == 201, response.data


def branch_off(api: Api, repo: str, name: str = "before") -> str:
    """Commits main and branches `name` off it: later uploads to main differ from `name`."""
    committed = json_post(api, f"/repositories/{repo}/branches/main/commits", {"message": "first"})
    assert committed.status == 201, committed.data
    created = json_post(api, f"/repositories/{repo}/branches", {"name": name, "source": "main"})
    assert created.status == 201, created.data
    return name


def diff(
    api: Api, repo: str, path: str, left: str = "before", right: str = "main", **query: Any
) -> urllib3.BaseHTTPResponse:
    params = "".join(f"&{name}={quote(str(value))}" for name, value in query.items())
    return api.request("GET", f"/repositories/{repo}/refs/{left}/diff/{right}/object?path={quote(path)}{params}")


def diff_ok(api: Api, repo: str, path: str, **query: Any) -> dict[str, Any]:
    response = diff(api, repo, path, **query)
    assert response.status == 200, response.data
    answer: dict[str, Any] = json.loads(response.data)
    return answer


def query(
    api: Api, repo: str, path: str, sql: str, page: int = 0, ref: str = "main", offset: int | None = None
) -> urllib3.BaseHTTPResponse:
    where = f"/repositories/{repo}/refs/{ref}/objects/query?path={quote(path)}"
    body: dict[str, object] = {"sql": sql, "page": page} if offset is None else {"sql": sql, "offset": offset}
    return json_post(api, where, body)


def parquet(table: pa.Table, row_group_size: int = 10_000) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=row_group_size)
    return out.getvalue()
