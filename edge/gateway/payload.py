"""Request bodies as the operations read them: decoded from aws-chunked, with every check S3 makes.

Each source offers ``async read(n)``; checks that need the whole body (payload SHA-256, the last
chunk signature) fail on the read that reaches its end, before any operation commits to the data.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from typing import Protocol

from edge.gateway.errors import S3Error
from edge.gateway.request import Body

# A chunk header is "<hex size>;chunk-signature=<64 hex>": about 90 bytes. 16 hex digits
# cover any size; anything longer is not a chunk header.
_CHUNK_SIZE = re.compile(r"[0-9a-fA-F]{1,16}")
_CHUNK_HEADER_LIMIT = 1024


class Source(Protocol):
    async def read(self, n: int) -> bytes: ...


class DeclaredLength:
    """A body of a declared length that must not end before it: IncompleteBody, raised where the
    early end is read, so that no check reading past it (payload SHA-256, a checksum) takes the
    cut body for the whole one and answers a digest mismatch instead."""

    def __init__(self, inner: Source, declared: int) -> None:
        self._inner = inner
        self._left = declared

    async def read(self, n: int) -> bytes:
        data = await self._inner.read(n)
        self._left -= len(data)
        if not data and n > 0 and self._left > 0:
            raise S3Error("IncompleteBody")
        return data


class Sha256Checked:
    """A body whose SHA-256 was signed: compared when the body ends."""

    def __init__(self, inner: Source, expected: str) -> None:
        self._inner = inner
        self._expected = expected.lower()
        self._hash = hashlib.sha256()

    async def read(self, n: int) -> bytes:
        data = await self._inner.read(n)
        if data:
            self._hash.update(data)
        elif self._hash.hexdigest() != self._expected:
            raise S3Error("XAmzContentSHA256Mismatch")
        return data


class AwsChunked:
    """Decodes ``Content-Encoding: aws-chunked``: ``<hex size>[;chunk-signature=<sig>]\\r\\n<data>\\r\\n``...

    With `sign` set, every chunk must carry the signature of its bytes chained from the
    previous one (the seed is the request's own signature). Trailers after the last chunk
    (``name:value`` lines) are kept in `trailers`; with `sign_trailer` set they must end with
    an ``x-amz-trailer-signature`` line signing them, chained from the last chunk's signature.
    """

    def __init__(
        self,
        body: Body,
        sign: Callable[[str, str], str] | None,
        seed: str,
        decoded_length: int | None,
        sign_trailer: Callable[[str, str], str] | None = None,
    ):
        self._body = body
        self._sign = sign
        self._sign_trailer = sign_trailer
        self.trailers: dict[str, str] = {}
        self._previous = seed
        self._left = 0  # bytes left in the current chunk
        self._chunk_hash: hashlib._Hash | None = None
        self._chunk_signature = ""
        self._done = False
        self._expected = decoded_length
        self._total = 0

    async def _next_chunk(self) -> None:
        # Only the line end is stripped: a chunk header has no surrounding white space.
        line = (await self._body.readline(limit=_CHUNK_HEADER_LIMIT)).removesuffix(b"\r\n")
        if not line:
            raise S3Error("IncompleteBody", "the aws-chunked body ended early")
        size_text, _, extension = line.decode("latin-1").partition(";")
        # Strictly hex digits: int(x, 16) alone also takes "+3e8", " 3e8", "0x3e8" and "3_e8".
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise S3Error("InvalidRequest", "malformed aws-chunked body: the chunk size is not a hex number")
        size = int(size_text, 16)
        signature = extension.partition("chunk-signature=")[2]
        if self._sign is not None and not signature:
            raise S3Error("SignatureDoesNotMatch", "an aws-chunked chunk carries no signature")
        self._chunk_signature = signature
        self._chunk_hash = hashlib.sha256() if self._sign is not None else None
        self._left = size
        if size == 0:
            self._finish_chunk()
            self._done = True
            await self._read_trailers()
            if self._expected is not None and self._total != self._expected:
                raise S3Error("IncompleteBody")

    async def _read_trailers(self) -> None:
        signature: str | None = None
        canonical = ""
        while line := (await self._body.readline()).strip():  # trailers, then the final CRLF
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise S3Error("InvalidRequest", "malformed aws-chunked body: a trailer is not name:value")
            name, value = name.strip().lower(), value.strip()
            if name == "x-amz-trailer-signature":
                signature = value
                continue
            self.trailers[name] = value
            canonical += f"{name}:{value}\n"
        if self._sign_trailer is None:
            return
        if signature is None:
            raise S3Error("SignatureDoesNotMatch", "the aws-chunked trailers carry no x-amz-trailer-signature")
        expected = self._sign_trailer(self._previous, hashlib.sha256(canonical.encode()).hexdigest())
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogatepass")):
            raise S3Error("SignatureDoesNotMatch", "the trailer signature of the aws-chunked body does not match")

    def _finish_chunk(self) -> None:
        if self._sign is None or self._chunk_hash is None:
            return
        expected = self._sign(self._previous, self._chunk_hash.hexdigest())
        if not hmac.compare_digest(expected.encode(), self._chunk_signature.encode("utf-8", "surrogatepass")):
            raise S3Error("SignatureDoesNotMatch", "a chunk signature of the aws-chunked body does not match")
        self._previous = expected

    async def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n and not self._done:
            if self._left == 0:
                await self._next_chunk()
                continue
            data = await self._body.read(min(self._left, n - len(out)))
            if not data:
                raise S3Error("IncompleteBody", "the aws-chunked body ended inside a chunk")
            if self._chunk_hash is not None:
                self._chunk_hash.update(data)
            self._left -= len(data)
            self._total += len(data)
            out += data
            if self._left == 0:
                if await self._body.read(2) != b"\r\n":
                    raise S3Error("InvalidRequest", "malformed aws-chunked body: a chunk lacks its CRLF")
                self._finish_chunk()
        return bytes(out)
