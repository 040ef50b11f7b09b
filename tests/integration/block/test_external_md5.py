"""A local external file's MD5 is read from its bytes once per version of the file, not on every
link or stageObject that names it (silt/block/external.py ExternalFiles.describe)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from silt.block import external
from silt.block.external import ExternalFiles


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses whose bytes describe read for their MD5, in order."""
    reads: list[str] = []
    read = external.file_md5

    def counted(fd: int, address: str) -> str:
        reads.append(address)
        return read(fd, address)

    monkeypatch.setattr(external, "file_md5", counted)
    return reads


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def test_a_files_md5_is_read_once_until_the_file_changes(tmp_path: Path, hashed: list[str]) -> None:
    path = tmp_path / "part-0.csv"
    path.write_bytes(b"id,name\n1,a\n")
    address = f"local://{path}"
    # A clock past the file's last change by more than RACY_SECONDS: the MD5 may be remembered.
    files = ExternalFiles([f"local://{tmp_path}"], clock=lambda: time.time() + external.RACY_SECONDS + 1)
    first = files.describe(address)
    assert [files.describe(address) for _ in range(5)] == [first] * 5
    assert first.etag == _md5(b"id,name\n1,a\n") and hashed == [address]

    # Rewritten with as many bytes and its old modification time put back: the change time
    # still moves, so the MD5 is read again.
    stat = os.stat(path)
    path.write_bytes(b"id,name\n1,b\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = files.describe(address)
    assert again.etag == _md5(b"id,name\n1,b\n") and again.mtime_ns == first.mtime_ns
    assert hashed == [address, address]


def test_a_file_changed_just_now_is_not_remembered(tmp_path: Path, hashed: list[str]) -> None:
    path = tmp_path / "fresh.csv"
    path.write_bytes(b"fresh")
    files = ExternalFiles([f"local://{tmp_path}"])  # the real clock: the file changed just now
    address = f"local://{path}"
    assert files.describe(address).etag == files.describe(address).etag == _md5(b"fresh")
    assert hashed == [address, address]


def test_remembered_md5s_are_bounded(tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(external, "MD5_CACHE", 2)
    files = ExternalFiles([f"local://{tmp_path}"], clock=lambda: time.time() + external.RACY_SECONDS + 1)
    addresses = []
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(name.encode())
        addresses.append(f"local://{tmp_path / name}")
    for address in addresses:
        files.describe(address)
    files.describe(addresses[2])  # remembered
    files.describe(addresses[0])  # the oldest, forgotten
    assert hashed == [*addresses, addresses[0]]
