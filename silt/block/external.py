"""Objects outside every repository's storage namespace, named by imported (or linked) entries.

An entry is *external* when its physical address is a full URI outside its repository's storage
namespace: ``s3://bucket/key`` under an allowed import prefix on the S3 blockstore, or
``local:///absolute/path`` under ``blockstore.local.allowed_external_prefixes`` on the local
blockstore (lakeFS's spelling: ``local://`` and an absolute path). Silt never writes or deletes
them (garbage collection lists only the namespace); it reads them, and only as they were imported.

The source may change after the import, since it is not Silt's. Every read of an external entry
compares the source with what the entry recorded, and the bytes served are those of the version
compared. Only what the store itself assigns is compared, never what a writer of the source can
set (Silt's own ETag metadata, ``silt-etag`` / ``silt_etag``, is ignored for sources):

* S3: ``If-Match`` on the recorded ETag, S3's own, in the read itself (no extra stat);
* GCS and Azure: the import records the version the store gave the object (GCS: its
  generation; Azure: its ETag) in the entry (``x-silt-source-version``), and a read asks for
  exactly that version: a GCS read of that generation, an Azure read with ``If-Match`` on that
  ETag. For an entry imported before versions were recorded, the object's size and the ETag the
  store computed of its bytes (MD5; else the store's ETag; on Azure the Content-MD5 property,
  which the uploader of a blob assembled from blocks supplies) are compared with the entry's,
  and the read pinned to the generation / Azure ETag that check saw, so a source replaced
  between the two steps fails the read;
* a local disk: the opened file's size and modification time.

A source that changed or vanished answers SourceChanged naming it; different bytes are never
served under the entry.

``source_reader`` gives the reads of one entry: the block adapter itself for an entry inside the
namespace (nothing changes for those), a SourceReader for an external one.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO, NamedTuple

from silt.block.adapter import (
    CHUNK_SIZE,
    BlockAdapter,
    CopySource,
    ObjectReader,
    ObjectStat,
    PartInfo,
    PutResult,
    UploadPart,
)
from silt.block.beneath import DIRECTORY_FLAGS, LinkRefused, open_beneath
from silt.block.rules import check_range
from silt.config import BlockstoreConfig
from silt.errors import ConfigError, InvalidArgument, NotFound, PredicateFailed, SourceChanged, Unavailable
from silt.namespaces import split_store_uri
from silt.objects import SOURCE_MTIME_KEY, SOURCE_VERSION_KEY, full_address, is_link_address, split_address

# How a local external file is named: "local://" followed by its absolute path.
LOCAL_EXTERNAL = "local:///"
# O_NONBLOCK: a FIFO planted under an import prefix must not hang the open; it is then refused
# as not a regular file. No effect on regular files.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# What describe reads at a time while hashing a file.
_HASH_CHUNK = 1024 * 1024
# Files whose MD5 describe remembers, and how long after its last change a file's is not
# remembered (ExternalFiles.describe).
MD5_CACHE = 4096
RACY_SECONDS = 2.0


def external_prefixes(blockstore: BlockstoreConfig) -> tuple[str, ...]:
    """The local blockstore's importable directories as import prefixes (``local:///mnt/x``):
    none unless the local blockstore has ``import_enabled``."""
    local = blockstore.local
    if blockstore.type != "local" or not local.import_enabled:
        return ()
    return tuple("local://" + prefix for prefix in local.allowed_external_prefixes)


def check_external_prefixes(blockstore: BlockstoreConfig) -> None:
    """ConfigError if an importable directory overlaps the local blockstore's root: files there
    are repositories' own bytes and metadata, never something to import."""
    if blockstore.type != "local" or not blockstore.local.import_enabled:
        return
    root = os.path.realpath(os.path.expanduser(blockstore.local.path))
    for prefix in blockstore.local.allowed_external_prefixes:
        real = os.path.realpath(prefix)
        for one, other in ((real, root), (root, real), (prefix, root), (root, prefix)):
            if one == other or one.startswith(other.rstrip("/") + "/"):
                raise ConfigError(
                    f"blockstore.local.allowed_external_prefixes: {prefix!r} overlaps blockstore.local.path {root!r}"
                )


def is_external(namespace: str, physical_address: str) -> bool:
    """Whether an entry's bytes lie outside its repository's namespace (a full URI elsewhere)."""
    if "://" not in physical_address:
        return False
    return not physical_address.startswith(namespace.rstrip("/") + "/")


@dataclass(frozen=True)
class SourceVersion:
    """What an import recorded of a source object: what a read compares the source with."""

    size: int
    etag: str
    mtime_ns: int  # 0 when unknown
    # The store's own name of the version imported (GCS: generation; Azure: ETag), "" when the
    # import recorded none (S3, local files, entries imported before it was recorded).
    store_version: str = ""


def changed(uri: str, how: str, linked: bool = False) -> SourceChanged:
    if linked:
        return SourceChanged(
            f"linked object {uri} {how} since it was linked (written again through its upload URL?); Silt never "
            "serves other bytes than the link checked: upload and link the object again"
        )
    return SourceChanged(
        f"imported object {uri} {how} since it was imported; Silt never serves other bytes than the import's: "
        "restore the source, or import it again"
    )


class _FileRange(io.RawIOBase):
    """Bytes offset..offset+length of an open file; closing it closes the file."""

    def __init__(self, fd: int, offset: int, length: int, uri: str) -> None:
        super().__init__()
        self._fd = fd
        self._offset = offset
        self._remaining = length
        self._uri = uri

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._remaining <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._remaining, CHUNK_SIZE)
        try:
            data = os.pread(self._fd, want, self._offset)
        except OSError as exc:
            raise Unavailable(f"reading {self._uri}: {exc.strerror or exc}") from None
        if not data:
            # The file was truncated after it was opened and checked: fewer bytes would be wrong bytes.
            raise changed(self._uri, "was truncated while being read")
        view[: len(data)] = data
        self._offset += len(data)
        self._remaining -= len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


class ExternalFiles:
    """Files under the local blockstore's importable directories, named ``local:///abs/path``.

    A path is accepted only strictly below one of the directories, with no empty, ``.`` or
    ``..`` component, and opened from the directory's descriptor without following a symbolic
    link at any component below it (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, else one
    O_NOFOLLOW open per component): a link planted under an import prefix, even one swapped in
    while a read is under way, cannot reach the rest of the disk.
    """

    def __init__(self, prefixes: Sequence[str], clock: Callable[[], float] = time.time) -> None:
        # Given as the import prefixes of external_prefixes: "local:///mnt/x".
        self._roots = tuple(p.removeprefix("local://").rstrip("/") for p in prefixes)
        # MD5s describe worked out, by the file they are of (_FileIdentity): a file linked or
        # staged again is not read again.
        self._md5s: OrderedDict[_FileIdentity, str] = OrderedDict()
        self._md5s_lock = threading.Lock()
        self._clock = clock

    @property
    def roots(self) -> tuple[str, ...]:
        return self._roots

    def root_of(self, path: str) -> str:
        """The importable directory an absolute path lies below; InvalidArgument if none."""
        parts = path.split("/")
        if (
            not path.startswith("/")
            or any(part in ("", ".", "..") for part in parts[1:])
            or any(ord(c) < 0x20 or c in "\\\x7f" for c in path)
        ):
            raise InvalidArgument(f"{path!r} is not a plain absolute path")
        for root in self._roots:
            if path.startswith(root + "/"):
                return root
        if not self._roots:
            raise InvalidArgument(
                "importing local files is off: set blockstore.local.import_enabled and list the directories "
                "in blockstore.local.allowed_external_prefixes"
            )
        raise InvalidArgument(
            f"{path!r} is not under any of blockstore.local.allowed_external_prefixes ({', '.join(self._roots)})"
        )

    def path_of(self, address: str) -> str:
        """The file an address names (``local:///abs/path`` -> ``/abs/path``), checked as root_of does."""
        if not address.startswith(LOCAL_EXTERNAL):
            raise InvalidArgument(f"{address!r} is not a local:///absolute/path address")
        path = address[len("local://") :]
        self.root_of(path)
        return path

    def check_links(self, path: str, root: str) -> None:
        """Refuse a path that passes through a symbolic link below its importable directory."""
        current = root
        for part in path[len(root) + 1 :].split("/")[:-1]:
            current = current + "/" + part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                return  # the open reports the missing file
            if stat.S_ISLNK(mode):
                raise InvalidArgument(f"{path!r} passes through a symbolic link; refused")

    def open_directory(self, path: str) -> int:
        """An open descriptor of a directory at or below an importable directory, reached without
        following a link below it (the importable directory itself may be one: it is configured).
        NotFound if there is none, InvalidArgument if a link is on the way."""
        root = path if path in self._roots else self.root_of(path)
        return self._open_below(root, path, DIRECTORY_FLAGS)

    def open_file(self, address: str) -> tuple[int, os.stat_result]:
        """An open descriptor of a regular file and its stat; NotFound if there is none.

        The path is resolved from the importable directory's descriptor by the kernel, refusing
        a link at every component (silt/block/beneath.py), so a directory swapped for a link
        after check_links looked cannot redirect the open."""
        path = self.path_of(address)
        root = self.root_of(path)
        # First the check by name, for a clear message in the common case; the open decides.
        self.check_links(path, root)
        fd = self._open_below(root, path, _OPEN_FLAGS)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise NotFound(f"{address}: not a regular file")
        return fd, st

    def _open_below(self, root: str, path: str, flags: int) -> int:
        shown = "local://" + path
        try:
            root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise NotFound(f"{shown}: the importable directory {root!r} does not exist") from None
            raise Unavailable(f"{shown}: {exc.strerror or exc}") from None
        if path == root:
            return root_fd  # open_directory of the importable directory itself
        try:
            return open_beneath(root_fd, path[len(root) + 1 :].split("/"), flags)
        except LinkRefused:
            raise InvalidArgument(
                f"{shown}: refusing to follow a symbolic link below {root!r} (it passes through one)"
            ) from None
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise NotFound(f"{shown}: no such file") from None
            raise Unavailable(f"{shown}: {exc.strerror or exc}") from None
        finally:
            os.close(root_fd)

    def describe(self, address: str) -> SourceVersion:
        """The file as it is now (size, MD5 of its bytes, modification time), for a link or a
        staged entry that names it; NotFound if there is none.

        The MD5 is read from the bytes once per version of a file: it is remembered (up to
        MD5_CACHE files, the least recently used forgotten first) by the file's identity as the
        open file's stat gives it (device, inode, size, modification and change times, in ns).
        Any write to a file changes its change time, which no user can set; a file changed within
        RACY_SECONDS of the read is not remembered, since a second write in the same tick of a
        coarse file-system clock would leave every time as it was."""
        fd, st = self.open_file(address)
        try:
            identity = _FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            with self._md5s_lock:
                md5 = self._md5s.get(identity)
                if md5 is not None:
                    self._md5s.move_to_end(identity)
            if md5 is None:
                md5 = file_md5(fd, address)
                if self._clock() - st.st_ctime_ns / 1e9 > RACY_SECONDS:
                    with self._md5s_lock:
                        self._md5s[identity] = md5
                        while len(self._md5s) > MD5_CACHE:
                            self._md5s.popitem(last=False)
        finally:
            os.close(fd)
        return SourceVersion(st.st_size, md5, st.st_mtime_ns)

    def open(self, address: str, version: SourceVersion, byte_range: tuple[int, int] | None) -> BinaryIO:
        """The file's bytes (or an inclusive range of them) while it is as imported; SourceChanged if not."""
        try:
            fd, st = self.open_file(address)
        except NotFound:
            raise changed(address, "no longer exists") from None
        if st.st_size != version.size or (version.mtime_ns and st.st_mtime_ns != version.mtime_ns):
            os.close(fd)
            raise changed(address, f"changed (now {st.st_size} bytes, modified at {st.st_mtime_ns} ns)")
        start, end = (0, st.st_size - 1) if byte_range is None else (byte_range[0], min(byte_range[1], st.st_size - 1))
        return io.BufferedReader(_FileRange(fd, start, max(0, end - start + 1), address), 64 * 1024)


class _FileIdentity(NamedTuple):
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def file_md5(fd: int, address: str) -> str:
    """The MD5 of an open file's bytes, read from where it is to its end."""
    digest = hashlib.md5(usedforsecurity=False)
    try:
        while chunk := os.read(fd, _HASH_CHUNK):
            digest.update(chunk)
    except OSError as exc:
        raise Unavailable(f"reading {address}: {exc.strerror or exc}") from None
    return digest.hexdigest()


def _version_of(entry: Any) -> SourceVersion:
    recorded = entry.metadata.get(SOURCE_MTIME_KEY, "")
    return SourceVersion(
        int(entry.size),
        str(entry.etag),
        int(recorded) if recorded.isdigit() else 0,
        entry.metadata.get(SOURCE_VERSION_KEY, ""),
    )


def split_external(address: str) -> tuple[str, str]:
    """(namespace, key) of an external address as the block adapters split it (silt/objects.py's
    split_address): ``local:///a/b`` is ("local://", "a/b"), ``gs://b/x`` is ("gs://b", "x")."""
    return split_store_uri(address)


class SourceReader(ObjectReader):
    """The block adapter as the reads of one external entry see it: reads of the entry's source
    are checked against the version the import recorded; everything else goes to the adapter.
    Writing or deleting the source is refused: it is not Silt's."""

    def __init__(
        self,
        adapter: BlockAdapter,
        files: ExternalFiles,
        address: str,
        version: SourceVersion,
        at: tuple[str, str] | None = None,
        linked: bool = False,
    ) -> None:
        self._adapter = adapter
        self._files = files
        self._address = address
        # (namespace, key) as the callers name the object: split_external's for an address
        # outside the namespace, the repository's namespace and the relative address for a linked one.
        self._at = split_external(address) if at is None else at
        self._version = version
        self._linked = linked

    def _changed(self, how: str) -> SourceChanged:
        return changed(self._address, how, self._linked)

    def _is_source(self, namespace: str, key: str) -> bool:
        return (namespace, key) == self._at

    def _open(self, byte_range: tuple[int, int] | None) -> BinaryIO:
        address, version = self._address, self._version
        if byte_range is not None:
            check_range(*byte_range)
        if address.startswith(LOCAL_EXTERNAL):
            return self._files.open(address, version, byte_range)
        namespace, key = self._at
        get_if_match = getattr(self._adapter, "get_if_match", None)
        if get_if_match is not None and version.etag:
            try:
                reader: BinaryIO = get_if_match(
                    namespace, key, version.etag, byte_range, size=version.size, version=version.store_version
                )
            except PredicateFailed as exc:
                raise self._changed(f"changed ({exc})") from None
            except NotFound:
                raise self._changed("no longer exists") from None
            return reader
        # An adapter without get_if_match (S3, GCS and Azure all have it): compare first; a change
        # between the two calls is the one window left.
        try:
            current = self._adapter.stat(namespace, key)
        except NotFound:
            raise self._changed("no longer exists") from None
        if current.size != version.size or (version.etag and current.etag != version.etag):
            raise self._changed(f"changed (now {current.size} bytes, ETag {current.etag})")
        if byte_range is None:
            return self._adapter.get(namespace, key)
        return self._adapter.get_range(namespace, key, *byte_range)

    def get(self, namespace: str, key: str) -> BinaryIO:
        if self._is_source(namespace, key):
            return self._open(None)
        return self._adapter.get(namespace, key)

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        if self._is_source(namespace, key):
            return self._open((start, end))
        return self._adapter.get_range(namespace, key, start, end)

    def stat(self, namespace: str, key: str) -> ObjectStat:
        if not self._is_source(namespace, key):
            return self._adapter.stat(namespace, key)
        with self._open((0, 0) if self._version.size else None):
            pass  # opened only to check the source is still as imported
        version = self._version
        return ObjectStat(version.size, version.etag, datetime.fromtimestamp(version.mtime_ns / 1e9, tz=UTC))

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        if self._is_source(dst_namespace, dst_key):
            raise InvalidArgument(f"{self._address} is an imported object's source: Silt never writes it")
        if not self._is_source(src_namespace, src_key):
            return self._adapter.copy(src_namespace, src_key, dst_namespace, dst_key)
        # Through this process: the checked read is the copy's source, in any store.
        with self._open(None) as stream:
            return self._adapter.put(dst_namespace, dst_key, stream, self._version.size)

    def _copy_part(self, part: UploadPart, source: CopySource) -> PartInfo:
        if not self._is_source(source.namespace, source.key):
            return self._adapter.upload_part_copy(
                part.namespace, part.key, part.upload_id, part.number, source.namespace, source.key, source.byte_range
            )
        size = self._version.size
        first, last = (0, size - 1) if source.byte_range is None else source.byte_range
        if last >= size:
            raise InvalidArgument(f"{self._address}: copy range {first}-{last} is outside the object's {size} bytes")
        with self._open((first, last)) as stream:
            return self._adapter.upload_part(
                part.namespace, part.key, part.upload_id, part.number, stream, last - first + 1
            )

    def __getattr__(self, name: str) -> Any:
        # Anything else (writes elsewhere, an adapter's extras) is the adapter's.
        return getattr(self._adapter, name)


def reads_pinned(adapter: Any, namespace: str, physical_address: str) -> bool:
    """Whether reads of an entry at this address are pinned to what the entry recorded: an
    imported object (outside the namespace), or one a client uploaded itself to an address
    getPhysicalAddress handed out and then linked, on a store whose presigned PUT URLs can write
    the object again until they expire (S3, GCS: `presigned_puts_replace`). The edge's own URLs
    (the local blockstore) write once and Azure's SAS upload URLs are create-only: nothing can
    write there after the link, so those reads stay plain."""
    if is_external(namespace, physical_address):
        return True
    return (
        is_link_address(physical_address)
        and getattr(adapter, "presigned_puts_replace", False)
        and getattr(adapter, "get_if_match", None) is not None
    )


def source_reader(adapter: BlockAdapter, files: ExternalFiles, namespace: str, entry: Any) -> ObjectReader:
    """The reads of `entry` (a graveler Entry) in a repository with storage namespace `namespace`:
    the adapter itself for bytes Silt wrote inside the namespace, a SourceReader for an imported
    object or a linked upload (reads_pinned)."""
    address = entry.physical_address
    if is_external(namespace, address):
        return SourceReader(adapter, files, address, _version_of(entry))
    if reads_pinned(adapter, namespace, address):
        at = split_address(namespace, address)
        return SourceReader(adapter, files, full_address(namespace, address), _version_of(entry), at, linked=True)
    return adapter
