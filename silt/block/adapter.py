"""The block adapter interface: where object bytes live (docs/architecture.md, "Block adapters").

An object is addressed by a storage namespace and a key inside it. A storage namespace is
a URI whose scheme names the adapter:

* ``local://<name>[/<prefix>]`` — a directory under the configured ``blockstore.local.path``;
* ``s3://<bucket>[/<prefix>]`` — a bucket and optional prefix;
* ``https://<account>.blob.core.windows.net/<container>[/<prefix>]`` — an Azure Blob Storage
  container (``<test_endpoint_url>/<account>/<container>[/<prefix>]`` on an emulator);
* ``gs://<bucket>[/<prefix>]`` — a Google Cloud Storage bucket.

Bytes are always streamed: ``put`` reads from a file-like object in chunks and ``get``
returns a file-like object; no adapter reads a whole object into memory.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Literal

from silt.block.rules import check_part_number, check_parts_list, check_range
from silt.errors import InvalidArgument

# Streams are copied in pieces of this size: large enough for throughput, small enough
# that many concurrent transfers stay within a bounded amount of memory.
CHUNK_SIZE = 1024 * 1024
# The most keys one delete_many call takes: S3's DeleteObjects limit.
MAX_DELETE_BATCH = 1000


@dataclass(frozen=True)
class ObjectStat:
    size: int
    etag: str  # hex MD5 of the bytes, or "<md5 of part md5s>-<parts>" after a multipart upload
    mtime: datetime
    # The store's own name of this version of the object, where it has one a read can ask for
    # (GCS: the generation; Azure: its ETag); "" elsewhere. Assigned by the store, never by
    # whoever writes the object.
    version: str = ""
    # The store's storage class (S3: STANDARD_IA, GLACIER, ...; GCS: NEARLINE, ...; Azure: the
    # access tier), where it names one; None where it cannot tell (S3 omits STANDARD, as lakeFS
    # reports it) or has none (a local disk).
    storage_class: str | None = None


@dataclass(frozen=True)
class PutResult:
    size: int
    etag: str


@dataclass(frozen=True)
class ListedObject:
    """One object of a listing: its key relative to the listed namespace."""

    key: str
    size: int
    etag: str
    mtime: datetime
    version: str = ""  # as ObjectStat.version


# What a presigned URL lets its holder do with one object.
PresignMethod = Literal["GET", "PUT"]


@dataclass(frozen=True)
class PresignedURL:
    url: str
    expires: int  # Unix seconds


@dataclass(frozen=True)
class PartInfo:
    part_number: int
    etag: str


@dataclass(frozen=True)
class UploadPart:
    """Where a part goes: part `number` of multipart upload `upload_id` of an object."""

    namespace: str
    key: str
    upload_id: str
    number: int


@dataclass(frozen=True)
class CopySource:
    """The bytes a part is copied from: an object, or the inclusive byte range of it."""

    namespace: str
    key: str
    byte_range: tuple[int, int] | None


class ObjectReader(abc.ABC):
    """What reading one entry's bytes needs of a block adapter: the adapter itself has all of it,
    and silt/block/external.py's SourceReader gives it for an imported source."""

    @abc.abstractmethod
    def get(self, namespace: str, key: str) -> BinaryIO:
        """Open the object for streaming reads. The caller closes it."""

    @abc.abstractmethod
    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        """Open bytes start..end (both inclusive, like an HTTP Range) for streaming reads."""

    @abc.abstractmethod
    def stat(self, namespace: str, key: str) -> ObjectStat:
        """Size, ETag and modification time of the object."""

    @abc.abstractmethod
    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        """Copy an object inside the store, without passing its bytes through this process if possible."""

    def upload_part_copy(
        self,
        namespace: str,
        key: str,
        upload_id: str,
        part_number: int,
        src_namespace: str,
        src_key: str,
        src_range: tuple[int, int] | None = None,
    ) -> PartInfo:
        """Store a part whose bytes are (a byte range, inclusive, of) an existing object.

        Like S3's UploadPartCopy, the range must lie inside the source (InvalidArgument if not).
        Checks what it can without I/O, then copies with _copy_part.
        """
        check_part_number(part_number)
        if src_range is not None:
            check_range(*src_range)
        part = UploadPart(namespace, key, upload_id, part_number)
        return self._copy_part(part, CopySource(src_namespace, src_key, src_range))

    @abc.abstractmethod
    def _copy_part(self, part: UploadPart, source: CopySource) -> PartInfo:
        """upload_part_copy once its part number and range are checked."""


class BlockAdapter(ObjectReader):
    """Stores and streams object bytes. Every method may raise NotFound, InvalidArgument or Unavailable."""

    scheme: str
    # Keys a listing asks the store for per call (list_page_size_of checks it); None: the
    # store's own default (1,000 on S3 and GCS, 5,000 on Azure), which is also the most a store
    # gives. A local disk lists without pages.
    list_page_size: int | None = None

    @abc.abstractmethod
    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        """Write the whole stream as the object; atomically replaces any previous object."""

    def put_if_absent(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        """Write the stream as the object only if there is none yet (AlreadyExists otherwise), atomically."""
        raise InvalidArgument(f"{self.scheme} blockstore: writes that never replace an object are not supported")

    @abc.abstractmethod
    def delete(self, namespace: str, key: str) -> None:
        """Remove the object; removing a missing object is not an error."""

    def delete_many(self, namespace: str, keys: Sequence[str]) -> None:
        """Remove each object, as delete does, in as few calls to the store as it allows (S3: one
        DeleteObjects; a local disk: one directory sync per directory); at most MAX_DELETE_BATCH
        keys. A failure may leave some of them deleted: deleting them again is never an error."""
        check_delete_batch(keys)
        for key in keys:
            self.delete(namespace, key)

    def presign(
        self, namespace: str, key: str, method: PresignMethod, expires_in: int, filename: str | None = None
    ) -> PresignedURL | None:
        """A URL of the store's own that lets anyone holding it GET (read) or PUT (write) this one
        object for `expires_in` seconds; `filename` asks reads to be saved under that name.

        None when the store has no URLs of its own (a local disk): the edge then signs its own.
        Computed locally, without a request to the store.
        """
        return None

    def presign_part(
        self, namespace: str, key: str, upload_id: str, part_number: int, expires_in: int
    ) -> PresignedURL | None:
        """A URL of the store's own that lets anyone holding it PUT part `part_number` of multipart
        upload `upload_id` of this object for `expires_in` seconds (the answer's ETag names the part).

        None when the store has no URLs of its own (a local disk): the edge then signs its own.
        Computed locally, without a request to the store.
        """
        check_part_number(part_number)
        return None

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        """Every object under the namespace whose key starts with `prefix` and sorts strictly after
        `after`, in ascending order of the keys' UTF-8 bytes, read page by page as the caller
        goes (an import or a GC listing runs over millions). Keys are relative to the namespace;
        the adapter's own bookkeeping (names starting with ``.silt-``) and multipart parts are
        never listed."""
        raise InvalidArgument(f"{self.scheme} blockstore: listing objects is not supported")

    @abc.abstractmethod
    def create_multipart_upload(self, namespace: str, key: str) -> str:
        """Start a multipart upload; return its upload id."""

    def upload_part(
        self, namespace: str, key: str, upload_id: str, part_number: int, stream: BinaryIO, size: int | None = None
    ) -> PartInfo:
        """Store one part (numbers 1..10000); re-uploading a part number replaces it.
        Checks the part number, then stores with _upload_part."""
        check_part_number(part_number)
        return self._upload_part(UploadPart(namespace, key, upload_id, part_number), stream, size)

    @abc.abstractmethod
    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        """upload_part once the part number is checked."""

    def _copy_part(self, part: UploadPart, source: CopySource) -> PartInfo:
        """Copy a checked part by streaming the source through this process; an adapter whose
        store can copy a part itself overrides this."""
        size = self.stat(source.namespace, source.key).size
        first, last = (0, size - 1) if source.byte_range is None else source.byte_range
        if last >= size:
            raise InvalidArgument(
                f"{source.namespace} {source.key}: copy range {first}-{last} is outside the object's {size} bytes"
            )
        with self.get_range(source.namespace, source.key, first, last) as stream:
            return self._upload_part(part, stream, last - first + 1)

    def complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        """Join the listed parts, in order, into the object. The ETag has the S3 ``<md5>-<N>`` form.
        Checks the list (not empty, valid numbers, ascending without repeats), then joins with
        _complete_multipart_upload."""
        check_parts_list(parts)
        return self._complete_multipart_upload(namespace, key, upload_id, parts)

    @abc.abstractmethod
    def _complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        """complete_multipart_upload once the list of parts is checked."""

    @abc.abstractmethod
    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        """Discard an upload and its parts."""


def check_delete_batch(keys: Sequence[str]) -> None:
    if len(keys) > MAX_DELETE_BATCH:
        raise InvalidArgument(f"at most {MAX_DELETE_BATCH} objects are deleted in one call, not {len(keys)}")


def list_page_size_of(adapter: BlockAdapter) -> int | None:
    """The adapter's listing page size, None or a positive int (InvalidArgument otherwise: a page
    of 0 keys would never end a listing, a negative one is the store's error)."""
    size = adapter.list_page_size
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise InvalidArgument(f"{adapter.scheme} blockstore: a listing page holds 1 key or more, not {size!r}")
    return size
