"""`silt local` and `silt fs` move bytes through presigned URLs when the server offers them, and
through the S3 gateway with --no-presign or when the server offers none — on the real stack.

The CLI reaches the stack's HTTP port through a recording proxy (`--s3-endpoint`), which sorts
every request it passes: S3-signed (the gateway), the REST API, or a presigned URL (the local
blockstore's are the edge's own, signed for the Host the client used: the proxy again). The
presigned runs are made with the proxy refusing every S3-signed object read and write (403), so
a byte through the gateway fails the command, not only a count.
"""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from edge.core.asgi import API_PREFIX, PRESIGNED_PREFIX
from silt.launcher import Stack
from tests.e2e.conftest import Result, Silt

Run = Callable[..., Result]

S3, API, PRESIGNED = "s3", "api", "presigned"
BIG = bytes(range(256)) * (3 * 4096)  # 3 MiB: streamed in pieces, not one read
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass(frozen=True)
class Seen:
    kind: str  # S3, API or PRESIGNED
    method: str
    path: str  # without the query
    status: int


class RecordingProxy:
    """An HTTP proxy in front of the stack's port that records each request's kind, optionally
    refuses S3-signed object requests, and can make /config deny presigning."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.seen: list[Seen] = []
        self.refuse_s3_objects = False
        self.deny_presign = False
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.forward(self)

            do_PUT = do_POST = do_HEAD = do_DELETE = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def clear(self) -> None:
        with self._lock:
            self.seen.clear()

    def requests(self, kind: str, method: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.kind == kind and (method is None or s.method == method)]

    @staticmethod
    def kind_of(handler: BaseHTTPRequestHandler) -> str:
        path, _, query = handler.path.partition("?")
        if path.startswith(PRESIGNED_PREFIX):
            return PRESIGNED
        auth = handler.headers.get("Authorization", "")
        if auth.startswith(("AWS4-HMAC-SHA256", "AWS ")) or "X-Amz-Algorithm=" in query:
            return S3
        return API if path == API_PREFIX or path.startswith(API_PREFIX + "/") else S3

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        kind = self.kind_of(handler)
        path = handler.path.partition("?")[0]
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        # An S3 object request: /bucket/ref/key (the listings and bucket calls have no key).
        is_object = kind == S3 and len(path.strip("/").split("/")) >= 3
        if self.refuse_s3_objects and is_object and handler.command in ("GET", "PUT", "POST"):
            refused = b"<Error><Code>AccessDenied</Code><Message>refused by the test proxy</Message></Error>"
            self._answer(handler, 403, [("Content-Type", "application/xml")], refused, kind, path)
            return
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.putrequest(handler.command, handler.path, skip_host=True, skip_accept_encoding=True)
            for name, value in handler.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    conn.putheader(name, value)
            conn.endheaders(body or None)
            response = conn.getresponse()
            data = response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
        finally:
            conn.close()
        if self.deny_presign and kind == API and path == API_PREFIX + "/config" and response.status == 200:
            config = json.loads(data)
            for storage in [config.get("storage_config"), *config.get("storage_config_list", [])]:
                if storage:
                    storage["pre_sign_support"] = storage["pre_sign_support_ui"] = False
            data = json.dumps(config).encode()
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(data))))
        self._answer(handler, response.status, headers, data, kind, path, head=handler.command == "HEAD")

    def _answer(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        headers: list[tuple[str, str]],
        data: bytes,
        kind: str,
        path: str,
        head: bool = False,
    ) -> None:
        with self._lock:
            self.seen.append(Seen(kind, handler.command, path, status))
        handler.send_response_only(status)
        for name, value in headers:
            if head or name.lower() != "content-length":
                handler.send_header(name, value)
        if not head:
            handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if not head:
            handler.wfile.write(data)


@pytest.fixture
def proxy(stack: Stack) -> Iterator[RecordingProxy]:
    with RecordingProxy(stack.endpoints["gateway"]) as running:
        yield running


def _make_repo(silt: Silt, tmp_path: Path) -> str:
    """main: data/a.txt, data/sub/b.txt, a 3 MiB data/big.bin, and other.txt outside data/."""
    name = f"presign-{uuid.uuid4().hex[:8]}"
    silt("repo", "create", name)
    src = tmp_path / f"seed-{name}"
    (src / "data" / "sub").mkdir(parents=True)
    (src / "data" / "a.txt").write_text("alpha\n")
    (src / "data" / "sub" / "b.txt").write_text("beta\n")
    (src / "data" / "big.bin").write_bytes(BIG)
    (src / "other.txt").write_text("other\n")
    silt("fs", "upload", "-r", "-q", "--no-presign", str(src), f"silt://{name}/main/")
    silt("commit", f"silt://{name}/main", "-m", "seed")
    return name


def _keys(seen: list[Seen], repo: str) -> set[str]:
    """The object keys (after the ref) that S3 requests named."""
    out = set()
    for s in seen:
        parts = s.path.strip("/").split("/", 2)
        if len(parts) == 3 and parts[0] == repo:
            out.add(parts[2])
    return out


def _round_trip(silt: Silt, via: Run, repo: str, work: Path, *flags: str) -> None:
    """Clone data/, edit one file, add one, commit; someone else commits; pull. `via` goes through
    the proxy; the other writer (silt) does not."""
    cloned = via("local", "clone", f"silt://{repo}/main/data", str(work), "-q", "--json", *flags).json()
    assert cloned["files"] == 3
    assert (work / "a.txt").read_text() == "alpha\n"
    assert (work / "big.bin").read_bytes() == BIG
    (work / "a.txt").write_text("ALPHA, edited\n")
    (work / "new.txt").write_text("new\n")
    committed = via("local", "commit", str(work), "-m", "local edits", "-q", "--json", *flags).json()
    assert {(c["type"], c["path"]) for c in committed["changes"]} == {("modified", "a.txt"), ("added", "new.txt")}
    assert silt("fs", "cat", "--no-presign", f"silt://{repo}/main/data/a.txt").out == "ALPHA, edited\n"
    assert silt("fs", "cat", "--no-presign", f"silt://{repo}/main/data/new.txt").out == "new\n"
    # The link kept the file's mtime: the checkout is clean right after the commit.
    assert via("local", "status", str(work), "--json").json()["local"] == []

    theirs = work.parent / "theirs.txt"
    theirs.write_text("from elsewhere\n")
    silt("fs", "upload", "-q", "--no-presign", str(theirs), f"silt://{repo}/main/data/theirs.txt")
    silt("commit", f"silt://{repo}/main", "-m", "someone else")
    pulled = via("local", "pull", str(work), "-q", "--json", *flags).json()
    assert pulled["changes"] == [{"path": "theirs.txt", "type": "added"}]
    assert (work / "theirs.txt").read_text() == "from elsewhere\n"
    assert via("local", "status", str(work), "--json").json()["local"] == []


def test_local_moves_bytes_through_presigned_urls_never_the_gateway(
    silt: Silt, proxy: RecordingProxy, tmp_path: Path
) -> None:
    repo = _make_repo(silt, tmp_path)
    proxied = _Prefixed(silt, proxy.url)
    proxy.refuse_s3_objects = True  # a byte through the gateway fails the command
    _round_trip(silt, proxied, repo, tmp_path / "work")

    assert proxy.requests(S3) == []  # not one S3 request: no object GET or PUT, no listing
    gets = proxy.requests(PRESIGNED, "GET")
    puts = proxy.requests(PRESIGNED, "PUT")
    # clone: 3 files; pull: theirs.txt. commit: a.txt and new.txt, each PUT then linked.
    assert len(gets) == 4 and all(s.status == 200 for s in gets)
    assert len(puts) == 2 and all(s.status == 200 for s in puts)
    links = [s for s in proxy.requests(API, "PUT") if s.path.endswith("/staging/backing")]
    assert len(links) == 2 and all(s.status == 200 for s in links)
    # /config is asked once per command that moves bytes (clone, commit, pull), not once per file.
    assert len([s for s in proxy.requests(API, "GET") if s.path == API_PREFIX + "/config"]) == 3

    # fs download/upload/cat take the same way.
    proxy.clear()
    out = tmp_path / "down"
    proxied("fs", "download", "-r", "-q", f"silt://{repo}/main/data/", str(out))
    assert (out / "sub" / "b.txt").read_text() == "beta\n"
    assert (out / "big.bin").read_bytes() == BIG
    proxied("fs", "upload", "-q", "--content-type", "text/csv", str(out / "a.txt"), f"silt://{repo}/main/copy.csv")
    assert proxied("fs", "cat", f"silt://{repo}/main/copy.csv").out == "ALPHA, edited\n"
    assert json.loads(silt("fs", "stat", f"silt://{repo}/main/copy.csv", "--json").out)["content_type"] == "text/csv"
    assert proxy.requests(S3) == []
    assert len(proxy.requests(PRESIGNED, "GET")) == 6 and len(proxy.requests(PRESIGNED, "PUT")) == 1

    # The proxy really refuses the gateway's object reads: --no-presign now fails, 403.
    refused = proxied("fs", "cat", "--no-presign", f"silt://{repo}/main/copy.csv", ok=False)
    assert refused.code != 0 and "refused by the test proxy" in refused.err


def test_no_presign_and_a_server_without_presign_use_the_gateway(
    silt: Silt, proxy: RecordingProxy, tmp_path: Path
) -> None:
    repo = _make_repo(silt, tmp_path)
    proxied = _Prefixed(silt, proxy.url)
    _round_trip(silt, proxied, repo, tmp_path / "work", "--no-presign")
    assert proxy.requests(PRESIGNED) == []
    # The REST API answers the listings, diffs and commits, but nothing of presigning: not even /config.
    presigning = ("/config", "/staging/backing", "/objects/stat")
    assert [s for s in proxy.requests(API) if s.path.endswith(presigning)] == []
    assert {"a.txt", "sub/b.txt", "big.bin", "theirs.txt"} <= {
        k.removeprefix("data/") for k in _keys(proxy.requests(S3, "GET"), repo)
    }
    assert {"data/a.txt", "data/new.txt"} <= _keys(proxy.requests(S3, "PUT"), repo)

    # No flag, and the server says it does not presign: the gateway again, /config asked once.
    proxy.clear()
    proxy.deny_presign = True
    repo = _make_repo(silt, tmp_path)
    _round_trip(silt, proxied, repo, tmp_path / "work2")
    assert proxy.requests(PRESIGNED) == []
    assert {"data/a.txt", "data/new.txt"} <= _keys(proxy.requests(S3, "PUT"), repo)
    assert len([s for s in proxy.requests(API, "GET") if s.path == API_PREFIX + "/config"]) == 3


class _Prefixed:
    """silt with `--s3-endpoint URL` first: the gateway and REST API through the proxy."""

    def __init__(self, silt: Silt, url: str) -> None:
        self._silt, self._url = silt, url

    def __call__(self, *args: str, ok: bool = True) -> Result:
        return self._silt("--s3-endpoint", self._url, *args, ok=ok)
