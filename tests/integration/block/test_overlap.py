"""Hashing and flushing beside a large write (silt/block/overlap.py), alone and inside the
local adapter: the digest is exactly hashlib's, flushes really run, their errors fail the
write, and a flush only ever touches its own duplicate of the file's descriptor."""

from __future__ import annotations

import errno
import hashlib
import io
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from silt.block import overlap
from silt.block.local import LocalAdapter
from silt.block.overlap import BackgroundMD5, EarlyFlush
from silt.errors import NotFound, Unavailable
from tests.integration.block.streams import GeneratorStream, MiB, pattern_chunks
from tests.support.wait import wait_until

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


def _spy_submit(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(pool, bytes) of every task handed to a pool; the tasks still run."""
    handed: list[tuple[str, int]] = []
    real = overlap._submit

    def submit(kind: str, fn: Any, *args: Any) -> Any:
        handed.append((kind, len(args[0]) if kind == "hash" else args[0]))
        return real(kind, fn, *args)

    monkeypatch.setattr(overlap, "_submit", submit)
    return handed


def test_only_large_immutable_chunks_are_hashed_off_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = _spy_submit(monkeypatch)
    md5 = BackgroundMD5()
    refillable = bytearray(b"x" * (2 * MiB))
    md5.update(os.urandom(2 * MiB))
    md5.update(refillable)
    md5.update(memoryview(os.urandom(2 * MiB)))
    md5.update(os.urandom(overlap.INLINE_HASH_BYTES - 1))
    md5.update(os.urandom(overlap.INLINE_HASH_BYTES))
    # A buffer the caller may refill was hashed before update returned.
    refillable[:] = b"y" * (2 * MiB)
    md5.digest()
    assert handed == [("hash", 2 * MiB), ("hash", overlap.INLINE_HASH_BYTES)]


def test_a_hash_that_times_out_breaks_the_digest_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overlap, "WAIT_SECONDS", 0.1)
    never: Future[None] = Future()
    monkeypatch.setattr(overlap, "_submit", lambda kind, fn, *args: never)
    md5 = BackgroundMD5()
    md5.update(os.urandom(MiB))
    with pytest.raises(Unavailable, match="hashing"):
        md5.digest()
    # The abandoned chunk could still land later: no digest may be given out any more.
    with pytest.raises(Unavailable, match="hashing"):
        md5.update(b"more")
    assert never.cancelled()


def _spy_fdatasync(
    monkeypatch: pytest.MonkeyPatch, delay: float = 0.0, fail: bool = False, gate: threading.Event | None = None
) -> list[tuple[str, int]]:
    events: list[tuple[str, int]] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        events.append(("start", fd))
        if gate is not None:
            gate.wait(30)
        time.sleep(delay)
        if fail:
            events.append(("failed", fd))
            raise OSError(errno.EIO, "Input/output error")
        real(fd)
        events.append(("done", fd))

    monkeypatch.setattr(overlap.os, "fdatasync", fdatasync)
    return events


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError as exc:
        return exc.errno == errno.EBADF
    return False


def test_early_flush_starts_flushes_while_writing_on_its_own_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _spy_fdatasync(monkeypatch, delay=0.01)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with EarlyFlush(fd) as flush:
            for _ in range(3 * overlap.FLUSH_EVERY_BYTES // MiB):
                os.write(fd, b"z" * MiB)
                flush.wrote(MiB)
                time.sleep(0.002)
    finally:
        os.close(fd)
    starts = [flushed for kind, flushed in events if kind == "start"]
    assert len(starts) >= 2
    assert fd not in starts  # each flush works on a duplicate
    assert events[-1][0] == "done"  # leaving waited for the one under way
    wait_until(lambda: all(_closed(d) for d in starts), 5, "the duplicates closed")


def test_early_flush_error_is_raised_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _spy_fdatasync(monkeypatch, fail=True)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="Input/output"), EarlyFlush(fd) as flush:
            flush.wrote(overlap.FLUSH_EVERY_BYTES)
            # The flush has run and failed before finish looks.
            wait_until(lambda: any(kind == "failed" for kind, _ in events), 5, "the early flush failing")
    finally:
        os.close(fd)


def test_a_flush_that_times_out_never_touches_a_file_that_reuses_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overlap, "WAIT_SECONDS", 0.2)
    gate = threading.Event()
    events = _spy_fdatasync(monkeypatch, gate=gate)
    fd = os.open(tmp_path / "a", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(Unavailable, match="flushing"), EarlyFlush(fd) as flush:
        flush.wrote(overlap.FLUSH_EVERY_BYTES)
        wait_until(lambda: bool(events), 5, "the flush started")
    os.close(fd)
    reused = os.open(tmp_path / "b", os.O_WRONLY | os.O_CREAT)
    try:
        gate.set()
        wait_until(lambda: len(events) == 2, 5, "the stray flush ended")
        assert events[0][1] not in (fd, reused)
        wait_until(lambda: _closed(events[0][1]), 5, "its duplicate closed")
    finally:
        os.close(reused)


def test_a_failed_write_leaves_its_flush_on_its_own_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    events = _spy_fdatasync(monkeypatch, gate=gate)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(RuntimeError, match="client went away"), EarlyFlush(fd) as flush:
        flush.wrote(overlap.FLUSH_EVERY_BYTES)
        wait_until(lambda: bool(events), 5, "the flush started")
        raise RuntimeError("client went away")
    os.close(fd)  # the caller discards its file at once
    gate.set()
    wait_until(lambda: len(events) == 2, 5, "the flush ended")
    assert events[1][0] == "done"  # on its duplicate, still open


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
    assert [kind for kind, _ in events].count("start") >= 1

    upload = adapter.create_multipart_upload(NS, "big/multi")
    parts = [data[: 17 * MiB], data[17 * MiB :]]
    infos = [
        adapter.upload_part(NS, "big/multi", upload, n, io.BytesIO(part), len(part)) for n, part in enumerate(parts, 1)
    ]
    assert [info.etag for info in infos] == [hashlib.md5(p).hexdigest() for p in parts]
    events.clear()
    done = adapter.complete_multipart_upload(NS, "big/multi", upload, infos)
    assert done.size == size
    assert [kind for kind, _ in events].count("start") >= 1  # the concatenation flushed early too
    with adapter.get(NS, "big/multi") as stream:
        assert stream.read() == data


def test_a_flush_error_fails_multipart_completion_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = LocalAdapter(tmp_path / "root")
    parts = [os.urandom(17 * MiB), os.urandom(17 * MiB), os.urandom(MiB)]
    upload = adapter.create_multipart_upload(NS, "big/multi")
    infos = [
        adapter.upload_part(NS, "big/multi", upload, n, io.BytesIO(part), len(part)) for n, part in enumerate(parts, 1)
    ]
    _spy_fdatasync(monkeypatch, fail=True)
    with pytest.raises(Unavailable, match="Input/output"):
        adapter.complete_multipart_upload(NS, "big/multi", upload, infos)
    with pytest.raises(NotFound):
        adapter.stat(NS, "big/multi")


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
    size = overlap.FLUSH_EVERY_BYTES + 4 * MiB + 1  # each put flushes early once
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def put(seed: int) -> None:
        try:
            results[seed] = adapter.put(
                NS, f"c/{seed}", GeneratorStream(pattern_chunks(size, seed=seed)).binary(), size
            ).etag
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    for seed in range(4):
        assert results[seed] == hashlib.md5(b"".join(pattern_chunks(size, seed=seed))).hexdigest()


def _hash_in_child(data: bytes, expected: str) -> None:
    md5 = BackgroundMD5()
    md5.update(data)
    raise SystemExit(0 if md5.hexdigest() == expected else 3)


def test_a_forked_child_gets_pools_of_its_own() -> None:
    data = os.urandom(2 * MiB)
    expected = hashlib.md5(data).hexdigest()
    parent = BackgroundMD5()
    parent.update(data)  # the parent's pool now has threads, which a child does not inherit
    assert parent.hexdigest() == expected
    child = multiprocessing.get_context("fork").Process(target=_hash_in_child, args=(data, expected))
    child.start()
    child.join(30)
    assert child.exitcode == 0
