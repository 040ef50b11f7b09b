"""Listing an import's sources in key order, streamed: nothing holds a whole listing.

* s3, gs and azure: the block adapter's listing (silt/block/registry.py list_under), in UTF-8
  byte order and page by page (S3: ListObjectsV2, 1,000 keys); one page is in memory at a time.
* Local: a depth-first walk that visits each directory's entries sorted as the keys they make
  would sort (a directory ``a`` as ``a/``, so ``a-b`` comes before ``a/x``), which makes the
  whole walk come out in key order. A directory's names are sorted in memory up to
  SORT_IN_MEMORY entries and beyond that in sorted runs spilled to a temporary file and merged,
  so even one directory of millions of files stays within a bounded amount of memory. Hidden
  entries (a leading ``.``), symbolic links and anything but regular files and directories are
  skipped, as lakeFS's local import does. The walk goes by open directories, never by path:
  each name is opened in its open parent without following a link (silt/block/beneath.py).
  The ETag of a file is the MD5 of its bytes, as lakeFS's local import makes it, so identical
  files compare equal in diffs and merges.

Every listing checks the order it promises: a source that breaks it fails the import rather
than producing a metarange out of order.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import stat
import struct
import tempfile
from collections.abc import Generator, Iterator
from typing import Any, BinaryIO, NamedTuple

from engine.features.imports.locations import OBJECT, Source
from engine.features.imports.names import name_problem, plain_name
from silt.block.adapter import BlockAdapter
from silt.block.beneath import DIRECTORY_FLAGS, LinkRefused, open_child
from silt.block.external import ExternalFiles
from silt.block.registry import list_under, store_for_uri
from silt.errors import InvalidArgument, NotFound, Unavailable

SORT_IN_MEMORY = 100_000
# Files up to this size are read in one call for their MD5; larger ones in pieces.
_WHOLE_READ = 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_RUN_HEADER = struct.Struct(">IB")


class Found(NamedTuple):
    """One source object: its key (s3) or absolute path (local), size, ETag and mtime."""

    name: str
    size: int
    etag: str
    mtime_ns: int
    version: str = ""  # the store's own version of it (ObjectStat.version), "" if none


def _mtime_ns(value: Any) -> int:
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


def list_store(adapter: BlockAdapter, source: Source) -> Iterator[Found]:
    """The objects under an object store's common_prefix source (s3, gs, azure), or the one object
    of an object source, through the block adapter (silt/block/registry.py's list_under: UTF-8 key
    order, a page at a time, the order checked)."""
    if source.kind == OBJECT:
        try:
            found = adapter.stat(source.bucket, source.key)
        except NotFound:
            raise NotFound(f"reading {source.path}: no such object") from None
        # The version only where a listing would give it too: one object imports as many do.
        version = found.version if store_for_uri(source.bucket).lists_versions else ""
        yield Found(source.key, found.size, found.etag, _mtime_ns(found.mtime), version)
        return
    for item in list_under(adapter, source.bucket, source.key):
        yield Found(item.key, item.size, item.etag, _mtime_ns(item.mtime), item.version)


def _md5_of(fd: int, size: int) -> str:
    if size <= _WHOLE_READ:
        return hashlib.md5(os.read(fd, size + 1), usedforsecurity=False).hexdigest()
    digest = hashlib.md5(usedforsecurity=False)
    while chunk := os.read(fd, _WHOLE_READ):
        digest.update(chunk)
    return digest.hexdigest()


def _file(dir_fd: int, name: str, path: str) -> Found | None:
    """A regular file as found now (None if it is gone, or no longer a regular file): opened by
    name in its open directory without following a link, its size and time from the open file,
    its MD5 from its bytes."""
    try:
        fd = open_child(dir_fd, name, _OPEN_FLAGS)
    except LinkRefused:
        return None  # replaced by a link since its directory was read
    except FileNotFoundError:
        return None  # deleted since its directory was read: not part of the import
    except OSError as exc:
        raise Unavailable(f"reading {path}: {exc.strerror or exc}") from None
    return _opened_file(fd, path)


def _opened_file(fd: int, path: str) -> Found | None:
    """Found of an open file (closed here), None unless it is a regular file."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return Found(path, st.st_size, _md5_of(fd, st.st_size), st.st_mtime_ns)
    except OSError as exc:
        raise Unavailable(f"reading {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _open_directory(dir_fd: int, name: str, path: str) -> int | None:
    """A subdirectory, opened by name in its open parent without following a link; None if it is
    gone or no longer a directory. A directory replaced by a link since its parent was read
    fails the import: what it points at is not below the import's directory."""
    try:
        return open_child(dir_fd, name, DIRECTORY_FLAGS)
    except LinkRefused:
        raise InvalidArgument(
            f"cannot import local://{path}: the directory was replaced by a symbolic link during the import"
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise Unavailable(f"reading {path}: {exc.strerror or exc}") from None


class _Child(NamedTuple):
    sort_key: bytes  # the name's bytes, with "/" after a directory's
    name: str
    is_dir: bool


def _write_run(run: list[_Child]) -> BinaryIO:
    spill = tempfile.TemporaryFile()  # noqa: SIM115  # closed by _read_run once merged
    for child in run:
        encoded = os.fsencode(child.name)
        spill.write(_RUN_HEADER.pack(len(encoded), child.is_dir))
        spill.write(encoded)
    spill.seek(0)
    return spill


def _read_run(spill: BinaryIO) -> Iterator[_Child]:
    with spill:
        while header := spill.read(_RUN_HEADER.size):
            length, is_dir = _RUN_HEADER.unpack(header)
            encoded = spill.read(length)
            yield _Child(encoded + (b"/" if is_dir else b""), os.fsdecode(encoded), bool(is_dir))


def _check_local_name(directory: str, name: str) -> None:
    # What check_name looks for, one directory entry at a time: its directory was checked on
    # the way down, so a walk checks each name once rather than each whole path.
    if plain_name(name):
        return
    problem = name_problem(name)
    if problem:
        raise InvalidArgument(f"cannot import {'local://' + directory + '/' + name!r}: {problem}")


def _children(dir_fd: int, directory: str) -> Generator[_Child]:
    """An open directory's visible regular files and directories (`directory` names it in
    messages), in key order, within bounded memory."""
    runs: list[BinaryIO] = []
    batch: list[_Child] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    _check_local_name(directory, name)
                    batch.append(_Child(os.fsencode(name) + b"/", name, True))
                elif entry.is_file(follow_symlinks=False):
                    _check_local_name(directory, name)
                    batch.append(_Child(os.fsencode(name), name, False))
                if len(batch) >= SORT_IN_MEMORY:
                    batch.sort()
                    runs.append(_write_run(batch))
                    batch = []
        batch.sort()
        if not runs:
            yield from batch
            return
        runs.append(_write_run(batch))
        batch = []
        yield from heapq.merge(*(_read_run(run) for run in runs))
    finally:
        for run in runs:
            run.close()


def walk_local(files: ExternalFiles, source: Source) -> Iterator[Found]:
    """The files of a local common_prefix source (a directory, walked in key order), or the one
    file of an object source.

    The walk holds each directory open on its way down and opens what it lists by name in that
    open directory, never following a link (silt/block/beneath.py): a directory swapped for a
    link while the walk is under way is refused, not followed out of the import's directory."""
    if source.kind == OBJECT:
        fd, _ = files.open_file("local://" + source.key)
        found = _opened_file(fd, source.key)
        if found is None:
            raise NotFound(f"local://{source.key}: no such file")
        yield found
        return
    top = files.open_directory(source.key)
    opened = [top]
    stack: list[Generator[_Child]] = [_children(top, source.key)]
    directories = [source.key]
    try:
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                directories.pop()
                os.close(opened.pop())
                continue
            path = directories[-1] + "/" + child.name
            if child.is_dir:
                below = _open_directory(opened[-1], child.name, path)
                if below is not None:
                    opened.append(below)
                    stack.append(_children(below, path))
                    directories.append(path)
                continue
            found = _file(opened[-1], child.name, path)
            if found is not None:
                yield found
    finally:
        for children in stack:
            children.close()  # its scandir and spilled runs
        for fd in opened:
            os.close(fd)


def check_name(source: Source, found: Found) -> None:
    """Refuse a source object no block adapter could address (its name below the source has an
    empty, ``.`` or ``..`` segment, a NUL or a backslash, names a ``_silt`` tree, or is not
    UTF-8), naming it. The source's own path was checked when the import started."""
    name = found.name[len(source.trim) :] if source.kind != OBJECT else found.name.lstrip("/")
    if found.size == 0 and name.endswith("/"):
        name = name[:-1]  # an S3 directory marker: no bytes to read, ever
    # Nearly every name passes this: plain ASCII with nothing that could need a closer look.
    if plain_name(name):
        return
    problem = name_problem(name)
    if problem:
        raise InvalidArgument(f"cannot import {source.address_of(found.name)!r}: {problem}")
