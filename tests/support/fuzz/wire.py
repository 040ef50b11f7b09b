"""Recipes (plain JSON) rendered to the bytes sent: signed S3 requests, then raw mutations."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
import zlib
from typing import Any
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import escape

from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from tests.e2e.gateway.test_auth import STREAMING, chunked_body, signed
from tests.support.fuzz.target import XMLNS, FuzzTarget

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
