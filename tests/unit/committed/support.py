"""Test helpers: an in-memory block adapter that behaves like a remote store, and records."""

from __future__ import annotations

import hashlib
import io
from datetime import UTC, datetime
from typing import BinaryIO

from engine.core.committed import Change, Record
from silt.block.adapter import BlockAdapter, ObjectStat, PartInfo, PutResult, UploadPart
from silt.errors import NotFound


class _RemoteStream(io.RawIOBase):
    """A forward-only stream, like an HTTP response body: not seekable."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self._data[self._position : self._position + len(buffer)]
        buffer[: len(chunk)] = chunk
        self._position += len(chunk)
        return len(chunk)


class MemoryAdapter(BlockAdapter):
    """Objects in a dict; counts gets and puts so tests can see traffic to the store."""

    scheme = "mem"

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.uploads: dict[str, dict[int, bytes]] = {}
        self.gets = 0
        self.puts = 0

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        data = stream.read()
        self.objects[(namespace, key)] = data
        self.puts += 1
        return PutResult(len(data), hashlib.md5(data).hexdigest())

    def get(self, namespace: str, key: str) -> BinaryIO:
        try:
            data = self.objects[(namespace, key)]
        except KeyError:
            raise NotFound(f"{namespace} {key}") from None
        self.gets += 1
        return io.BufferedReader(_RemoteStream(data))

    def stat(self, namespace: str, key: str) -> ObjectStat:
        try:
            data = self.objects[(namespace, key)]
        except KeyError:
            raise NotFound(f"{namespace} {key}") from None
        return ObjectStat(len(data), hashlib.md5(data).hexdigest(), datetime.now(UTC))

    def delete(self, namespace: str, key: str) -> None:
        self.objects.pop((namespace, key), None)

    def keys(self, namespace: str, prefix: str = "") -> list[str]:
        return sorted(key for ns, key in self.objects if ns == namespace and key.startswith(prefix))

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        with self.get(namespace, key) as stream:
            data = stream.read()
        return io.BufferedReader(_RemoteStream(data[start : end + 1]))

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        with self.get(src_namespace, src_key) as stream:
            return self.put(dst_namespace, dst_key, stream)

    # Multipart, for completeness of the interface: the committed layer writes whole objects.

    def create_multipart_upload(self, namespace: str, key: str) -> str:
        upload_id = hashlib.sha256(f"{namespace}/{key}/{len(self.uploads)}".encode()).hexdigest()[:16]
        self.uploads[upload_id] = {}
        return upload_id

    def _parts(self, upload_id: str) -> dict[int, bytes]:
        try:
            return self.uploads[upload_id]
        except KeyError:
            raise NotFound(f"upload {upload_id}") from None

    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        data = stream.read()
        self._parts(part.upload_id)[part.number] = data
        return PartInfo(part.number, hashlib.md5(data).hexdigest())

    # upload_part_copy: the interface's own, streaming the source through upload_part.

    def _complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        stored = self._parts(upload_id)
        data = b"".join(stored[part.part_number] for part in parts)
        self.objects[(namespace, key)] = data
        del self.uploads[upload_id]
        digests = b"".join(bytes.fromhex(hashlib.md5(stored[p.part_number]).hexdigest()) for p in parts)
        return PutResult(len(data), f"{hashlib.md5(digests).hexdigest()}-{len(parts)}")

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        self._parts(upload_id)
        del self.uploads[upload_id]


def key_of(index: int) -> bytes:
    return f"tables/events/date=2026-01-01/part-{index:08d}.parquet".encode()


def make_record(key: bytes, version: int = 0) -> Record:
    value = b"entry:" + key + b":v%d" % version
    return Record(key, hashlib.sha256(value).digest(), value)


def records(indices: range | list[int], version: int = 0) -> list[Record]:
    return [make_record(key_of(index), version) for index in indices]


def merged(base: list[Record], changes: list[Change]) -> list[Record]:
    """base ⊕ changes, computed the obvious way, as the oracle for apply."""
    result = {record.key: record for record in base}
    for change in changes:
        if change.record is None:
            result.pop(change.key, None)
        else:
            result[change.key] = change.record
    return [result[key] for key in sorted(result)]
