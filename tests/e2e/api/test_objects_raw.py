"""The objects endpoints on the wire: raw and chunked uploads, conditional uploads, ranges and
HEAD, the headers objects are served with, and bad input (a clear JSON error, nothing stored)."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from tests.e2e.api.conftest import Api


def _auth(api: Api) -> dict[str, str]:
    admin = api.stack.admin
    return urllib3.make_headers(basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}")


def _upload(api: Api, repo: str, path: str, body: object, **headers: str) -> urllib3.BaseHTTPResponse:
    return api.request(
        "POST", f"/repositories/{repo}/branches/main/objects?path={path}", body=body, headers={**_auth(api), **headers}
    )


def _get(api: Api, repo: str, path: str, **headers: str) -> urllib3.BaseHTTPResponse:
    return api.request("GET", f"/repositories/{repo}/refs/main/objects?path={path}", headers={**_auth(api), **headers})


def _error(response: urllib3.BaseHTTPResponse, status: int) -> str:
    assert response.status == status, (response.status, response.data)
    assert response.headers["content-type"].startswith("application/json")
    message: str = json.loads(response.data)["message"]
    assert message
    return message


def _listed(api: Api, repo: str) -> list[str]:
    response = api.request("GET", f"/repositories/{repo}/refs/main/objects/ls")
    assert response.status == 200
    return [row["path"] for row in json.loads(response.data)["results"]]


def _stored(api: Api, repo: str) -> list[Path]:
    """Object files in the repository's namespace on the local block store (sidecars aside)."""
    root = api.stack.stack.data_dir / "data" / repo / "data"
    return [p for p in root.glob("*") if not p.name.startswith(".")] if root.exists() else []


def test_chunked_raw_upload_with_metadata(api: Api, repo: str) -> None:
    pieces = [secrets.token_bytes(100_000) for _ in range(5)]

    def body() -> Iterator[bytes]:
        yield from pieces  # a generator: urllib3 sends it chunked, with no Content-Length

    response = _upload(
        api, repo, "c/big.bin", body(), **{"Content-Type": "application/x-thing", "X-Lakefs-Meta-My_Key": "V"}
    )
    assert response.status == 201, response.data
    stats = json.loads(response.data)
    data = b"".join(pieces)
    assert stats["size_bytes"] == len(data) and stats["checksum"] == hashlib.md5(data).hexdigest()
    assert stats["metadata"] == {"my_key": "V"} and stats["content_type"] == "application/x-thing"
    got = _get(api, repo, "c/big.bin")
    assert got.status == 200 and got.data == data
    assert got.headers["Content-Length"] == str(len(data)) and got.headers["Content-Type"] == "application/x-thing"
    assert got.headers["ETag"] == f'"{stats["checksum"]}"' and got.headers["Last-Modified"].endswith("GMT")
    assert got.headers["X-Content-Type-Options"] == "nosniff" and got.headers["Content-Security-Policy"] == "sandbox"


def test_if_none_match_star(api: Api, repo: str) -> None:
    assert _upload(api, repo, "once", b"first", **{"If-None-Match": "*"}).status == 201
    assert "already exists" in _error(_upload(api, repo, "once", b"second", **{"If-None-Match": "*"}), 412)
    assert _get(api, repo, "once").data == b"first"
    assert len(_stored(api, repo)) == 1
    _error(_upload(api, repo, "once", b"third", **{"If-None-Match": '"abc"'}), 501)


def test_ranges_head_and_conditional_get(api: Api, repo: str) -> None:
    data = bytes(range(100))
    etag = json.loads(_upload(api, repo, "r", data).data)["checksum"]
    partial = _get(api, repo, "r", Range="bytes=90-200")
    assert partial.status == 206 and partial.data == data[90:]
    assert partial.headers["Content-Range"] == "bytes 90-99/100" and partial.headers["Content-Length"] == "10"
    for bad in ("bytes=100-", "bytes=5-1", "bytes=0-1,3-4", "pages=1-2", "bytes=-0"):
        refused = _get(api, repo, "r", Range=bad)
        assert refused.status == 416, bad
        assert refused.headers["Content-Range"] == "bytes */100"
    head = api.request("HEAD", f"/repositories/{repo}/refs/main/objects?path=r")
    assert head.status == 200 and head.headers["Content-Length"] == "100" and head.data == b""
    assert head.headers["ETag"] == f'"{etag}"'
    ranged = api.request(
        "HEAD", f"/repositories/{repo}/refs/main/objects?path=r", headers={**_auth(api), "Range": "bytes=0-9"}
    )
    assert ranged.status == 206 and ranged.headers["Content-Range"] == "bytes 0-9/100"
    assert api.request("HEAD", f"/repositories/{repo}/refs/main/objects?path=nope").status == 404
    assert _get(api, repo, "r", **{"If-None-Match": f'"{etag}"'}).status == 304
    empty = _upload(api, repo, "empty", b"")
    assert empty.status == 201 and _get(api, repo, "empty").data == b""
    assert _get(api, repo, "empty", Range="bytes=0-").status == 416


def test_multipart_form_data(api: Api, repo: str) -> None:
    fields: list[tuple[str, str | tuple[str, bytes, str]]] = [
        ("other", "ignored"),
        ("content", ("f.csv", b"x,y\n1,2\n", "text/csv")),
    ]
    body, content_type = urllib3.encode_multipart_formdata(fields)
    response = _upload(api, repo, "form.csv", body, **{"Content-Type": content_type})
    assert response.status == 201, response.data
    assert json.loads(response.data)["content_type"] == "text/csv"
    assert _get(api, repo, "form.csv").data == b"x,y\n1,2\n"
    body, content_type = urllib3.encode_multipart_formdata({"file": ("f", b"data")})
    assert "content" in _error(_upload(api, repo, "nocontent", body, **{"Content-Type": content_type}), 400)
    # A body that ends inside the content part: refused, and its bytes removed.
    cut, cut_type = urllib3.encode_multipart_formdata({"content": ("f", b"d" * 1000)})
    assert "malformed" in _error(_upload(api, repo, "cut", cut[:600], **{"Content-Type": cut_type}), 400)
    assert _listed(api, repo) == ["form.csv"] and len(_stored(api, repo)) == 1


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("", 400),  # no path
        ("?path=", 400),
        ("?path=" + "a" * 1025, 400),
        ("?path=" + "é" * 600, 400),  # 1,200 bytes
    ],
    ids=["missing", "empty", "too-long", "too-many-bytes"],
)
def test_bad_paths(api: Api, repo: str, query: str, status: int) -> None:
    response = api.request("POST", f"/repositories/{repo}/branches/main/objects{query}", body=b"x", headers=_auth(api))
    assert "path" in _error(response, status)
    assert _listed(api, repo) == [] and _stored(api, repo) == []


def test_unknown_repository_and_branch(api: Api, repo: str) -> None:
    _error(_upload(api, "no-such-repo", "f", b"x"), 404)
    missing = api.request("POST", f"/repositories/{repo}/branches/nope/objects?path=f", body=b"x", headers=_auth(api))
    _error(missing, 404)
    _error(api.request("GET", f"/repositories/{repo}/refs/nope/objects?path=f"), 404)
    _error(api.request("GET", f"/repositories/{repo}/refs/main/objects/stat?path=f"), 404)
    assert _stored(api, repo) == []


def test_credentials_are_required(api: Api, repo: str) -> None:
    response = api.request("POST", f"/repositories/{repo}/branches/main/objects?path=f", body=b"x", headers={})
    _error(response, 401)
    _error(api.request("GET", f"/repositories/{repo}/refs/main/objects/ls", headers={}), 401)
    assert _listed(api, repo) == [] and _stored(api, repo) == []


def test_read_only_user_cannot_upload(api: Api, repo: str) -> None:
    reader = api.stack.reader
    headers = urllib3.make_headers(basic_auth=f"{reader.access_key_id}:{reader.secret_access_key.get_secret_value()}")
    response = api.request("POST", f"/repositories/{repo}/branches/main/objects?path=f", body=b"x", headers=headers)
    _error(response, 403)
    assert _listed(api, repo) == [] and _stored(api, repo) == []


def test_bodies_over_the_limit_are_413(api: Api, repo: str) -> None:
    # Declared over the limit: refused before a byte is read or written, and the connection is
    # closed (the rest of the body will not be read).
    with urllib3.PoolManager() as own:
        huge = own.request(
            "POST",
            f"{api.base}/repositories/{repo}/branches/main/objects?path=huge",
            body=b"x" * 10,
            headers={**_auth(api), "Content-Length": str(6 * 1024**3)},
            retries=False,
            timeout=30,
        )
    assert "larger than" in _error(huge, 413)
    assert huge.headers["Connection"] == "close"
    assert _listed(api, repo) == [] and _stored(api, repo) == []


def test_metadata_and_listing_limits(api: Api, repo: str) -> None:
    response = _upload(api, repo, "m", b"x", **{"X-Lakefs-Meta-Big": "v" * 3000})
    assert "metadata" in _error(response, 400)
    assert "invalid parameters" in _error(
        api.request("GET", f"/repositories/{repo}/refs/main/objects/ls?amount=1001"), 400
    )
    response = api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects/delete",
        body=b"{not json",
        headers={**_auth(api), "Content-Type": "application/json"},
    )
    _error(response, 400)
    assert _listed(api, repo) == [] and _stored(api, repo) == []
