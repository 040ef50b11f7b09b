"""What `silt local` knows about a local checkout: its `.lakefs_ref.yaml` (lakectl's file, same
keys), the files in it, and how they differ from the objects of the commit it was synced at.

A file is unchanged when its size and mtime (in nanoseconds) match the object's; the object's
mtime is the `client-mtime` user metadata `silt local commit` uploads with (the file's own
mtime), else its last-modified time, and downloads set the file's mtime to it. Where the size
matches but the mtime does not, the content decides: the file's MD5 against the object's ETag.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from cli.common import directory_prefix
from silt.client_base import EXIT_FAILURE, EXIT_NOT_FOUND, ClientError, parse_uri
from silt.graveler.v1 import model_pb2 as pb

REF_FILE = ".lakefs_ref.yaml"
# User metadata (x-amz-meta-*) holding the local file's mtime, in nanoseconds.
MTIME_META = "client-mtime"
_MTIME_HEADER = "x-amz-meta-" + MTIME_META
_MULTIPART_CHUNK = 8 * 1024 * 1024  # boto3's default part size

ADDED, MODIFIED, REMOVED = "added", "modified", "removed"


@dataclass(frozen=True)
class Source:
    """A checkout's `.lakefs_ref.yaml`: where it comes from and the commit it was synced at."""

    repo: str
    ref: str
    path: str
    at_head: str

    @property
    def prefix(self) -> str:
        """The key prefix of the checkout's objects ("" for the whole ref)."""
        return directory_prefix(self.path)

    @property
    def src(self) -> str:
        return f"lakefs://{self.repo}/{self.ref}/{self.prefix}"


@dataclass(frozen=True)
class LocalFile:
    path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Change:
    path: str  # relative to the checkout's root, "/"-separated
    kind: str  # ADDED, MODIFIED or REMOVED


def read_source(root: Path) -> Source:
    ref_file = root / REF_FILE
    if not ref_file.is_file():
        raise ClientError(f"{root} is not a local checkout (no {REF_FILE}); use `silt local clone`", EXIT_NOT_FOUND)
    try:
        data = yaml.safe_load(ref_file.read_text()) or {}
        repo, ref, path = parse_uri(str(data["src"]))
        return Source(repo, ref, path, str(data.get("at_head") or ""))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ClientError) as exc:
        raise ClientError(f"cannot read {ref_file}: {exc}", EXIT_FAILURE) from None


def write_source(root: Path, source: Source) -> None:
    ref_file = root / REF_FILE
    tmp = ref_file.with_name(REF_FILE + ".tmp")
    tmp.write_text(yaml.safe_dump({"src": source.src, "at_head": source.at_head}, sort_keys=False))
    tmp.replace(ref_file)


def find_checkouts(top: Path) -> list[Path]:
    """Directories under top (top included) holding a REF_FILE; not inside checkouts, not
    through symlinks."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        if REF_FILE in filenames:
            found.append(Path(dirpath))
            dirnames.clear()
        else:
            dirnames.sort()
    return found


def local_path(root: Path, rel: str) -> Path:
    """Where the object rel goes under root; refuses names that would leave it (`..`, absolute
    paths, a symlinked directory on the way)."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in rel:
        raise ClientError(f"refusing unsafe path {rel!r}: it would leave the checkout", EXIT_FAILURE)
    target = root.joinpath(*parts)
    base = root.resolve()
    parent = target.parent
    while parent != root and not parent.exists():
        parent = parent.parent
    if not parent.resolve().is_relative_to(base) or target.is_symlink():
        raise ClientError(f"refusing path {rel!r}: a symlink leads out of the checkout", EXIT_FAILURE)
    return target


def scan(root: Path) -> dict[str, LocalFile]:
    """Regular files under root by relative path, REF_FILE aside; symlinks are never followed."""
    files: dict[str, LocalFile] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
        for name in filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if rel == REF_FILE or rel.startswith(REF_FILE + ".") or path.is_symlink() or not path.is_file():
                continue
            st = path.stat()
            files[rel] = LocalFile(path, st.st_size, st.st_mtime_ns)
    return files


def entry_mtime_ns(entry: pb.Entry) -> int:
    """The object's mtime in nanoseconds: its client-mtime metadata, else its last-modified time."""
    for key, value in entry.metadata.items():
        if key.lower() in (_MTIME_HEADER, MTIME_META):
            try:
                mtime = int(value)
            except ValueError:
                break
            return mtime if mtime > 10**12 else mtime * 10**9  # whole seconds, as lakectl writes it
    return entry.last_modified.seconds * 10**9 + entry.last_modified.nanos


def _multipart_etag(path: Path) -> str:
    """The ETag of this content uploaded in parts of boto3's default size: the MD5 of the
    parts' MD5s, and the part count."""
    digests = []
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_MULTIPART_CHUNK), b""):
            digests.append(hashlib.md5(chunk, usedforsecurity=False).digest())
    return hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest() + f"-{len(digests)}"


def _md5_hex(path: Path) -> str:
    md5 = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            md5.update(chunk)
    return md5.hexdigest()


def same_content(local: LocalFile, entry: pb.Entry) -> bool:
    if local.size != entry.size:
        return False
    if local.mtime_ns == entry_mtime_ns(entry):
        return True
    etag = entry.etag.strip('"')
    if "-" in etag:
        return _multipart_etag(local.path) == etag
    return _md5_hex(local.path) == etag


def local_changes(files: dict[str, LocalFile], committed: dict[str, pb.Entry]) -> list[Change]:
    """The checkout's files against the objects of the commit it was synced at."""
    changes = [Change(rel, ADDED) for rel in files if rel not in committed]
    changes += [Change(rel, REMOVED) for rel in committed if rel not in files]
    changes += [
        Change(rel, MODIFIED) for rel, f in files.items() if rel in committed and not same_content(f, committed[rel])
    ]
    return sorted(changes, key=lambda c: c.path)


def as_json(changes: Iterable[Change]) -> list[dict[str, str]]:
    return [{"path": c.path, "type": c.kind} for c in changes]
