"""Uploads that could hurt the server or store wrong data: slow bodies (they must never take the
threads reads need, and are ended), bodies cut short of their Content-Length, and content types
or metadata that could not be sent back as HTTP headers. Raw sockets, as an attacker would send."""

from __future__ import annotations

import base64
import json
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import lakefs_sdk
import pytest
import urllib3
from lakefs_sdk.exceptions import BadRequestException

from edge.api.backend import UploadLimits
from tests.e2e.api.conftest import Api

LIMITS = UploadLimits()


def _auth(api: Api) -> str:
    admin = api.stack.admin
    secret = admin.secret_access_key.get_secret_value()
    return "Basic " + base64.b64encode(f"{admin.access_key_id}:{secret}".encode()).decode()


def _open(api: Api, head: str) -> socket.socket:
    where = urlsplit(api.stack.endpoint)
    sock = socket.create_connection((where.hostname or "127.0.0.1", where.port or 80), timeout=10)
    sock.sendall(head.encode("latin-1"))
    return sock


def _upload_head(api: Api, repo: str, path: str, length: int, extra: str = "") -> str:
    return (
        f"POST /api/v1/repositories/{repo}/branches/main/objects?path={path} HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: {_auth(api)}\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    )


def _answer(sock: socket.socket, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """The server's whole answer (it closes the connection after an upload it refused)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _length(data: bytes) -> int:
    for line in data.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _message(body: bytes) -> str:
    message: str = json.loads(body)["message"]
    return message


def _stored(api: Api, repo: str) -> list[Path]:
    root = api.stack.stack.data_dir / "data" / repo / "data"
    return [p for p in root.glob("*") if not p.name.startswith(".")] if root.exists() else []


def _listed(api: Api, repo: str) -> list[str]:
    response = api.request("GET", f"/repositories/{repo}/refs/main/objects/ls")
    assert response.status == 200
    return [row["path"] for row in json.loads(response.data)["results"]]


def test_slow_uploads_cannot_starve_reads_and_are_ended(api: Api, repo: str) -> None:
    small = api.request("POST", f"/repositories/{repo}/branches/main/objects?path=small", body=b"hello")
    assert small.status == 201
    extra = 2
    # Each declares 10 MB (the streamed path, a thread each) and sends one byte.
    socks = [_open(api, _upload_head(api, repo, f"slow{i}", 10_000_000) + "x") for i in range(LIMITS.in_flight + extra)]
    started = time.monotonic()
    answers: dict[socket.socket, tuple[int, dict[str, str], bytes]] = {}
    read_took: float | None = None
    last_drip = started
    try:
        while len(answers) < len(socks) and time.monotonic() - started < LIMITS.grace_seconds + 15:
            waiting = [s for s in socks if s not in answers]
            readable, _, _ = select.select(waiting, [], [], 0.5)
            for sock in readable:
                answers[sock] = _answer(sock)
            if read_took is None and len(answers) >= extra:
                # Every upload slot is held by a trickle: a read must still be served at once.
                before = time.monotonic()
                got = api.request("GET", f"/repositories/{repo}/refs/main/objects?path=small")
                read_took = time.monotonic() - before
                assert got.status == 200 and got.data == b"hello"
            if time.monotonic() - last_drip > 2:  # one byte every 2 s: far under the least rate
                last_drip = time.monotonic()
                for sock in socks:
                    if sock not in answers:
                        sock.sendall(b"x")
    finally:
        for sock in socks:
            sock.close()
    ended = time.monotonic() - started
    assert read_took is not None and read_took < 5, read_took
    statuses = sorted(status for status, _, _ in answers.values())
    assert statuses == [408] * LIMITS.in_flight + [503] * extra, statuses
    for status, headers, body in answers.values():
        assert headers["content-type"].startswith("application/json")
        if status == 503:
            assert headers["retry-after"] == str(LIMITS.retry_after_seconds)
            assert "too many uploads" in _message(body)
        else:
            assert "too slow" in _message(body)
    # Ended by the rate limit soon after its grace period, not by an idle timeout or the client.
    assert LIMITS.grace_seconds - 1 < ended < LIMITS.grace_seconds + 10, ended
    assert _listed(api, repo) == ["small"] and len(_stored(api, repo)) == 1
    # The slots are free again.
    assert api.request("POST", f"/repositories/{repo}/branches/main/objects?path=after", body=b"ok").status == 201


@pytest.mark.parametrize("declared,sent", [(1000, 500), (1_000_000, 300_000)])
def test_truncated_upload_is_refused_and_nothing_kept(api: Api, repo: str, declared: int, sent: int) -> None:
    # Small bodies are read whole, bigger ones streamed to the store: both are checked.
    sock = _open(api, _upload_head(api, repo, "cut", declared))
    try:
        sock.sendall(b"d" * sent)
        sock.shutdown(socket.SHUT_WR)  # the client stops sending but still listens
        status, headers, body = _answer(sock)
    finally:
        sock.close()
    assert status == 400 and headers["content-type"].startswith("application/json")
    assert _message(body) == (
        f"incomplete body: the request ended after {sent} bytes of the {declared} its Content-Length declares"
    )
    assert _listed(api, repo) == [] and _stored(api, repo) == []


def test_control_characters_in_content_type_or_metadata_are_refused(
    api: Api, client: lakefs_sdk.ApiClient, repo: str
) -> None:
    objects = lakefs_sdk.ObjectsApi(client)
    upload = f"/repositories/{repo}/branches/main/objects?path="
    # A multipart part's headers are parsed by python-multipart, which keeps a bare LF.
    fields = {"content": ("f", b"data", "text/html\nX-Injected: yes")}
    body, form_type = urllib3.encode_multipart_formdata(fields)
    refused = api.request("POST", upload + "inj", body=body, headers={**_headers(api), "Content-Type": form_type})
    assert refused.status == 400 and "content type" in _message(refused.data)
    for bad in ("text", "text/html/x" + "y" * 300, "a b/c", "text/plain; charset=\xe9"):
        answer = api.request("POST", upload + "inj", body=b"x", headers={**_headers(api), "Content-Type": bad})
        assert answer.status == 400 and "content type" in _message(answer.data), bad
    assert _listed(api, repo) == [] and _stored(api, repo) == []

    assert api.request("POST", upload + "ok", body=b"x").status == 201
    for bad_set in ({"a\r\nSet-Cookie: x": "v"}, {"b": "x\ny"}, {"c": "\x00"}, {"d e": "v"}, {"f": "日本"}):
        with pytest.raises(BadRequestException) as exc:
            objects.update_object_user_metadata(repo, "main", "ok", lakefs_sdk.UpdateObjectUserMetadata(set=bad_set))
        assert "user metadata" in json.loads(exc.value.body)["message"]
    assert objects.stat_object(repo, "main", "ok").metadata == {}
    # obs-text (latin-1) is a valid header value and goes both ways, over the API and S3.
    good = lakefs_sdk.UpdateObjectUserMetadata(set={"Team": "café", "x-y_z": "a b\tc"})
    objects.update_object_user_metadata(repo, "main", "ok", good)
    assert objects.stat_object(repo, "main", "ok").metadata == {"Team": "café", "x-y_z": "a b\tc"}
    head = api.stack.client().head_object(Bucket=repo, Key="main/ok")
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-meta-x-y_z"] == "a b\tc"


@pytest.mark.parametrize("target", ["api", "s3"])
def test_control_characters_in_headers_never_reach_a_route(api: Api, repo: str, target: str) -> None:
    # X-Lakefs-Meta-* and S3's x-amz-meta-* / Content-Type arrive as headers, which the server's
    # HTTP parser refuses with a control character in them: the S3 gateway's PutObject,
    # CopyObject (REPLACE) and CreateMultipartUpload take their metadata only from headers.
    if target == "api":
        head = _upload_head(api, repo, "h", 1, "X-Lakefs-Meta-K: a\x01b\r\n")
    else:
        head = f"PUT /{repo}/main/h HTTP/1.1\r\nHost: x\r\nx-amz-meta-k: a\x01b\r\nContent-Length: 1\r\n\r\n"
    sock = _open(api, head + "x")
    try:
        status, _, _ = _answer(sock)
    finally:
        sock.close()
    assert status == 400
    assert _listed(api, repo) == [] and _stored(api, repo) == []


def _headers(api: Api) -> dict[str, str]:
    return {"Authorization": _auth(api)}


def test_truncated_chunked_upload_is_refused(api: Api, repo: str) -> None:
    # No Content-Length: only the missing last (empty) chunk tells the body was cut.
    head = (
        f"POST /api/v1/repositories/{repo}/branches/main/objects?path=cc HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: {_auth(api)}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    sock = _open(api, head + "5\r\nhello\r\n")
    try:
        sock.shutdown(socket.SHUT_WR)
        status, _, body = _answer(sock)
    finally:
        sock.close()
    assert status == 400 and _message(body) == "incomplete body: the request ended after 5 bytes"
    assert _listed(api, repo) == [] and _stored(api, repo) == []
    # A whole chunked body is stored as before.
    whole = _open(api, head.replace("path=cc", "path=whole") + "5\r\nhello\r\n0\r\n\r\n")
    try:
        status, _, body = _answer(whole)
    finally:
        whole.close()
    assert status == 201 and json.loads(body)["size_bytes"] == 5
