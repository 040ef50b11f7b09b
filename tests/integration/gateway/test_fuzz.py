"""Fuzzing the gateway process with mutated S3 requests over raw sockets.

An example is a *recipe*: one S3 operation whose semantic parts (keys, query values, ranges,
headers, XML bodies, aws-chunked payloads) hypothesis draws and which is then signed, so that
it reaches the operation's code and not only the authentication check; then raw mutations of
the signed bytes (request line, headers, signature and credential fields, chunk framing, any
byte). Every answer must parse as HTTP and be below 500 (501 NotImplemented as an S3 XML
error; 503 only as one, with graveler or auth stopped), a refusal must be an S3 XML error,
answers must arrive within the gateway's configured head and body timeouts plus a margin,
and the gateway must stay alive, under an RSS bound, and serve a normal signed GET afterwards.

Recipes are JSON: a failure is written to fuzz_corpus/ and every run replays the corpus first,
re-signed (a raw capture would only replay as RequestTimeTooSkewed after 15 minutes). Each
corpus file also keeps the raw request that failed, for reading.

SILT_FUZZ_EXAMPLES and SILT_FUZZ_SECONDS bound the search (the defaults keep the module near a
minute); SILT_FUZZ_SEED repeats a run, whose seed is printed.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import random
import re
import socket
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import pytest
from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from tests.integration.gateway.test_auth import STREAMING, chunked_body, signed
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.wait import eventually

CORPUS = Path(__file__).parent / "fuzz_corpus"
BUCKET = "fuzz"
# Short gateway timeouts keep examples that leave a head or body unfinished cheap; an answer
# (or a close) must come within them plus a margin for the request's own work.
HEAD_TIMEOUT_S = 1.0
BODY_IDLE_TIMEOUT_S = 1.0
REPLY_WITHIN_S = max(HEAD_TIMEOUT_S, BODY_IDLE_TIMEOUT_S) + 4.0
RSS_LIMIT_BYTES = 300 * 1024 * 1024
# About 40 s for the search on a 2-core machine, the whole module about a minute.
EXAMPLES = int(os.environ.get("SILT_FUZZ_EXAMPLES", "1000"))
# A bound on the search's time too (for a loaded machine); raise both to search longer.
SECONDS = float(os.environ.get("SILT_FUZZ_SECONDS", "45"))
DEPENDENCY_DOWN_EXAMPLES = max(40, EXAMPLES // 10)
XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
OBJECT = b"0123456789" * 100


# --- the gateway under test --------------------------------------------------------------


@dataclasses.dataclass
class FuzzTarget:
    gw: GatewayStack
    host: str
    port: int

    @property
    def netloc(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        pid = self.gw.stack.pid("gateway")
        assert pid is not None
        return pid

    def fresh_upload(self, key: str = "main/mp") -> tuple[str, str]:
        """A new multipart upload with part 1 uploaded: (upload id, part 1's ETag)."""
        s3 = self.gw.client()
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        etag = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"part")["ETag"]
        return upload, etag.strip('"')


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    s3_overrides = {
        "header_timeout_seconds": HEAD_TIMEOUT_S,
        "body_idle_timeout_seconds": BODY_IDLE_TIMEOUT_S,
        # The recipes sign with SigV2 too: its parsers are fuzzed where it is enabled.
        "sigv2_enabled": True,
    }
    # Readiness (a periodic check) follows a stopped dependency and its return within a second.
    telemetry = {"health_check_interval_seconds": 0.5}
    overrides = {"gateways": {"s3": s3_overrides}, "telemetry": telemetry}
    with gateway_stack(tmp_path_factory.mktemp("fuzz-stack"), overrides=overrides) as gw:
        s3 = gw.client()
        s3.create_bucket(Bucket=BUCKET)
        url = urlsplit(gw.endpoint)
        assert url.hostname is not None and url.port is not None
        yield FuzzTarget(gw, url.hostname, url.port)


@pytest.fixture
def seeded(target: FuzzTarget) -> FuzzTarget:
    """The objects the recipes name exist before each run (an earlier example may have deleted them)."""
    s3 = target.gw.client()
    for key in ("main/obj", "main/dir/a", "main/dir/b"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=OBJECT)
    return target


# --- the exchange --------------------------------------------------------------------------


@dataclasses.dataclass
class Reply:
    data: bytes
    closed: bool  # the server closed the connection
    complete: bool  # a whole first response arrived
    elapsed: float


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})(?: [^\r\n]*)?")


def parse_response(data: bytes, head_request: bool) -> tuple[int, dict[str, str], bytes, bytes] | None:
    """(status, headers, body, rest) of the first response in data; None while incomplete.

    Raises AssertionError when the bytes are not an HTTP/1.1 response."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.split(b"\r\n")
    match = _STATUS_LINE.fullmatch(lines[0])
    assert match, f"not an HTTP status line: {lines[0][:200]!r}"
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        assert colon and name and name == name.strip(), f"malformed response header {line[:200]!r}"
        headers[name.decode("latin-1").lower()] = value.strip().decode("latin-1")
    status = int(match.group(1))
    if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
        return parse_response(rest, head_request)
    if head_request or status in (204, 304):
        return status, headers, b"", rest
    assert "transfer-encoding" not in headers, "the gateway always sends a Content-Length"
    length = headers.get("content-length", "")
    assert length.isascii() and length.isdigit(), f"response without a valid Content-Length: {headers}"
    if len(rest) < int(length):
        return None
    return status, headers, rest[: int(length)], rest[int(length) :]


def exchange(target: FuzzTarget, data: bytes, head_request: bool, split_at: int | None = None) -> Reply:
    """Send data; read until a whole response arrived (and the connection went quiet) or closed."""
    started = time.monotonic()
    deadline = started + REPLY_WITHIN_S
    received = b""
    closed = complete = False
    with socket.create_connection((target.host, target.port), timeout=REPLY_WITHIN_S) as sock:
        try:
            if split_at is not None and 0 < split_at < len(data):
                sock.sendall(data[:split_at])
                time.sleep(0.05)  # the head or body arrives in two reads
                sock.sendall(data[split_at:])
            else:
                sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused early (a head too large): the answer may still be readable
        while (left := deadline - time.monotonic()) > 0:
            # Once a response is whole, only linger briefly for a pipelined one (a body longer
            # than its Content-Length is a second request).
            sock.settimeout(min(left, 0.2) if complete else left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            received += chunk
            complete = complete or parse_response(received, head_request) is not None
    return Reply(received, closed, complete, time.monotonic() - started)


def allowed(status: int, body: bytes, head_request: bool) -> bool:
    """Below 500; 501 and 503 only as the S3 errors that mean them (no body for HEAD)."""
    if status < 500:
        return True
    codes = {501: ("NotImplemented",), 503: ("ServiceUnavailable", "SlowDown")}.get(status)
    if codes is None:
        return False
    if head_request and not body:
        return True
    try:
        return ElementTree.fromstring(body).findtext("Code") in codes
    except ElementTree.ParseError:
        return False


def check_reply(reply: Reply, head_request: bool, dependency_down: bool = False) -> list[int]:
    """Assert the properties every answer must have; the statuses seen."""
    assert reply.complete or reply.closed, f"no answer and no close within {REPLY_WITHIN_S:.1f} s"
    if not reply.data:
        return []
    first = parse_response(reply.data, head_request)
    assert first is not None, f"the connection closed inside a response: {reply.data[:500]!r}"
    status, headers, body, rest = first
    if headers.get("content-type") == "application/json":
        # Silt's health checks (/_silt/health/...), not S3: JSON, 503 while a dependency is down.
        assert status in (200, 404) or (status == 503 and dependency_down), f"{status}: {body[:1000]!r}"
        if body:
            json.loads(body)
        return [status]
    assert allowed(status, body, head_request), f"{status}: {body[:1000]!r}"
    if status >= 300 and body:
        # A refusal is an S3 XML error a client can parse, whatever the request echoed into it.
        assert headers.get("content-type") == "application/xml", headers
        try:
            code = ElementTree.fromstring(body).findtext("Code")
        except ElementTree.ParseError as exc:
            raise AssertionError(f"{status} with a body that is not XML ({exc}): {body[:1000]!r}") from None
        assert code, f"{status} without an S3 error code: {body[:1000]!r}"
    statuses = [status]
    # Pipelined answers to whatever followed (their methods are unknown: status lines only).
    for match in re.finditer(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", rest):
        later = int(match.group(1))
        assert later < 500 or later in (501, 503), f"a pipelined answer {later}: {rest[:1000]!r}"
        statuses.append(later)
    if not dependency_down:
        assert 503 not in statuses, f"503 with every dependency up: {body[:1000]!r}"
    return statuses


def vm_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    state = re.search(r"^State:\s+(\S)", status, re.M)
    assert state is not None and state.group(1) not in ("Z", "X"), "the gateway process died"
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert match is not None, status
    return int(match.group(1)) * 1024


def check_process(target: FuzzTarget) -> int:
    rss = vm_rss(target.pid)
    assert rss < RSS_LIMIT_BYTES, f"gateway RSS {rss / 2**20:.0f} MiB over {RSS_LIMIT_BYTES / 2**20:.0f} MiB"
    return rss


def check_serves_a_normal_get(target: FuzzTarget) -> None:
    s3 = target.gw.client()
    s3.put_object(Bucket=BUCKET, Key="main/health", Body=b"still here")
    assert s3.get_object(Bucket=BUCKET, Key="main/health")["Body"].read() == b"still here"


# --- recipes -> bytes ----------------------------------------------------------------------
# A recipe is plain JSON. Byte strings are latin-1 text (one char per byte), so any byte fits.


@dataclasses.dataclass
class Wire:
    method: bytes
    target: bytes
    version: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    flips: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (position, byte) overwritten

    def render(self) -> bytes:
        lines = [self.method + b" " + self.target + b" " + self.version]
        lines += [name + b": " + value for name, value in self.headers]
        out = bytearray(b"\r\n".join(lines) + b"\r\n\r\n" + self.body)
        for at, byte in self.flips:
            out[at % len(out)] = byte
        return bytes(out)


def _l1(text: str) -> bytes:
    return text.encode("latin-1", "replace") if not text.isascii() else text.encode()


def delete_xml(spec: dict[str, Any]) -> str:
    keys = [*spec["keys"], *(f"main/gen{i}" for i in range(spec["extra"]))]
    objects = "".join(f"<Object><Key>{escape(k)}</Key></Object>" for k in keys)
    ns = f' xmlns="{XMLNS}"' if spec["ns"] else ""
    quiet = "<Quiet>true</Quiet>" if spec["quiet"] else ""
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<Delete{ns}>{quiet}{objects}</Delete>'


def complete_xml(spec: dict[str, Any], etag: str) -> str:
    parts = [(n, e.replace("$ETAG", etag), extra) for n, e, extra in spec["parts"]]
    parts += [(str(i + 2), f"e{i}", "") for i in range(spec["extra"])]
    body = "".join(
        f"<Part><PartNumber>{escape(n)}</PartNumber><ETag>{escape(e)}</ETag>{extra}</Part>" for n, e, extra in parts
    )
    ns = f' xmlns="{XMLNS}"' if spec["ns"] else ""
    return f"<CompleteMultipartUpload{ns}>{body}</CompleteMultipartUpload>"


def mutate_xml(doc: str, mutation: dict[str, Any]) -> bytes:
    kind = mutation["k"]
    raw = doc.encode()
    if kind == "none":
        return raw
    if kind == "truncate":
        return raw[: mutation["at"] % (len(raw) + 1)]
    if kind == "insert":
        at = mutation["at"] % (len(raw) + 1)
        return raw[:at] + _l1(mutation["v"]) + raw[at:]
    if kind == "deep":
        depth = mutation["depth"]
        start = doc.index(">", doc.index("<", doc.index("?>") + 2 if doc.startswith("<?") else 0)) + 1
        return (doc[:start] + "<a>" * depth + "</a>" * depth + doc[start:]).encode()
    if kind == "rename":
        return re.sub(
            r"<(/?)(Delete|CompleteMultipartUpload|Object|Key|Part|PartNumber|ETag)\b",
            lambda m: f"<{m.group(1)}{mutation['v']}",
            doc,
            count=mutation["n"],
        ).encode()
    body = doc.split("?>", 1)[-1]
    if kind == "billion_laughs":
        entities = '<!ENTITY l0 "lol">' + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
        return (
            f"<!DOCTYPE d [{entities}]>".encode()
            + body.replace("</Key>", "&l9;</Key>", 1).replace("</ETag>", "&l9;</ETag>", 1).encode()
        )
    if kind == "external_entity":
        dtd = f'<!DOCTYPE d [<!ENTITY x SYSTEM "{mutation["v"]}">]>'
        return (dtd + body.replace("</Key>", "&x;</Key>", 1).replace("</ETag>", "&x;</ETag>", 1)).encode()
    if kind == "external_dtd":
        return f'<!DOCTYPE d SYSTEM "{mutation["v"]}">'.encode() + body.encode()
    if kind == "utf16":
        return ('<?xml version="1.0" encoding="UTF-16"?>' + body).encode("utf-16")
    if kind == "declared_utf16":
        return ('<?xml version="1.0" encoding="UTF-16"?>' + body).encode()
    if kind == "huge_text":
        return (
            body.replace("</Key>", "k" * mutation["size"] + "</Key>", 1)
            .replace("</ETag>", "e" * mutation["size"] + "</ETag>", 1)
            .encode()
        )
    raise AssertionError(kind)


def semantic_request(
    target: FuzzTarget, recipe: dict[str, Any]
) -> tuple[str, str, list[tuple[str, str]], dict[str, str], bytes]:
    """(method, path, query, headers, body) of the recipe's operation, before signing."""
    op = recipe["op"]
    bucket = recipe["bucket"]
    key = recipe["key"]
    # '%' is kept: a key may name raw escapes (%ff, %00) on purpose.
    path = f"/{bucket}/" + quote(key, safe="/~%")
    query: list[tuple[str, str]] = [(k, v) for k, v in recipe["query"]]
    headers = {k: v for k, v in recipe["headers"]}
    body = b""
    if op in ("put", "upload_part"):
        body = _l1(recipe["body"])
    if op in ("upload_part", "complete", "upload_part_copy", "list_parts", "abort"):
        upload = recipe["upload"]
        if upload == "$FRESH":
            # An upload must exist for the part and XML code to run: one for the recipe's key.
            upload_key = key if re.fullmatch(r"main/[A-Za-z0-9/._ -]{1,200}", key) else "main/mp"
            upload, etag = target.fresh_upload(upload_key)
            path = f"/{bucket}/" + quote(upload_key, safe="/~")
        else:
            etag = "0" * 32
        query.append(("uploadId", upload))
        if op in ("upload_part", "upload_part_copy"):
            query.append(("partNumber", recipe["part"]))
        if op == "complete":
            body = mutate_xml(complete_xml(recipe["xml"], etag), recipe["xml_mutation"])
    if op == "get" and recipe.get("part"):
        query.append(("partNumber", recipe["part"]))
    if op in ("list", "bucket_get", "head_bucket", "create_bucket", "delete_bucket"):
        path = f"/{bucket}"
    if op == "bucket_get" and recipe["sub"]:
        query.append((recipe["sub"], ""))
    if op == "create_bucket":
        body = _l1(recipe["body"])
    if op == "service":
        path = recipe["key"]
    if op == "delete_objects":
        path = f"/{bucket}"
        query.append(("delete", ""))
        body = mutate_xml(delete_xml(recipe["xml"]), recipe["xml_mutation"])
    if op == "create":
        query.append(("uploads", ""))
    if op in ("delete_objects", "complete") and recipe.get("md5") != "none":
        digest = hashlib.md5(body).digest() if recipe.get("md5") == "valid" else b"x" * 16
        headers["Content-MD5"] = base64.b64encode(digest).decode()
    return recipe["method"], path, query, headers, body


def trailer_body(recipe: dict[str, Any]) -> tuple[bytes, str]:
    """An aws-chunked body with unsigned chunks and a checksum trailer, and the trailer's name."""
    chunks = [_l1(c) for c in recipe["chunks"]]
    data = b"".join(chunks)
    name, value = recipe["trailer"]
    if value == "$CORRECT":
        if name == "x-amz-checksum-crc32":
            value = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        else:
            value = base64.b64encode(hashlib.sha256(data).digest()).decode()
    body = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks)
    return body + b"0\r\n" + _l1(f"{name}:{value}") + b"\r\n\r\n", name


def _query_string(query: list[tuple[str, str]]) -> str:
    return "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" if v else quote(k, safe="-_.~") for k, v in query
    )


def build(target: FuzzTarget, recipe: dict[str, Any]) -> Wire:
    """The signed request of a recipe, as bytes on the wire, then its raw mutations."""
    method, path, query, headers, body = semantic_request(target, recipe)
    qs = _query_string(query)
    url_path = path + (f"?{qs}" if qs else "")
    gw = target.gw if recipe["user"] == "admin" else dataclasses.replace(target.gw, admin=target.gw.reader)
    creds = BotoCredentials(gw.admin.access_key_id, gw.admin.secret_access_key.get_secret_value())
    sign = recipe["sign"]
    host = target.netloc
    if recipe.get("style") == "virtual" and path.startswith(f"/{recipe['bucket']}"):
        # Virtual-host style: the bucket is the first label of the Host (domain s3.local).
        host = f"{recipe['bucket']}.s3.local:{target.port}"
        url_path = url_path[len(recipe["bucket"]) + 1 :]
        url_path = url_path if url_path.startswith("/") else "/" + url_path
        gw = dataclasses.replace(gw, endpoint=f"http://{host}")
    if recipe["op"] == "put_trailer":
        body, trailer = trailer_body(recipe)
        headers |= {
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": recipe["decoded_length"] or str(sum(len(_l1(c)) for c in recipe["chunks"])),
            "x-amz-trailer": trailer,
        }
        request = signed(gw, method, url_path, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", b"", **headers)
    elif recipe["op"] == "put_chunked":
        chunks = [_l1(c) for c in recipe["chunks"]]
        headers |= {
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": recipe["decoded_length"] or str(sum(map(len, chunks))),
        }
        request = signed(gw, method, url_path, STREAMING, b"", **headers)
        body = chunked_body(request, creds.secret_key, gw.region, chunks)
    elif sign in ("v4", "v4-unsigned"):
        payload = hashlib.sha256(body).hexdigest() if sign == "v4" else "UNSIGNED-PAYLOAD"
        request = signed(gw, method, url_path, payload, body, **headers)
    else:
        # Without the body: neither scheme signs it, and botocore's presigner would parse it as a form.
        request = AWSRequest(method=method, url=f"{gw.endpoint}{url_path}", headers=headers)
        if sign == "v2":
            HmacV1Auth(creds).add_auth(request)
        elif sign == "v2-presigned":
            HmacV1QueryAuth(creds, expires=300).add_auth(request)
        elif sign == "v4-presigned":
            S3SigV4QueryAuth(creds, "s3", gw.region, expires=300).add_auth(request)
    url = urlsplit(request.url)
    wire_target = url.path + (f"?{url.query}" if url.query else "")
    wire_headers = [(b"Host", _l1(host)), (b"Connection", b"close")]
    wire_headers += [(_l1(k), _l1(v)) for k, v in request.headers.items() if k.lower() != "host"]
    if body or method in ("PUT", "POST"):
        wire_headers.append((b"Content-Length", str(len(body)).encode()))
    wire = Wire(_l1(method), _l1(wire_target), b"HTTP/1.1", wire_headers, body)
    for mutation in recipe["mutations"]:
        apply_mutation(wire, mutation)
    return wire


def _header_index(wire: Wire, name: str) -> int | None:
    lowered = _l1(name).lower()
    return next((i for i, (n, _) in enumerate(wire.headers) if n.lower() == lowered), None)


# Bounded repeats: a megabyte body of hex letters must not take quadratic time to search.
_CHUNK_LINE = re.compile(rb"([0-9a-fA-F]{1,16})(;chunk-signature=)([0-9a-f]{0,64})\r\n")


def apply_mutation(wire: Wire, m: dict[str, Any]) -> None:
    kind = m["k"]
    value = _l1(m.get("v", ""))
    if kind == "method":
        wire.method = value
    elif kind == "version":
        wire.version = value
    elif kind == "target":
        at = m["at"] % (len(wire.target) + 1)
        wire.target = {
            "insert": wire.target[:at] + value + wire.target[at:],
            "replace": wire.target[:at] + value + wire.target[at + len(value) :],
            "truncate": wire.target[:at],
            "append": wire.target + value,
        }[m["op"]]
    elif kind == "set_header":
        i = _header_index(wire, m["name"])
        if i is None:
            wire.headers.append((_l1(m["name"]), value))
        else:
            wire.headers[i] = (wire.headers[i][0], value)
    elif kind == "add_header":
        wire.headers.insert(m["at"] % (len(wire.headers) + 1), (_l1(m["name"]), value))
    elif kind == "drop_header":
        i = _header_index(wire, m["name"])
        if i is not None:
            del wire.headers[i]
    elif kind == "huge_header":
        wire.headers.append((_l1(m["name"]), b"a" * m["size"]))
    elif kind == "many_headers":
        wire.headers += [(f"x-amz-meta-h{i}".encode(), b"v" * m["size"]) for i in range(m["n"])]
    elif kind == "auth_field":
        _mutate_auth(wire, m["field"], value)
    elif kind == "body":
        at = m["at"] % (len(wire.body) + 1)
        wire.body = {
            "truncate": wire.body[:at],
            "insert": wire.body[:at] + value + wire.body[at:],
            "append": wire.body + value,
            "replace": wire.body[:at] + value + wire.body[at + len(value) :],
        }[m["op"]]
    elif kind == "chunk":
        _mutate_chunks(wire, m["op"], m["at"], value)
    elif kind == "http_chunked":
        # The same body in HTTP/1.1 chunked transfer coding instead of a Content-Length.
        i = _header_index(wire, "Content-Length")
        if i is not None:
            del wire.headers[i]
        wire.headers.append((b"Transfer-Encoding", b"chunked"))
        size = max(1, m["at"])
        pieces = [wire.body[j : j + size] for j in range(0, len(wire.body), size)]
        wire.body = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    elif kind == "byte":
        wire.flips.append((m["at"], m["byte"]))
    elif kind == "bare_lf":
        # Only in the head: the body's bytes are the object's.
        for i, (name, header_value) in enumerate(wire.headers):
            if i % 2 == m["at"] % 2:
                wire.headers[i] = (name, header_value + b"\n" + _l1(m["v"]))
    else:
        raise AssertionError(kind)


def _mutate_auth(wire: Wire, field: str, value: bytes) -> None:
    i = _header_index(wire, "Authorization")
    if i is None:  # presigned: the fields are query parameters
        names = {
            "Credential": b"X-Amz-Credential",
            "Signature": b"X-Amz-Signature",
            "SignedHeaders": b"X-Amz-SignedHeaders",
            "Algorithm": b"X-Amz-Algorithm",
            "Date": b"X-Amz-Date",
            "Expires": b"X-Amz-Expires",
        }
        name = names.get(field, field.encode())
        pattern = re.escape(name) + rb"=[^&]*"
        if re.search(pattern, wire.target):
            wire.target = re.sub(pattern, lambda _: name + b"=" + value, wire.target, count=1)
        else:
            wire.target += (b"&" if b"?" in wire.target else b"?") + name + b"=" + value
        return
    name, header = wire.headers[i]
    if header.startswith(b"AWS "):  # SigV2: AWS <key>:<signature>
        key, _, signature = header[4:].rpartition(b":")
        header = (
            b"AWS " + (value if field == "Credential" else key) + b":" + (value if field == "Signature" else signature)
        )
    elif field == "Algorithm":
        header = value + header[len(b"AWS4-HMAC-SHA256") :]
    else:
        pattern = re.escape(field.encode()) + rb"=[^,]*"
        header = re.sub(pattern, lambda _: field.encode() + b"=" + value, header, count=1)
    wire.headers[i] = (name, header)


def _mutate_chunks(wire: Wire, op: str, at: int, value: bytes) -> None:
    lines = list(_CHUNK_LINE.finditer(wire.body))
    if not lines:
        return
    line = lines[at % len(lines)]
    start = line.start()
    if op == "size":
        wire.body = wire.body[:start] + value + wire.body[line.start(2) :]
    elif op == "signature":
        wire.body = wire.body[: line.start(3)] + value + wire.body[line.end(3) :]
    elif op == "extension":
        wire.body = wire.body[: line.start(2)] + b";" + value + wire.body[line.start(2) :]
    elif op == "drop_last":
        wire.body = wire.body[: lines[-1].start()]
    elif op == "trailer":
        wire.body = wire.body[:-2] + value + b"\r\n\r\n" if wire.body.endswith(b"\r\n") else wire.body + value
    elif op == "no_crlf":
        data_end = lines[at % len(lines) + 1].start() if at % len(lines) + 1 < len(lines) else len(wire.body)
        wire.body = wire.body[: data_end - 2] + value + wire.body[data_end:]
    else:
        raise AssertionError(op)


# --- strategies ----------------------------------------------------------------------------

# Text that once broke parsers somewhere: numbers Python's int() and isdigit() disagree on,
# escapes, control characters, huge digit strings.
TRICKY = [
    "",
    " ",
    "0",
    "00",
    "-1",
    "+1",
    "1 ",
    " 1",
    "1e3",
    "0x10",
    "1_0",
    "²",
    "¹²",
    "٣",
    "\u0661\u0660",
    "①",
    "½",
    "9" * 19,
    "9" * 5000,
    "4294967296",
    "18446744073709551616",
    "%",
    "%ff",
    "%00",
    "%2F",
    "%%",
    "%g1",
    "\x00",
    "\x01",
    "\x7f",
    "\t",
    "é",
    "\xff",
    "\xa0",
    "\x85",
    "\u2028",
    "é" * 3000,
    "true",
    "false",
    "null",
    "..",
    "../..",
    "/",
    "main/",
    "*",
    "\\",
    "'",
    '"',
    "<",
    "&",
    ";",
    "bytes=",
    "bytes=-",
    "bytes=0-",
    "bytes=1-0",
    "bytes=0-0,1-1",
    "bytes=²-³",
    "bytes=٣-",
]
tricky = st.sampled_from(TRICKY)
latin1 = st.text(st.characters(max_codepoint=255), max_size=30)
printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
text = st.one_of(tricky, latin1, printable, st.text(max_size=10))
header_text = st.one_of(tricky, latin1, printable).map(lambda s: s.encode("latin-1", "replace").decode("latin-1"))
digits = st.one_of(st.integers(-3, 10_005).map(str), tricky)

KEYS = [
    "main/obj",
    "main/dir/a",
    "main/new",
    "main/",
    "main",
    "nobranch/k",
    "main/é",
    "main/a b",
    "main/%ff",
    "main/%00",
    "main/..%2F..",
    "main/" + "k" * 1100,
    "main/\x01",
    "main/%C3%28",
    "main/dir/",
    "main//x",
]
keys = st.one_of(st.sampled_from(KEYS), text.map(lambda t: "main/" + t), text)
buckets = st.one_of(st.just(BUCKET), st.sampled_from(["nosuch", "FUZZ", "a", "fuzz-", "xn--fuzz", "f" * 64, "fuzz%2e"]))

HEADER_NAMES = [
    "Content-Length",
    "Transfer-Encoding",
    "Host",
    "Authorization",
    "X-Amz-Date",
    "X-Amz-Content-SHA256",
    "Content-MD5",
    "Content-Type",
    "Range",
    "x-amz-copy-source",
    "x-amz-copy-source-range",
    "x-amz-decoded-content-length",
    "Content-Encoding",
    "Expect",
    "Connection",
    "If-Match",
    "If-None-Match",
    "If-Modified-Since",
    "If-Unmodified-Since",
    "x-amz-meta-m",
    "x-amz-checksum-crc32",
    "x-amz-checksum-sha256",
    "x-amz-checksum-crc64nvme",
    "x-amz-sdk-checksum-algorithm",
    "x-amz-checksum-algorithm",
    "x-amz-trailer",
    "x-amz-metadata-directive",
    "Date",
    "Upgrade",
    "x-amz-copy-source-if-match",
    "x-amz-copy-source-if-modified-since",
    "x-amz-copy-source-if-none-match",
    "Cache-Control",
    "Expires",
]
header_names = st.one_of(st.sampled_from(HEADER_NAMES), latin1.filter(bool), st.just("x-amz-meta-é"))
HEADER_VALUES = {
    "Range": ["bytes=0-9", "bytes=5-", "bytes=-3", "bytes=0-" + "9" * 30, "bytes=99999-", "bytes=2-1"],
    "x-amz-copy-source": [
        f"/{BUCKET}/main/obj",
        f"{BUCKET}/main/obj",
        f"/{BUCKET}/main/%ff",
        "/nosuch/main/obj",
        f"/{BUCKET}/main/obj?versionId=1",
        f"/{BUCKET}/nobranch/obj",
        f"/{BUCKET}/main/",
    ],
    "x-amz-copy-source-range": ["bytes=0-9", "bytes=0-" + "9" * 5000, "bytes=5-1", "bytes=٣-٤", "bytes=²-³"],
    "x-amz-decoded-content-length": ["3", "²", "-1", "9" * 5000, "٣"],
    "Content-MD5": ["1B2M2Y8AsgTpgAmY7PhCfg==", "not base64", "AAAA", ""],
    "x-amz-checksum-crc32": ["AAAAAA==", "!!", ""],
    "x-amz-sdk-checksum-algorithm": ["CRC32", "SHA256", "CRC64NVME", "MD5", "crc32c", ""],
    "x-amz-checksum-algorithm": ["CRC32", "SHA1", "bogus"],
    "x-amz-metadata-directive": ["COPY", "REPLACE", "replace", "MOVE"],
    "Expect": ["100-continue", "100-Continue", "200-ok"],
    "Transfer-Encoding": ["chunked", "gzip, chunked", "identity", "chunked, chunked"],
    "If-Modified-Since": ["Sun, 22 Nov 2026 10:00:00 GMT", "Sun, 4294967296 Nov 2026 1:00:00 GMT", "yesterday"],
    "x-amz-copy-source-if-modified-since": ["Sun, 22 Nov 2026 10:00:00 GMT", "Sun, 99 Nov 99999999999 0:0:0 GMT"],
}


@st.composite
def semantic_headers(draw: st.DrawFn) -> list[list[str]]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.one_of(st.sampled_from(sorted(HEADER_VALUES)), st.sampled_from(HEADER_NAMES)))
        known = HEADER_VALUES.get(name, [])
        value = draw(st.one_of(st.sampled_from(known), header_text) if known else header_text)
        out.append([name, value])
    return out


LIST_PARAMS = [
    "prefix",
    "delimiter",
    "max-keys",
    "continuation-token",
    "start-after",
    "encoding-type",
    "fetch-owner",
    "marker",
    "list-type",
    "uploads",
    "key-marker",
    "max-uploads",
    "versions",
    "acl",
]
query_pairs = st.lists(
    st.tuples(st.one_of(st.sampled_from(LIST_PARAMS), text), st.one_of(text, digits)).map(list), max_size=4
)

delete_specs = st.fixed_dictionaries(
    {
        "keys": st.lists(keys, max_size=4),
        "extra": st.one_of(st.just(0), st.integers(0, 1005)),
        "ns": st.booleans(),
        "quiet": st.booleans(),
    }
)
complete_specs = st.fixed_dictionaries(
    {
        "parts": st.lists(
            st.tuples(
                st.one_of(st.just("1"), digits),
                st.one_of(st.just("$ETAG"), st.just('"$ETAG"'), text),
                st.sampled_from(
                    [
                        "",
                        "<ChecksumCRC32>AAAAAA==</ChecksumCRC32>",
                        "<ChecksumType>X</ChecksumType>",
                        "<Checksum>1</Checksum>",
                        "<PartNumber>2</PartNumber>",
                    ]
                ),
            ).map(list),
            min_size=0,
            max_size=4,
        ),
        "extra": st.one_of(st.just(0), st.integers(0, 10_001)),
        "ns": st.booleans(),
    }
)
xml_mutations = st.one_of(
    st.just({"k": "none"}),
    st.fixed_dictionaries({"k": st.just("truncate"), "at": st.integers(0, 10_000)}),
    st.fixed_dictionaries({"k": st.just("insert"), "at": st.integers(0, 10_000), "v": text}),
    st.fixed_dictionaries({"k": st.just("deep"), "depth": st.sampled_from([100, 5_000, 200_000])}),
    st.fixed_dictionaries(
        {"k": st.just("rename"), "v": st.sampled_from(["x", "Delete", "Part", "a:b", "Object"]), "n": st.integers(1, 3)}
    ),
    st.just({"k": "billion_laughs"}),
    st.fixed_dictionaries(
        {
            "k": st.just("external_entity"),
            "v": st.sampled_from(["file:///etc/passwd", "http://127.0.0.1:1/x", "/dev/zero"]),
        }
    ),
    st.fixed_dictionaries(
        {"k": st.just("external_dtd"), "v": st.sampled_from(["file:///dev/zero", "http://127.0.0.1:1/d"])}
    ),
    st.just({"k": "utf16"}),
    st.just({"k": "declared_utf16"}),
    st.fixed_dictionaries({"k": st.just("huge_text"), "size": st.sampled_from([2_000, 1_100_000, 4_300_000])}),
)

OPS = {
    "put": "PUT",
    "put_chunked": "PUT",
    "get": "GET",
    "head": "HEAD",
    "list": "GET",
    "delete_objects": "POST",
    "create": "POST",
    "upload_part": "PUT",
    "complete": "POST",
    "copy": "PUT",
    "upload_part_copy": "PUT",
    "list_parts": "GET",
    "abort": "DELETE",
    "delete": "DELETE",
    "put_trailer": "PUT",
    "bucket_get": "GET",
    "head_bucket": "HEAD",
    "create_bucket": "PUT",
    "delete_bucket": "DELETE",
    "service": "GET",
}


@st.composite
def operations(draw: st.DrawFn) -> dict[str, Any]:
    """A valid request of one operation with drawn semantic parts, signed after drawing."""
    op = draw(st.sampled_from(sorted(OPS)))
    recipe: dict[str, Any] = {
        "op": op,
        "method": OPS[op],
        "bucket": draw(st.one_of(st.just(BUCKET), st.just(BUCKET), buckets)),
        "key": draw(st.one_of(st.just("main/obj"), keys)),
        "query": [],
        "headers": draw(semantic_headers()),
        "style": draw(st.sampled_from(["path", "path", "path", "virtual"])),
        "sign": "v4"
        if op in ("put_chunked", "put_trailer")
        else draw(st.sampled_from(["v4", "v4", "v4-unsigned", "v4-presigned", "v2", "v2-presigned"])),
        "user": draw(st.sampled_from(["admin", "admin", "admin", "reader"])),
    }
    if op in ("put", "upload_part"):
        recipe["body"] = draw(st.one_of(st.binary(max_size=300), st.sampled_from([b"", b"x" * 70_000]))).decode(
            "latin-1"
        )
    if op == "put_trailer":
        recipe["trailer"] = [
            draw(st.sampled_from(["x-amz-checksum-crc32", "x-amz-checksum-sha256", "x-amz-checksum-crc64nvme", "x"])),
            draw(st.one_of(st.just("$CORRECT"), st.just("$CORRECT"), header_text)),
        ]
    if op in ("put_chunked", "put_trailer"):
        recipe["chunks"] = [
            c.decode("latin-1") for c in draw(st.lists(st.binary(min_size=1, max_size=200), max_size=3))
        ]
        recipe["decoded_length"] = draw(st.one_of(st.just(""), digits))
    if op in ("upload_part", "complete", "upload_part_copy", "list_parts", "abort"):
        recipe["upload"] = draw(st.one_of(st.just("$FRESH"), st.just("$FRESH"), text, st.just("0" * 32)))
        recipe["part"] = draw(st.one_of(st.just("1"), digits))
    if op == "get":
        recipe["part"] = draw(st.one_of(st.just(""), st.just(""), digits))
        recipe["query"] = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["response-content-type", "response-expires", "response-cache-control"]), text
                ).map(list),
                max_size=2,
            )
        )
        if draw(st.booleans()):
            recipe["headers"].append(
                [
                    "Range",
                    draw(st.one_of(st.sampled_from(HEADER_VALUES["Range"]), text.map(lambda t: "bytes=" + t), text)),
                ]
            )
    if op == "list":
        recipe["query"] = [["list-type", "2"], *draw(query_pairs)]
    if op in ("copy", "upload_part_copy"):
        recipe["headers"].append(
            ["x-amz-copy-source", draw(st.one_of(st.sampled_from(HEADER_VALUES["x-amz-copy-source"]), text))]
        )
    if op == "delete_objects":
        recipe["xml"] = draw(delete_specs)
    if op == "complete":
        recipe["xml"] = draw(complete_specs)
    if op in ("delete_objects", "complete"):
        recipe["xml_mutation"] = draw(xml_mutations)
        recipe["md5"] = draw(st.sampled_from(["valid", "valid", "wrong", "none"]))
    if op == "bucket_get":
        recipe["sub"] = draw(st.sampled_from(["", "location", "versioning", "uploads", "acl", "policy", "tagging"]))
        recipe["query"] = draw(query_pairs)
    if op == "create_bucket":
        recipe["bucket"] = draw(st.one_of(buckets, st.from_regex(r"\Az[a-z0-9-]{2,8}\Z")))
        configuration = (
            "<CreateBucketConfiguration><LocationConstraint>x</LocationConstraint></CreateBucketConfiguration>"
        )
        recipe["body"] = draw(st.sampled_from(["", configuration, "<x", "a" * 5_000_000]))
    if op == "delete_bucket":
        recipe["bucket"] = draw(st.sampled_from(["nosuch", "zfuzz", "fuzz-", "a"]))
    if op == "service":
        recipe["key"] = draw(
            st.one_of(st.sampled_from(["/", "/_silt/health/live", "/_silt/health/ready", "/_silt/health", "//"]), text)
        )
        recipe["key"] = recipe["key"] if recipe["key"].startswith("/") else "/" + quote(recipe["key"], safe="/%")
    if op == "create":
        recipe["headers"].append(
            ["x-amz-checksum-algorithm", draw(st.sampled_from(["CRC32", "CRC32C", "SHA256", "X"]))]
        )
    return recipe


raw_mutation = st.one_of(
    st.fixed_dictionaries(
        {
            "k": st.just("method"),
            "v": st.sampled_from(
                ["GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "get", "G\x00T", "", "PROPFIND"]
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("version"),
            "v": st.sampled_from(
                ["HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1.1x", "", "HTTP/1.1 extra", "http/1.1", "HTTP/1"]
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("target"),
            "op": st.sampled_from(["insert", "replace", "truncate", "append"]),
            "at": st.integers(0, 300),
            "v": st.one_of(
                text,
                st.sampled_from(
                    [
                        "%ff",
                        "%",
                        "%00",
                        "?",
                        "#",
                        "//",
                        "/../",
                        " ",
                        "?uploads",
                        "?delete",
                        "&x-id=PutObject",
                        "?acl",
                        "x" * 9000,
                    ]
                ),
            ),
        }
    ),
    st.fixed_dictionaries({"k": st.just("set_header"), "name": header_names, "v": header_text}),
    st.fixed_dictionaries(
        {"k": st.just("add_header"), "name": header_names, "v": header_text, "at": st.integers(0, 20)}
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("drop_header"),
            "name": st.sampled_from(
                [
                    "Host",
                    "Authorization",
                    "X-Amz-Date",
                    "X-Amz-Content-SHA256",
                    "Content-Length",
                    "Date",
                    "Connection",
                    "Content-MD5",
                    "x-amz-decoded-content-length",
                    "content-encoding",
                ]
            ),
        }
    ),
    st.fixed_dictionaries(
        {"k": st.just("huge_header"), "name": header_names, "size": st.sampled_from([8_000, 8_200, 70_000, 1_100_000])}
    ),
    st.fixed_dictionaries({"k": st.just("many_headers"), "n": st.integers(1, 300), "size": st.sampled_from([1, 250])}),
    st.fixed_dictionaries(
        {
            "k": st.just("auth_field"),
            "field": st.sampled_from(["Credential", "SignedHeaders", "Signature", "Algorithm", "Date", "Expires"]),
            "v": st.one_of(
                text,
                st.sampled_from(
                    [
                        "AKIA/20261122/us-east-1/s3/aws4_request",
                        "/",
                        "////",
                        "host;x-amz-date;range",
                        "host;;",
                        "",
                        "0" * 64,
                        "é" * 64,
                        "\xff" * 64,
                        "99999999999999999999",
                        "-1",
                        "604801",
                    ]
                ),
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("body"),
            "op": st.sampled_from(["truncate", "insert", "append", "replace"]),
            "at": st.integers(0, 100_000),
            "v": text,
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("chunk"),
            "op": st.sampled_from(["size", "signature", "extension", "drop_last", "trailer", "no_crlf"]),
            "at": st.integers(0, 5),
            "v": st.one_of(
                text,
                st.sampled_from(
                    [
                        "+3",
                        "0x3",
                        "ffffffffffffffff",
                        "fffffffffffffffff",
                        "-1",
                        "0",
                        "x-amz-checksum-crc32:AAAAAA==",
                        "x-amz-trailer-signature:" + "0" * 64,
                        "a" * 2000,
                        "\r\n",
                    ]
                ),
            ),
        }
    ),
    st.fixed_dictionaries({"k": st.just("bare_lf"), "at": st.integers(0, 1), "v": printable}),
    st.fixed_dictionaries(
        {"k": st.just("byte"), "at": st.integers(0, 2000), "byte": st.sampled_from([0, 10, 13, 32, 37, 58, 127, 255])}
    ),
    st.fixed_dictionaries({"k": st.just("http_chunked"), "at": st.sampled_from([1, 7, 100, 65536])}),
)


@st.composite
def recipes(draw: st.DrawFn, intact: int = 1) -> dict[str, Any]:
    """intact: weight of requests without raw mutations against 1 for mutated ones (1: about a
    third stay intact, so that the semantic parts alone reach the operations)."""
    recipe = draw(operations())
    mutated = st.lists(raw_mutation, min_size=1, max_size=3)
    recipe["mutations"] = draw(st.one_of(*[st.just([])] * intact, mutated))
    recipe["split_at"] = draw(st.one_of(st.none(), st.integers(1, 400)))
    return recipe


# --- running one recipe --------------------------------------------------------------------


def say(text: str) -> None:
    """Shown with a failing example (hypothesis' note), or printed in a corpus replay."""
    if currently_in_test_context():
        note(text)
    else:
        print(text)


def run_recipe(target: FuzzTarget, recipe: dict[str, Any], dependency_down: bool = False) -> list[int]:
    """Send the recipe's request and check the answer and the process; the statuses answered."""
    wire = build(target, recipe)
    data = wire.render()
    say(f"request ({len(data)} bytes): {data[:2000]!r}")
    reply = exchange(target, data, head_request=wire.method == b"HEAD", split_at=recipe.get("split_at"))
    say(f"reply after {reply.elapsed:.2f} s: {reply.data[:2000]!r}")
    try:
        statuses = check_reply(reply, head_request=wire.method == b"HEAD", dependency_down=dependency_down)
        check_process(target)
    except AssertionError as exc:
        _FAILURES.append((recipe, data, str(exc).splitlines()[0][:300]))
        raise
    return statuses


# (recipe, bytes sent, what was wrong) of each failing example of the current search.
_FAILURES: list[tuple[dict[str, Any], bytes, str]] = []


def save_to_corpus(recipe: dict[str, Any], data: bytes, failure: str) -> Path:
    CORPUS.mkdir(exist_ok=True)
    text = json.dumps(recipe, sort_keys=True, ensure_ascii=True)
    path = CORPUS / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    raw = data[:4096].decode("latin-1") + ("…" if len(data) > 4096 else "")
    # "cause" is for whoever fixes it: what was wrong, and where it was fixed.
    saved = {"cause": "", "failure": failure, "found": time.strftime("%Y-%m-%d"), "recipe": recipe, "raw": raw}
    path.write_text(json.dumps(saved, indent=1, ensure_ascii=True) + "\n")
    return path


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.json")) if CORPUS.is_dir() else []


def gateway_ready(target: FuzzTarget) -> bool:
    try:
        with urllib.request.urlopen(f"{target.gw.endpoint}/_silt/health/ready", timeout=5) as reply:
            return bool(reply.status == 200)
    except urllib.error.HTTPError:
        return False


@contextlib.contextmanager
def stopped(target: FuzzTarget, service: str | None) -> Iterator[None]:
    """service (graveler or auth) down for the block; None: nothing stopped."""
    if service is None:
        yield
        return
    stack = target.gw.stack
    stack.kill(service)
    try:
        yield
    finally:
        # The fixture's stack runs without the launcher's monitor (restart=False): start it by hand.
        stack._spawn(stack._services[service])
        stack.wait_ready(service)
        # The gateway redials with a backoff of up to a second: it serves again soon after.
        deadline = time.monotonic() + 10
        while True:
            try:
                check_serves_a_normal_get(target)
                break
            except ClientError:
                assert time.monotonic() < deadline, f"the gateway did not recover within 10 s of {service}"
                time.sleep(0.2)
        # Readiness comes from a periodic check: wait for it too, so that a later example
        # asking /_silt/health/ready with everything up gets 200.
        eventually(lambda: gateway_ready(target), 10, f"readiness after {service} came back")


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.stem)
def test_corpus_replays(seeded: FuzzTarget, path: Path) -> None:
    """Every request that once failed, first: re-signed now, it must meet every property."""
    recipe = json.loads(path.read_text())["recipe"]
    with stopped(seeded, recipe.get("down")):
        run_recipe(seeded, recipe, dependency_down=bool(recipe.get("down")))
    check_serves_a_normal_get(seeded)


def _fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=False,
        print_blob=True,
        database=None,  # the corpus is the memory of failures, in the repository
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


ROUND = 200  # examples per hypothesis run: the time budget is checked between runs


def search(target: FuzzTarget, examples: int, seconds: float, down: str | None = None) -> dict[int, int]:
    """Run hypothesis searches of ROUND examples until `examples` were sent or `seconds`
    passed; how often each status was answered first. A failure's shrunk recipe goes into
    the corpus."""
    run_seed = int(os.environ.get("SILT_FUZZ_SEED") or random.SystemRandom().getrandbits(64))
    print(f"fuzz seed: SILT_FUZZ_SEED={run_seed} ({examples} examples{f', {down} down' if down else ''})")
    statuses: dict[int, int] = {}
    stop_at = time.monotonic() + seconds

    def fuzz(recipe: dict[str, Any]) -> None:
        if down is not None:
            recipe["down"] = down
            if recipe.get("upload") == "$FRESH":  # creating one needs the stopped services
                recipe["upload"] = "0" * 32
        note(f"recipe: {json.dumps(recipe)[:4000]}")
        for status in run_recipe(target, recipe, dependency_down=down is not None)[:1]:
            statuses[status] = statuses.get(status, 0) + 1

    done = 0
    for round_seed in itertools.count(run_seed):
        if done >= examples or time.monotonic() > stop_at:
            break
        size = min(ROUND, examples - done)
        # With a service down, mostly well-formed requests: they are the ones that need it.
        run = seed(round_seed)(_fuzz_settings(size)(given(recipe=recipes(intact=1 if down is None else 4))(fuzz)))
        _FAILURES.clear()
        try:
            run()
        except BaseException:
            if _FAILURES:
                # Hypothesis replays the shrunk example last: that one goes into the corpus.
                print(f"kept in the corpus: {save_to_corpus(*_FAILURES[-1])} (seed {run_seed})")
            raise
        done += size
    return statuses


def test_fuzz_the_gateway(seeded: FuzzTarget) -> None:
    rss_before = check_process(seeded)
    started = time.monotonic()
    statuses = search(seeded, EXAMPLES, SECONDS)
    rss_after = check_process(seeded)
    print(
        f"{sum(statuses.values())} examples in {time.monotonic() - started:.0f} s; "
        f"statuses {sorted(statuses.items())}; "
        f"gateway RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB"
    )
    # The search reached the operations, not only the refusals of malformed requests.
    assert any(200 <= status < 300 for status in statuses), statuses
    check_serves_a_normal_get(seeded)


@pytest.mark.parametrize("service", ["graveler", "auth"])
def test_fuzz_with_a_dependency_down(seeded: FuzzTarget, service: str) -> None:
    """With graveler or auth stopped, valid and mutated requests get 4xx or 503 S3 errors, in time."""
    with stopped(seeded, service):
        statuses = search(seeded, DEPENDENCY_DOWN_EXAMPLES, SECONDS / 4, down=service)
        ready = {
            "op": "service",
            "method": "GET",
            "bucket": BUCKET,
            "key": "/_silt/health/ready",
            "query": [],
            "headers": [],
            "style": "path",
            "sign": "v4",
            "user": "admin",
            "mutations": [],
            "down": service,
        }
        eventually(lambda: run_recipe(seeded, ready, dependency_down=True) == [503], 10, f"not ready without {service}")
    print(f"{service} down: statuses {sorted(statuses.items())}")
    # The outage was seen: some requests needed the stopped service.
    assert 503 in statuses, statuses
    check_serves_a_normal_get(seeded)
