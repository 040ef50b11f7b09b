"""The local-disk block adapter: objects are plain files under ``blockstore.local.path``.

Layout under the root::

    <name>/<prefix...>/<key...>          an object's bytes, exactly as written
    <same directory>/.silt-etag-<file>   the object's ETag record (below)
    <same directory>/.silt-tmp-*         files being written
    .silt-uploads/<upload id>/           multipart uploads in progress

Objects are stored as their raw bytes, with nothing embedded, so other tools (Spark
reading committed Parquet ranges, for one) can read the files directly. Every name that
starts with ``.silt-`` is out of reach of keys and namespaces (see silt/block/rules.py).

Path safety. Keys and namespaces are validated component by component (no ``..``, ``.``,
empty components, absolute paths, NUL bytes or backslashes), then every existing
component of the path, from the root (resolved when the adapter is made) down, is checked
not to be a symbolic link: with no ``..`` to climb, a walk that meets no link stays inside
the root. Final components are opened with O_NOFOLLOW, so a link planted between
the check and the open is refused too.

Atomicity. Bytes are written to a temporary file in the object's own directory, fsynced,
and renamed over the object, so a reader sees the old object or the new one, whole; a put
that fails or crashes leaves at most a ``.silt-tmp-*`` file behind, which no key names.

Durability. A put returns only after a sync that began after its bytes were written and,
later, one that began after its rename, so an acknowledged object survives a power cut, and
the rename never reaches the disk before the bytes. The first put into a directory (one it
made, or the first since start) also syncs the directories above it, so that the directory's
own entry is durable. Each put syncs on its own by default; blockstore.local.sync can make
concurrent puts share batched syncs (silt/block/groupsync.py). A failed sync fails the put
(Unavailable), never acknowledges it.

ETag records. A multipart ETag cannot be recomputed from the bytes, so each object's ETag
is kept in a small record beside it; except an object put whole in at most RECORDLESS_BYTES,
whose ETag is the MD5 of its bytes, recomputed from one read (its put removes any record left at
its path). A rename cannot move two files at once, so the record names the exact file it
describes — inode number, size and mtime in nanoseconds — and is written before the data is
renamed into place (after it is linked, for a put that must not replace). A record that does not describe the
current file (a crash between the two renames, two writers racing on one key, a file put
there by hand or restored from a copy) is ignored and the ETag is recomputed as the MD5 of
the bytes. So stat can report a plain MD5 where the last writer's multipart ETag was lost,
but never another object's ETag.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

from silt.block.adapter import (
    CHUNK_SIZE,
    BlockAdapter,
    CopySource,
    ListedObject,
    ObjectStat,
    PartInfo,
    PutResult,
    UploadPart,
    check_delete_batch,
)
from silt.block.groupsync import GroupSync, SyncMode, default_syncer
from silt.block.overlap import BackgroundMD5, EarlyFlush
from silt.block.rules import (
    RESERVED_PREFIX,
    check_range,
    multipart_etag,
    normalize_etag,
    split_key,
    split_namespace,
)
from silt.block.streams import ObjectStream
from silt.errors import AlreadyExists, ConfigError, InvalidArgument, NotFound, SiltError, Unavailable

_TMP_PREFIX = RESERVED_PREFIX + "tmp-"
_ETAG_PREFIX = RESERVED_PREFIX + "etag-"
_UPLOADS = RESERVED_PREFIX + "uploads"
_UPLOAD_TARGET = "target.json"
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
# The ETag record's name is the object's with a prefix; both must fit in NAME_MAX (255).
MAX_COMPONENT_BYTES = 255 - len(_ETAG_PREFIX)
# Objects put whole up to this size have no ETag record: their ETag is their MD5, recomputed
# by stat from one read (the record would take a put four more file-system calls in its worker
# thread, each a hand-off of the GIL while the event loop is busy).
RECORDLESS_BYTES = 64 * 1024
# Readers buffer small reads only; large reads go straight into the caller's buffer, so
# many concurrent downloads do not each pin a CHUNK_SIZE buffer.
_READ_BUFFER = 64 * 1024
# O_NONBLOCK: opening a FIFO planted in the tree must not hang; it is then refused as
# "not a regular file". The flag has no effect on regular files.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _error(exc: OSError, what: str) -> SiltError:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return NotFound(f"{what}: no such object")
    if exc.errno == errno.ELOOP:
        return InvalidArgument(f"{what}: refusing to follow a symbolic link")
    if exc.errno in (errno.EISDIR, errno.ENAMETOOLONG):
        return InvalidArgument(f"{what}: {exc.strerror}")
    return Unavailable(f"local blockstore: {what}: {exc.strerror or exc}")


@contextlib.contextmanager
def _mapped(what: str) -> Iterator[None]:
    """Turn OSErrors of file-system calls into Silt errors."""
    try:
        yield
    except OSError as exc:
        raise _error(exc, what) from None


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy_stream(stream: BinaryIO, fd: int, size: int | None, what: str) -> tuple[int, bytes]:
    """Copy stream into fd in CHUNK_SIZE pieces; return (bytes copied, binary MD5).

    The MD5 of a large body is computed beside the writes (silt/block/overlap.py).
    Exceptions raised by the caller's stream propagate unchanged: they are the caller's.
    """
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise InvalidArgument(f"{what}: size must be a non-negative integer, got {size!r}")
    md5 = BackgroundMD5()
    total = 0
    with EarlyFlush(fd) as flush:
        while size is None or total < size:
            chunk = stream.read(CHUNK_SIZE if size is None else min(CHUNK_SIZE, size - total))
            if not chunk:
                break
            md5.update(chunk)
            with _mapped(what):
                _write_all(fd, chunk)
                flush.wrote(len(chunk))
            total += len(chunk)
        with _mapped(what):
            flush.finish()
    if size is not None and total != size:
        raise InvalidArgument(f"{what}: stream ended after {total} of {size} bytes")
    return total, md5.digest()


def _copy_fd_range(src: int, dst: int, start: int, length: int, md5: Any = None) -> None:
    """Append bytes start..start+length of src at dst's position, feeding md5 if given."""
    offset, end = start, start + length
    if md5 is None and hasattr(os, "copy_file_range"):
        # The kernel copies (or reflinks) without passing the bytes through this process.
        try:
            while offset < end:
                copied = os.copy_file_range(src, dst, end - offset, offset)
                if copied == 0:
                    raise OSError(errno.EIO, "source file is shorter than expected")
                offset += copied
            return
        except OSError as exc:
            unsupported = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP)
            if exc.errno not in unsupported or offset != start:
                raise
    while offset < end:
        chunk = os.pread(src, min(CHUNK_SIZE, end - offset), offset)
        if not chunk:
            raise OSError(errno.EIO, "source file is shorter than expected")
        if md5 is not None:
            md5.update(chunk)
        _write_all(dst, chunk)
        offset += len(chunk)


def _md5_of_fd(fd: int, size: int) -> str:
    md5 = hashlib.md5(usedforsecurity=False)
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(CHUNK_SIZE, size - offset), offset)
        if not chunk:
            raise OSError(errno.EIO, "file is shorter than its size")
        md5.update(chunk)
        offset += len(chunk)
    return md5.hexdigest()


def _fingerprint(st: os.stat_result) -> list[int]:
    # Inode and mtime tell apart two files of the same size written in one mtime tick;
    # st_dev is left out because it can change across remounts of the same file system.
    return [st.st_ino, st.st_size, st.st_mtime_ns]


class _FileReader(ObjectStream):
    """Bytes offset..offset+length of an open file; closing it closes the file.

    Read with pread at its own offset: no seek and no file object to set up, so a small object
    costs open, fstat, one read and close, each a call that lets go of the GIL (and, while the
    event loop holds it, a hand-off to get it back)."""

    def __init__(self, fd: int, offset: int, length: int, what: str) -> None:
        super().__init__()
        self._fd = fd
        self._offset = offset
        self._remaining = length
        self._what = what

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            # The descriptor number may already belong to another file.
            raise ValueError(f"local blockstore: reading {self._what} after it was closed")
        if self._remaining <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._remaining)
        if want == 0:
            return 0
        try:
            count = os.preadv(self._fd, [view[:want]], self._offset)
        except OSError as exc:
            raise Unavailable(f"local blockstore: reading {self._what}: {exc.strerror or exc}") from None
        if count == 0:
            # Objects are replaced by rename, never rewritten in place; this file was
            # truncated behind our back. Handing out fewer bytes silently would be worse.
            raise Unavailable(f"local blockstore: {self._what} was truncated while being read")
        self._offset += count
        self._remaining -= count
        return count

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        super().close()


@dataclass(frozen=True)
class _Target:
    """Where an object lives on disk, after validation."""

    path: str
    directory: str
    name: str
    relpath: str  # from the root; identifies the object inside multipart upload records
    what: str  # names the object in error messages

    @property
    def etag_path(self) -> str:
        return os.path.join(self.directory, _ETAG_PREFIX + self.name)


class _Durability:
    """What makes a put durable: its file's fsync, then its directory's (shared with concurrent
    puts, silt/block/groupsync.py), and once per directory the fsyncs of the directories above it,
    so that the directory's own entry is durable too (a directory made by a put, or found at start).

    Directories known durable are remembered, up to a bound (forgetting only costs fsyncs).
    """

    _REMEMBERED = 65536

    def __init__(self, root: str, syncer: GroupSync) -> None:
        self.root = root
        self.syncer = syncer
        self._durable: set[str] = set()

    def file(self, fd: int, what: str) -> None:
        self.syncer.sync_file(fd, what)

    def directory(self, path: str, what: str) -> None:
        """Make every rename, link and unlink in path durable, and path's own entry."""
        chain, current = [path], path
        while current != self.root and current not in self._durable and current.startswith(self.root):
            current = os.path.dirname(current)
            chain.append(current)
        self.syncer.sync_directories(chain, what)
        if len(self._durable) >= self._REMEMBERED:
            self._durable.clear()
        # Each one's parent was synced after it existed: its entry is durable.
        self._durable.update(chain[:-1])

    def forget(self, paths: list[str]) -> None:
        """Directories just made: their entries are not durable until their parents are synced."""
        for path in paths:
            self._durable.discard(path)


class _TempFile:
    """A temporary file in a directory: renamed into place by publish, removed otherwise."""

    def __init__(self, directory: str, what: str, durability: _Durability) -> None:
        self.directory = directory
        self.what = what
        self.durability = durability
        with _mapped(what):
            self.fd, self.path = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
        self._published = False

    def __enter__(self) -> _TempFile:
        return self

    def __exit__(self, *exc: object) -> None:
        # The bytes were fsynced before publishing; a failing close changes nothing then.
        with contextlib.suppress(OSError):
            os.close(self.fd)
        if not self._published:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def publish(self, path: str, etag_path: str | None = None, etag: str | None = None) -> None:
        """fsync, write the ETag record at etag_path (without an etag: remove one left there by
        an earlier object), rename over path, make the renames durable."""
        self.durability.file(self.fd, self.what)
        with _mapped(self.what):
            if etag_path is not None and etag is not None:
                self._write_record(etag_path, etag)
            os.replace(self.path, path)
            self._published = True
            if etag_path is not None and etag is None:
                _remove_stale_record(etag_path)
        self.durability.directory(self.directory, self.what)

    def publish_new(self, path: str, etag_path: str, etag: str | None) -> None:
        """fsync and link into place at path only if nothing is there (AlreadyExists otherwise);
        then write the ETag record (with an etag; without one, remove any left at etag_path) and
        make both durable."""
        self.durability.file(self.fd, self.what)
        with _mapped(self.what):
            try:
                # link() never replaces: of two racing writers exactly one succeeds.
                os.link(self.path, path, follow_symlinks=False)
            except FileExistsError:
                raise AlreadyExists(f"{self.what}: the object already exists") from None
            os.unlink(self.path)
            self._published = True
            if etag is not None:
                # Written after the link: until it lands, a reader recomputes the MD5, never reads
                # a record that describes another file.
                self._write_record(etag_path, etag)
            else:
                _remove_stale_record(etag_path)
        self.durability.directory(self.directory, self.what)

    def _write_record(self, etag_path: str, etag: str) -> None:
        """The ETag record of this file at etag_path. It only saves reading the file again for
        its MD5, and names the file it describes: one lost or torn in a crash is ignored and the
        MD5 recomputed, so it needs no fsync of its own (the directory's covers its rename)."""
        content = json.dumps({"etag": etag, "file": _fingerprint(os.fstat(self.fd))}).encode()
        with _TempFile(self.directory, self.what, self.durability) as rec:
            _write_all(rec.fd, content)
            os.replace(rec.path, etag_path)
            rec._published = True


def _remove_stale_record(etag_path: str) -> None:
    """Remove whatever ETag record is at etag_path, after an object without one was put there.

    Any record there names another file: the one just replaced, or one a delete, a failed
    rename or a crash freed, whose inode number a new file can be given again (with the same
    size and, on a coarse clock, mtime, the fingerprint would match). Always tried, even where
    nothing was at the path, and best effort: the object is already in place, and a record
    that survives is still checked against the file's fingerprint."""
    with contextlib.suppress(OSError):
        os.unlink(etag_path)


def _read_etag_record(target: _Target, st: os.stat_result) -> str | None:
    try:
        with open(target.etag_path, "rb") as f:
            record = json.loads(f.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("file") != _fingerprint(st):
        return None
    etag = record.get("etag")
    return etag if isinstance(etag, str) else None


class LocalAdapter(BlockAdapter):
    scheme = "local"

    def __init__(
        self, root: str | os.PathLike[str], *, sync: SyncMode = "fsync", syncer: GroupSync | None = None
    ) -> None:
        """`sync` is blockstore.local.sync: how puts are made durable (silt/block/groupsync.py).
        `syncer` replaces it (tests pass one with a fault-injecting fsync)."""
        path = os.path.expanduser(os.fspath(root))
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create blockstore.local.path {path}: {exc.strerror}") from None
        # Resolved once: everything below is checked against the real root.
        self._root = os.path.realpath(path)
        self._uploads = os.path.join(self._root, _UPLOADS)
        self._syncer = syncer if syncer is not None else default_syncer(sync)
        self._durability = _Durability(self._root, self._syncer)

    def close(self) -> None:
        """Refuse further writes once a sync batch in progress has finished (reads still work)."""
        self._syncer.close()

    @property
    def root(self) -> str:
        return self._root

    # --- paths ---------------------------------------------------------------------

    def _target(self, namespace: str, key: str) -> _Target:
        target, _ = self._located(namespace, key)
        return target

    def _located(self, namespace: str, key: str) -> tuple[_Target, bool]:
        """The object's validated target, and whether every directory above it exists."""
        name, prefix = split_namespace(namespace, self.scheme)
        parts = [name, *prefix, *split_key(key)]
        what = f"{namespace} {key!r}"
        for part in parts:
            if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
                raise InvalidArgument(
                    f"{what}: path components are limited to {MAX_COMPONENT_BYTES} bytes on a local blockstore"
                )
        path = os.path.join(self._root, *parts)
        directory, base = os.path.split(path)
        target = _Target(path, directory, base, "/".join(parts), what)
        return target, self._check_contained(target)

    def _check_contained(self, target: _Target) -> bool:
        """Refuse a path that passes through a symbolic link; say whether its directories all exist.

        Components are never empty, "." or "..", and the root was resolved when the adapter was
        made, so a walk that meets no link proves the path stays under the root: resolving it
        again (realpath) would only repeat the same lstat calls.
        """
        parts = target.relpath.split("/")
        last = len(parts) - 1
        current = self._root
        with _mapped(target.what):
            try:
                root_mode = os.lstat(current).st_mode
            except FileNotFoundError:
                return False  # the root was removed: creating the directories brings it back
            if stat.S_ISLNK(root_mode):
                raise InvalidArgument(f"{target.what}: the blockstore root is now a symbolic link; refused")
            for depth, part in enumerate(parts):
                current = os.path.join(current, part)
                try:
                    st = os.lstat(current)
                except (FileNotFoundError, NotADirectoryError):
                    return depth == last  # nothing exists below a missing component
                if stat.S_ISLNK(st.st_mode):
                    raise InvalidArgument(f"{target.what}: path passes through a symbolic link; refused")
                if depth < last and not stat.S_ISDIR(st.st_mode):
                    return False  # creating the directories reports the object in the way
        return True

    def _make_directory(self, target: _Target, exists: bool = False) -> None:
        """Create the directories above target, unless the containment walk saw them all."""
        if exists:
            return
        made, current = [], target.directory
        while current != self._root and not os.path.lexists(current):
            made.append(current)
            current = os.path.dirname(current)
        self._durability.forget(made)
        try:
            os.makedirs(target.directory, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InvalidArgument(f"{target.what}: a leading part of the key is an existing object") from None
        except OSError as exc:
            raise _error(exc, target.what) from None
        # Again after creating: a directory may have been swapped for a link meanwhile.
        self._check_contained(target)

    def _open(self, target: _Target) -> tuple[int, os.stat_result]:
        """Open the object's file for reading; NotFound unless it is a regular file."""
        with _mapped(target.what):
            fd = os.open(target.path, _OPEN_FLAGS)
        try:
            with _mapped(target.what):
                st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotFound(f"{target.what}: no such object")
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def _etag(self, target: _Target, fd: int, st: os.stat_result) -> str:
        etag = _read_etag_record(target, st)
        if etag is None:
            with _mapped(target.what):
                etag = _md5_of_fd(fd, st.st_size)
        return etag

    # --- objects -------------------------------------------------------------------

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        return self._put(namespace, key, stream, size, replace=True)

    def put_if_absent(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        return self._put(namespace, key, stream, size, replace=False)

    def _put(self, namespace: str, key: str, stream: BinaryIO, size: int | None, *, replace: bool) -> PutResult:
        """Write the stream to a temporary file, then rename it over the object (`replace`) or link
        it into place only if there is none (AlreadyExists otherwise)."""
        target, exists = self._located(namespace, key)
        self._make_directory(target, exists)
        with _TempFile(target.directory, target.what, self._durability) as tmp:
            total, digest = _copy_stream(stream, tmp.fd, size, target.what)
            etag = digest.hex()
            # A small object's ETag is the MD5 of its bytes, as cheap to recompute from one read
            # as its record is to read: it gets none, which saves a put four file-system calls.
            recorded = etag if total > RECORDLESS_BYTES else None
            if replace:
                tmp.publish(target.path, target.etag_path, recorded)
            else:
                tmp.publish_new(target.path, target.etag_path, recorded)
        return PutResult(size=total, etag=etag)

    def get(self, namespace: str, key: str) -> BinaryIO:
        target = self._target(namespace, key)
        fd, st = self._open(target)
        return io.BufferedReader(_FileReader(fd, 0, st.st_size, target.what), _READ_BUFFER)

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        check_range(start, end)
        target = self._target(namespace, key)
        fd, st = self._open(target)
        if start >= st.st_size:
            os.close(fd)
            raise InvalidArgument(f"{target.what}: range {start}-{end} starts beyond the object's {st.st_size} bytes")
        # Like HTTP, a range that runs past the end is cut at the end.
        end = min(end, st.st_size - 1)
        return io.BufferedReader(_FileReader(fd, start, end - start + 1, target.what), _READ_BUFFER)

    def stat(self, namespace: str, key: str) -> ObjectStat:
        target = self._target(namespace, key)
        fd, st = self._open(target)
        try:
            etag = self._etag(target, fd, st)
        finally:
            os.close(fd)
        return ObjectStat(size=st.st_size, etag=etag, mtime=datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC))

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        name, parts = split_namespace(namespace, self.scheme)
        base = os.path.join(self._root, name, *parts)
        # Start in the deepest directory the prefix names whole; the rest of it filters names.
        head, _, _ = prefix.rpartition("/")
        start = head + "/" if head else ""
        if head and any(part in ("", ".", "..") or part.startswith(RESERVED_PREFIX) for part in head.split("/")):
            return
        directory = os.path.join(base, *head.split("/")) if head else base
        if not self._under_root_without_links(directory):
            return
        for key in self._walk_sorted(directory, start, prefix, after):
            try:
                found = self.stat(namespace, key)
            except NotFound:
                continue  # deleted since its directory was read
            yield ListedObject(key, found.size, found.etag, found.mtime)

    def _under_root_without_links(self, directory: str) -> bool:
        current = self._root
        for part in os.path.relpath(directory, self._root).split(os.sep):
            current = os.path.join(current, part)
            try:
                if not stat.S_ISDIR(os.lstat(current).st_mode):
                    return False
            except OSError:
                return False
        return True

    def _walk_sorted(self, directory: str, base: str, prefix: str, after: str) -> Iterator[str]:
        """Keys of the regular files below `directory` (whose keys start with `base`), in UTF-8 byte
        order: a directory's keys all start with "<name>/", so entries sort by that spelling."""
        try:
            with os.scandir(directory) as found:
                entries = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in found]
        except OSError:
            return
        after_bytes = after.encode()
        for entry_name, is_dir, is_file in sorted(entries, key=lambda e: (e[0] + ("/" if e[1] else "")).encode()):
            if entry_name.startswith(RESERVED_PREFIX):
                continue
            if is_dir:
                below = base + entry_name + "/"
                if not (below.startswith(prefix) or prefix.startswith(below)):
                    continue
                # Every key below sorts before `after` when `after` is greater and does not start with it.
                if after and after_bytes > below.encode() and not after.startswith(below):
                    continue
                yield from self._walk_sorted(os.path.join(directory, entry_name), below, prefix, after)
            elif is_file:
                key = base + entry_name
                if key.startswith(prefix) and key.encode() > after_bytes:
                    yield key

    def delete(self, namespace: str, key: str) -> None:
        target = self._target(namespace, key)
        if self._unlink(target):
            self._durability.directory(target.directory, target.what)

    def delete_many(self, namespace: str, keys: Sequence[str]) -> None:
        check_delete_batch(keys)
        # Every unlink first, then one sync per directory: a garbage collector's sweep deletes
        # thousands of objects from one `data/` directory, and a sync each was its whole cost.
        directories: dict[str, str] = {}
        for target in [self._target(namespace, key) for key in keys]:
            if self._unlink(target):
                directories.setdefault(target.directory, target.what)
        for directory, what in directories.items():
            self._durability.directory(directory, what)

    def _unlink(self, target: _Target) -> bool:
        """Remove the object's file and ETag record; whether there was an object (a directory, or
        anything else that is not a regular file, is not one)."""
        with _mapped(target.what):
            try:
                st = os.lstat(target.path)
            except (FileNotFoundError, NotADirectoryError):
                return False
            if not stat.S_ISREG(st.st_mode):
                return False
            # The record goes first: a crash in between leaves bytes without a record, whose
            # ETag is then recomputed, rather than a record that could outlive its file.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target.etag_path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target.path)
        return True

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        src = self._target(src_namespace, src_key)
        dst = self._target(dst_namespace, dst_key)
        fd, st = self._open(src)
        try:
            # The copy has the same bytes, so it keeps the source's ETag (multipart form
            # included); unlike S3, which gives a copied multipart object its plain MD5.
            etag = self._etag(src, fd, st)
            # Walked again: computing the ETag may have read the whole source, time enough
            # for a directory on the destination's path to be swapped for a link.
            self._make_directory(dst, self._check_contained(dst))
            with _TempFile(dst.directory, dst.what, self._durability) as tmp:
                with _mapped(f"copying {src.what} to {dst.what}"):
                    _copy_fd_range(fd, tmp.fd, 0, st.st_size)
                tmp.publish(dst.path, dst.etag_path, etag)
        finally:
            os.close(fd)
        return PutResult(size=st.st_size, etag=etag)

    # --- multipart uploads -----------------------------------------------------------

    def _upload_dir(self, target: _Target, upload_id: str) -> str:
        """The directory of a multipart upload of target; NotFound if there is none."""
        if not isinstance(upload_id, str) or not _UPLOAD_ID.fullmatch(upload_id):
            raise NotFound(f"{target.what}: no multipart upload {upload_id!r}")
        path = os.path.join(self._uploads, upload_id)
        try:
            with open(os.path.join(path, _UPLOAD_TARGET), "rb") as f:
                record = json.loads(f.read(64 * 1024))
        except FileNotFoundError:
            raise NotFound(f"{target.what}: no multipart upload {upload_id!r}") from None
        except (OSError, ValueError) as exc:
            raise Unavailable(f"local blockstore: reading multipart upload {upload_id}: {exc}") from None
        if not isinstance(record, dict) or record.get("path") != target.relpath:
            raise NotFound(f"{target.what}: no multipart upload {upload_id!r} for this key")
        return path

    def create_multipart_upload(self, namespace: str, key: str) -> str:
        target = self._target(namespace, key)
        upload_id = secrets.token_hex(16)
        path = os.path.join(self._uploads, upload_id)
        with _mapped(target.what):
            os.makedirs(path)
            # A directory without its record (a crash right here) is not an upload.
            with _TempFile(path, target.what, self._durability) as tmp:
                _write_all(tmp.fd, json.dumps({"path": target.relpath}).encode())
                tmp.publish(os.path.join(path, _UPLOAD_TARGET))
        return upload_id

    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        target = self._target(part.namespace, part.key)
        path = self._upload_dir(target, part.upload_id)
        with _TempFile(path, target.what, self._durability) as tmp:
            _, digest = _copy_stream(stream, tmp.fd, size, target.what)
            tmp.publish(os.path.join(path, f"part-{part.number:05d}"))
        return PartInfo(part_number=part.number, etag=digest.hex())

    def _copy_part(self, part: UploadPart, source: CopySource) -> PartInfo:
        target = self._target(part.namespace, part.key)
        src = self._target(source.namespace, source.key)
        path = self._upload_dir(target, part.upload_id)
        fd, st = self._open(src)
        try:
            start, end = (0, st.st_size - 1) if source.byte_range is None else source.byte_range
            # Unlike get_range, and like S3's UploadPartCopy, the range must lie inside the source.
            if source.byte_range is not None and end >= st.st_size:
                raise InvalidArgument(
                    f"{src.what}: copy range {start}-{end} is outside the object's {st.st_size} bytes"
                )
            md5 = BackgroundMD5()
            with _TempFile(path, target.what, self._durability) as tmp:
                with _mapped(f"copying {src.what}"):
                    _copy_fd_range(fd, tmp.fd, start, end - start + 1, md5)
                tmp.publish(os.path.join(path, f"part-{part.number:05d}"))
        finally:
            os.close(fd)
        return PartInfo(part_number=part.number, etag=md5.hexdigest())

    def _complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        target = self._target(namespace, key)
        path = self._upload_dir(target, upload_id)
        self._make_directory(target)
        digests: list[bytes] = []
        total = 0
        with _TempFile(target.directory, target.what, self._durability) as tmp, EarlyFlush(tmp.fd) as flush:
            for part in parts:
                part_path = os.path.join(path, f"part-{part.part_number:05d}")
                try:
                    fd = os.open(part_path, _OPEN_FLAGS)
                except FileNotFoundError:
                    raise InvalidArgument(f"{target.what}: part {part.part_number} was not uploaded") from None
                except OSError as exc:
                    raise _error(exc, target.what) from None
                md5 = BackgroundMD5()
                try:
                    with _mapped(target.what):
                        size = os.fstat(fd).st_size
                        _copy_fd_range(fd, tmp.fd, 0, size, md5)
                        flush.wrote(size)
                finally:
                    os.close(fd)
                # Checked against the bytes themselves: no part metadata can go stale.
                if md5.hexdigest() != normalize_etag(part.etag):
                    raise InvalidArgument(f"{target.what}: part {part.part_number} does not have ETag {part.etag}")
                digests.append(md5.digest())
                total += size
            etag = multipart_etag(digests)
            with _mapped(target.what):
                flush.finish()
            tmp.publish(target.path, target.etag_path, etag)
        shutil.rmtree(path, ignore_errors=True)
        return PutResult(size=total, etag=etag)

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        target = self._target(namespace, key)
        path = self._upload_dir(target, upload_id)
        # The record goes first, so a half-removed upload is already unknown to every call.
        with _mapped(target.what):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(path, _UPLOAD_TARGET))
            shutil.rmtree(path, ignore_errors=True)
