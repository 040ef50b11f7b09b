"""Manifest lists in memory, read and written with pyiceberg's Avro reader and writer (the
spec's manifest_list schema for each format version). Imported only when a merge combines a
table: pyiceberg's file IO costs the edge about a second of start-up otherwise."""

from __future__ import annotations

import io
import zlib
from types import TracebackType

from pyiceberg.avro.codecs import AvroCompressionCodec
from pyiceberg.io import InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.manifest import ManifestContent, ManifestFile, read_manifest_list, write_manifest_list

AVRO_CODEC: AvroCompressionCodec = "deflate"
# A manifest list's blocks decoded, at the most: a writer chooses them, and a deflate block of a
# few MiB can expand a thousandfold. Real lists are a few hundred bytes a manifest.
MAX_DECODED_BYTES = 64 * 1024 * 1024
_MAGIC = b"Obj\x01"
_SYNC_BYTES = 16


class _Stream(io.BytesIO):
    """A pyiceberg stream over bytes; what was written stays readable after close."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__(data)
        self.written = b""

    def close(self) -> None:
        if not self.closed:
            self.written = self.getvalue()
        super().close()

    def __enter__(self) -> _Stream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class _InMemoryInput(InputFile):
    def __init__(self, data: bytes) -> None:
        super().__init__("memory:manifest-list")
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return _Stream(self._data)


class _InMemoryOutput(OutputFile):
    def __init__(self) -> None:
        super().__init__("memory:manifest-list")
        self.stream: _Stream | None = None

    def __len__(self) -> int:
        return 0 if self.stream is None else len(self.stream.written or self.stream.getvalue())

    def exists(self) -> bool:
        return self.stream is not None

    def to_input_file(self) -> InputFile:
        return _InMemoryInput(b"" if self.stream is None else self.stream.written)

    def create(self, overwrite: bool = False) -> OutputStream:
        self.stream = _Stream()
        return self.stream


def read(data: bytes) -> list[ManifestFile]:
    """The manifests a manifest list names, in order; ValueError for a list that is not an Avro
    container of the null or deflate codec or decodes past MAX_DECODED_BYTES."""
    check_decoded_size(data, MAX_DECODED_BYTES)
    return list(read_manifest_list(_InMemoryInput(data)))


class _Cursor:
    """Avro's binary encoding, read from bytes: zig-zag varint longs and length-prefixed bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def long(self) -> int:
        shift = value = 0
        while True:
            if self.at >= len(self.data) or shift > 63:
                raise ValueError("truncated or overlong Avro long")
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1)

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError("truncated Avro bytes")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk


def check_decoded_size(data: bytes, limit: int) -> None:
    """Walk an Avro object container's blocks and decode each (deflate with a bounded output), so
    that a list whose blocks decode past limit is refused before pyiceberg's reader, which
    decompresses a block whole, sees it."""
    cursor = _Cursor(data)
    if cursor.take(len(_MAGIC)) != _MAGIC:
        raise ValueError("not an Avro object container")
    codec = b"null"
    while (count := cursor.long()) != 0:
        if count < 0:
            count = -count
            cursor.long()  # the block's size in bytes
        for _ in range(count):
            key = cursor.take(cursor.long())
            value = cursor.take(cursor.long())
            if key == b"avro.codec":
                codec = value
    if codec not in (b"null", b"deflate"):
        raise ValueError(f"manifest list codec {codec[:32]!r}: only null and deflate are read")
    cursor.take(_SYNC_BYTES)
    decoded = 0
    while cursor.at < len(data):
        cursor.long()  # objects in the block
        block = cursor.take(cursor.long())
        cursor.take(_SYNC_BYTES)
        if codec == b"deflate":
            inflater = zlib.decompressobj(-15)
            decoded += len(inflater.decompress(block, limit - decoded + 1))
        else:
            decoded += len(block)
        if decoded > limit:
            raise ValueError(f"the manifest list decodes past {limit} bytes")


def only_adds_data(manifest: ManifestFile) -> bool:
    """Whether a manifest holds data files, all of them added by its snapshot."""
    existing = manifest.existing_files_count or 0
    deleted = manifest.deleted_files_count or 0
    return manifest.content == ManifestContent.DATA and not existing and not deleted


def write(version: int, manifests: list[ManifestFile], snapshot_id: int, parent: int | None, sequence: int) -> bytes:
    output = _InMemoryOutput()
    with write_manifest_list(
        version,  # type: ignore[arg-type]
        output,
        snapshot_id,
        parent,
        sequence if version >= 2 else None,
        AVRO_CODEC,
    ) as writer:
        writer.add_manifests(manifests)
    assert output.stream is not None
    return output.stream.written
