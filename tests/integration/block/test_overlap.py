"""Hashing and flushing beside a large write (silt/block/overlap.py), alone and inside the
local adapter: the digest is exactly hashlib's, flushes really run, their errors fail the
write, and none outlives the file it flushes."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from silt.block import overlap
from silt.block.local import LocalAdapter
from silt.block.overlap import BackgroundMD5, EarlyFlush
from silt.errors import Unavailable
from tests.integration.block.streams import GeneratorStream, MiB, pattern_chunks

NS = "local://repo-ns"


def test_background_md5_equals_hashlib_over_mixed_chunks() -> None:
    pieces: list[Any] = [b"", b"a" * 10, os.urandom(3 * MiB), bytearray(os.urandom(MiB)), os.urandom(1000)]
    pieces += [os.urandom(overlap.INLINE_HASH_BYTES), memoryview(os.urandom(2 * MiB)), os.urandom(MiB + 7)]
    md5 = BackgroundMD5()
    for piece in pieces:
        md5.update(piece)
    expected = hashlib.md5(b"".join(bytes(p) for p in pieces)).hexdigest()
    assert md5.hexdigest() == expected
    assert md5.digest().hex() == expected  # digest is repeatable, as hashlib's


def test_background_md5_hashes_a_refillable_buffer_before_returning() -> None:
    # A bytearray may be refilled by the caller as soon as update returns.
    buffer = bytearray(b"x" * (2 * MiB))
    md5 = BackgroundMD5()
    md5.update(buffer)
    buffer[:] = b"y" * (2 * MiB)
    assert md5.hexdigest() == hashlib.md5(b"x" * (2 * MiB)).hexdigest()


def _spy_fdatasync(monkeypatch: pytest.MonkeyPatch, delay: float = 0.0, fail: bool = False) -> list[str]:
    events: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        events.append("start")
        time.sleep(delay)
        if fail:
            events.append("failed")
            raise OSError(errno.EIO, "Input/output error")
        real(fd)
        events.append("done")

    monkeypatch.setattr(overlap.os, "fdatasync", fdatasync)
    return events


def test_early_flush_starts_flushes_while_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _spy_fdatasync(monkeypatch)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with EarlyFlush(fd) as flush:
            for _ in range(3 * overlap.FLUSH_EVERY_BYTES // MiB):
                os.write(fd, b"z" * MiB)
                flush.wrote(MiB)
                time.sleep(0.001)
    finally:
        os.close(fd)
    assert events.count("start") >= 2
    assert events[-1] == "done"  # leaving waited for the last one


def test_early_flush_error_is_raised_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _spy_fdatasync(monkeypatch, fail=True)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="Input/output"), EarlyFlush(fd) as flush:
            flush.wrote(overlap.FLUSH_EVERY_BYTES)
    finally:
        os.close(fd)


def test_a_failed_write_waits_for_its_flush_before_the_file_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _spy_fdatasync(monkeypatch, delay=0.3)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(RuntimeError, match="client went away"), EarlyFlush(fd) as flush:
            flush.wrote(overlap.FLUSH_EVERY_BYTES)
            raise RuntimeError("client went away")
        assert events == ["start", "done"]
    finally:
        os.close(fd)


def test_large_put_and_multipart_are_byte_exact_with_flushes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _spy_fdatasync(monkeypatch)
    adapter = LocalAdapter(tmp_path / "root")
    size = 2 * overlap.FLUSH_EVERY_BYTES + 12345
    data = b"".join(pattern_chunks(size, seed=3))
    result = adapter.put(NS, "big/object", GeneratorStream(pattern_chunks(size, seed=3)).binary(), size)
    assert result.etag == hashlib.md5(data).hexdigest()
    assert adapter.stat(NS, "big/object").etag == result.etag
    with adapter.get(NS, "big/object") as stream:
        assert stream.read() == data
    assert events.count("start") >= 1

    upload = adapter.create_multipart_upload(NS, "big/multi")
    parts = [data[: 17 * MiB], data[17 * MiB :]]
    infos = [
        adapter.upload_part(NS, "big/multi", upload, n, io.BytesIO(part), len(part)) for n, part in enumerate(parts, 1)
    ]
    assert [info.etag for info in infos] == [hashlib.md5(p).hexdigest() for p in parts]
    done = adapter.complete_multipart_upload(NS, "big/multi", upload, infos)
    assert done.size == size
    with adapter.get(NS, "big/multi") as stream:
        assert stream.read() == data


def test_a_flush_error_fails_the_put_and_publishes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _spy_fdatasync(monkeypatch, fail=True)
    adapter = LocalAdapter(tmp_path / "root")
    size = 2 * overlap.FLUSH_EVERY_BYTES
    with pytest.raises(Unavailable, match="Input/output"):
        adapter.put(NS, "big/object", GeneratorStream(pattern_chunks(size)).binary(), size)
    leftovers = [p for p in (tmp_path / "root").rglob("*") if p.is_file()]
    assert leftovers == []


def test_concurrent_large_puts_each_get_their_own_digest(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "root")
    size = 6 * MiB + 1
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def put(seed: int) -> None:
        try:
            results[seed] = adapter.put(
                NS, f"c/{seed}", GeneratorStream(pattern_chunks(size, seed=seed)).binary(), size
            ).etag
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    for seed in range(8):
        assert results[seed] == hashlib.md5(b"".join(pattern_chunks(size, seed=seed))).hexdigest()
