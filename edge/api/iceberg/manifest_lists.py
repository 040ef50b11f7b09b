"""Manifest lists in memory, read and written with pyiceberg's Avro reader and writer (the
spec's manifest_list schema for each format version). Imported only when a merge combines a
table: pyiceberg's file IO costs the edge about a second of start-up otherwise."""

from __future__ import annotations

import io
from types import TracebackType

from pyiceberg.avro.codecs import AvroCompressionCodec
from pyiceberg.io import InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.manifest import ManifestContent, ManifestFile, read_manifest_list, write_manifest_list

AVRO_CODEC: AvroCompressionCodec = "deflate"


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
    """The manifests a manifest list names, in order."""
    return list(read_manifest_list(_InMemoryInput(data)))


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
