"""The gateway under fuzzing, one raw exchange with it, and the properties every answer and
the process must keep."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import time
from pathlib import Path
from xml.etree import ElementTree

from tests.support.gateway_stack import GatewayStack

BUCKET = "fuzz"
# Short gateway timeouts keep examples that leave a head or body unfinished cheap; an answer
# (or a close) must come within them plus a margin for the request's own work.
HEAD_TIMEOUT_S = 1.0
BODY_IDLE_TIMEOUT_S = 1.0
REPLY_WITHIN_S = max(HEAD_TIMEOUT_S, BODY_IDLE_TIMEOUT_S) + 4.0
RSS_LIMIT_BYTES = 300 * 1024 * 1024
XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
OBJECT = b"0123456789" * 100


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
