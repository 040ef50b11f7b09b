"""S3's additional checksums (CRC32, CRC32C, CRC64NVME, SHA1, SHA256) of a write's body.

A client names one algorithm, by a value header (``x-amz-checksum-crc32: <base64>``), by a
trailer announced in ``x-amz-trailer`` (the value follows the aws-chunked body), or by
``x-amz-sdk-checksum-algorithm`` alone (the server computes it). The checksum is computed
while the body streams to the object store and compared when the body ends, before anything
is staged; a mismatch is BadDigest, as on S3. A multipart object's checksum is S3's: the
composite of its parts' checksums, or for CRC64NVME (which S3 keeps only whole) the CRC of
the whole object, combined from its parts'.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import anycrc
import google_crc32c

from edge.gateway.errors import S3Error
from silt.objects import CHECKSUM_METADATA_PREFIX

HEADER_PREFIX = "x-amz-checksum-"


class _Digest(Protocol):
    def update(self, data: bytes, /) -> object: ...

    def digest(self) -> bytes: ...


class _Crc32:
    def __init__(self) -> None:
        self._value = 0

    def update(self, data: bytes) -> None:
        self._value = zlib.crc32(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(4, "big")


class _Crc32c:
    def __init__(self) -> None:
        self._checksum = google_crc32c.Checksum()

    def update(self, data: bytes) -> None:
        self._checksum.update(data)

    def digest(self) -> bytes:
        return bytes(self._checksum.digest())


_CRC64NVME = anycrc.Model("CRC64-NVME")


class _Crc64Nvme:
    def __init__(self) -> None:
        self._value = 0  # the CRC of no bytes, from which the next piece goes on

    def update(self, data: bytes) -> None:
        self._value = _CRC64NVME.calc(data, self._value)

    def digest(self) -> bytes:
        return int(self._value).to_bytes(8, "big")


_ALGORITHMS: dict[str, tuple[Callable[[], _Digest], int]] = {
    "crc32": (_Crc32, 4),
    "crc32c": (_Crc32c, 4),
    "crc64nvme": (_Crc64Nvme, 8),
    "sha1": (hashlib.sha1, 20),
    "sha256": (hashlib.sha256, 32),
}
SUPPORTED = "CRC32, CRC32C, CRC64NVME, SHA1 or SHA256"
# Kept whole by S3 (FULL_OBJECT): a multipart object's value is the CRC of all its bytes.
FULL_OBJECT_ONLY = frozenset(("crc64nvme",))


@dataclass(frozen=True)
class Requested:
    """The checksum a write asked for: its algorithm and, unless the server is to compute it
    or it arrives as a trailer, the expected value (base64)."""

    algorithm: str  # lower case: "crc32", ...
    expected: str | None
    trailer: bool

    @property
    def header(self) -> str:
        return HEADER_PREFIX + self.algorithm


def _algorithm(name: str, where: str) -> str:
    algorithm = name.strip().lower()
    if algorithm not in _ALGORITHMS:
        raise S3Error("InvalidRequest", f"Value for {where} is invalid: {name!r}; use {SUPPORTED}")
    return algorithm


def _check_value(algorithm: str, value: str, where: str) -> str:
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != _ALGORITHMS[algorithm][1]:
        raise S3Error("InvalidRequest", f"Value for {where} is invalid.")
    return value.strip()


def requested(headers: Mapping[str, str], chunked: bool) -> Requested | None:
    """The checksum the request's headers ask for, or None; InvalidRequest for a malformed ask."""
    values = [(name, value) for name, value in headers.items() if name.startswith(HEADER_PREFIX)]
    declared = headers.get("x-amz-sdk-checksum-algorithm")
    trailer_names = [t.strip().lower() for t in headers.get("x-amz-trailer", "").split(",") if t.strip()]
    trailers = [t for t in trailer_names if t.startswith(HEADER_PREFIX)]
    if len(values) + len(trailers) > 1:
        raise S3Error(
            "InvalidRequest", "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
        )
    if trailers and not chunked:
        raise S3Error("InvalidRequest", "x-amz-trailer needs an aws-chunked body")
    result: Requested | None = None
    if values:
        name, value = values[0]
        algorithm = _algorithm(name[len(HEADER_PREFIX) :], name)
        result = Requested(algorithm, _check_value(algorithm, value, f"{name} header"), trailer=False)
    elif trailers:
        result = Requested(_algorithm(trailers[0][len(HEADER_PREFIX) :], "x-amz-trailer"), None, trailer=True)
    if declared is not None:
        algorithm = _algorithm(declared, "x-amz-sdk-checksum-algorithm")
        if result is None:
            return Requested(algorithm, None, trailer=False)
        if result.algorithm != algorithm:
            raise S3Error("InvalidRequest", "x-amz-sdk-checksum-algorithm and the checksum header name differ")
    return result


class ChecksumComputed:
    """A body source that computes a checksum as it is read, and checks it at the end.

    `trailers` returns the trailers of the body once it has ended (aws-chunked bodies carry
    them after the last chunk).
    """

    def __init__(self, inner: object, wanted: Requested, trailers: Callable[[], Mapping[str, str]]) -> None:
        self._inner = inner
        self._wanted = wanted
        self._trailers = trailers
        self._digest = _ALGORITHMS[wanted.algorithm][0]()
        self.value: str | None = None  # base64, once the body has ended and matched

    async def read(self, n: int) -> bytes:
        data: bytes = await self._inner.read(n)  # type: ignore[attr-defined]
        if data:
            self._digest.update(data)
        elif self.value is None:
            self.value = self._finish()
        return data

    def _finish(self) -> str:
        wanted = self._wanted
        computed = base64.b64encode(self._digest.digest()).decode()
        expected = wanted.expected
        if wanted.trailer:
            sent = self._trailers().get(wanted.header)
            if sent is None:
                raise S3Error("InvalidRequest", f"the body ended without its {wanted.header} trailer")
            expected = _check_value(wanted.algorithm, sent, f"{wanted.header} trailer")
        if expected is not None and expected != computed:
            name = wanted.algorithm.upper()
            raise S3Error("BadDigest", f"The {name} you specified did not match the calculated checksum.")
        return computed


def upload_algorithm(headers: Mapping[str, str]) -> str | None:
    """The algorithm a multipart upload is created with (``x-amz-checksum-algorithm``), if any."""
    name = headers.get("x-amz-checksum-algorithm")
    return _algorithm(name, "x-amz-checksum-algorithm") if name else None


def wanted(headers: Mapping[str, str], chunked: bool, upload: str | None = None) -> Requested | None:
    """The checksum of a write: what it asks for; for a part of a multipart upload created
    with an algorithm (`upload`), that algorithm, computed here if the part names none."""
    wanted = requested(headers, chunked)
    if upload is None:
        return wanted
    if wanted is None:
        return Requested(upload, None, trailer=False)
    if wanted.algorithm != upload:
        raise S3Error(
            "InvalidRequest",
            "Checksum Type mismatch occurred, expected checksum Type: "
            f"{upload}, actual checksum Type: {wanted.algorithm}",
        )
    return wanted


def composite(algorithm: str, part_values: list[str]) -> str:
    """S3's checksum of a multipart object: the checksum of the parts' checksums, "-<parts>"."""
    digest = _ALGORITHMS[algorithm][0]()
    for value in part_values:
        digest.update(base64.b64decode(value))
    return f"{base64.b64encode(digest.digest()).decode()}-{len(part_values)}"


def full_object_crc64nvme(parts: list[tuple[str, int]]) -> str:
    """The CRC64NVME of a multipart object's bytes, from each part's (base64 CRC, size)."""
    value = 0
    for part_value, size in parts:
        value = _CRC64NVME.combine(value, int.from_bytes(base64.b64decode(part_value), "big"), size)
    return base64.b64encode(int(value).to_bytes(8, "big")).decode()


def as_metadata(checksum: tuple[str, str] | None) -> dict[str, str]:
    """The entry metadata keeping a verified checksum ("x-amz-checksum-crc32", value): under
    Silt's own key, never as user metadata, and left out of the entry's identity."""
    if checksum is None:
        return {}
    header, value = checksum
    return {CHECKSUM_METADATA_PREFIX + header.removeprefix(HEADER_PREFIX): value}


def from_metadata(metadata: Mapping[str, str]) -> list[tuple[str, str]]:
    """The checksum headers of an entry's stored checksums; entries written before they had a
    key of their own kept them under the header's name."""
    found = []
    for key, value in metadata.items():
        if key.startswith(CHECKSUM_METADATA_PREFIX):
            found.append((HEADER_PREFIX + key.removeprefix(CHECKSUM_METADATA_PREFIX), value))
        elif key.startswith(HEADER_PREFIX):
            found.append((key, value))
    return found
