"""The local adapter only: path safety, atomic writes, ETag records, on-disk layout."""

from __future__ import annotations

import io
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from silt.block import local as local_adapter
from silt.block import open_adapter
from silt.block.local import MAX_COMPONENT_BYTES, LocalAdapter
from silt.config import BlockstoreConfig, LocalBlockstoreConfig
from silt.errors import InvalidArgument, NotFound
from tests.integration.block.streams import GeneratorStream, MiB, md5_hex, multipart_etag, pattern_chunks
from tests.support.wait import wait_until

NS = "local://repo-ns"


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A directory holding the root and, beside it, what a key must never reach."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"top secret")
    return tmp_path


@pytest.fixture
def adapter(sandbox: Path) -> LocalAdapter:
    return LocalAdapter(sandbox / "root")


def ns_dir(adapter: LocalAdapter, namespace: str = NS) -> Path:
    return Path(adapter.root) / namespace.removeprefix("local://")


def put(adapter: LocalAdapter, key: str, data: bytes, namespace: str = NS) -> None:
    adapter.put(namespace, key, io.BytesIO(data))


def read(adapter: LocalAdapter, key: str, namespace: str = NS) -> bytes:
    with adapter.get(namespace, key) as stream:
        return stream.read()


def tree_outside_root(sandbox: Path) -> dict[str, bytes | None]:
    """Every path under the sandbox but outside the root, with file contents."""
    found: dict[str, bytes | None] = {}
    for path in sorted(sandbox.rglob("*")):
        if path.is_relative_to(sandbox / "root"):
            continue
        found[str(path)] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


def every_operation(adapter: LocalAdapter, namespace: str, key: str) -> Iterator[Callable[[], Any]]:
    """Each adapter call that takes this namespace and key, with otherwise valid arguments."""
    upload = adapter.create_multipart_upload(NS, "ok")
    yield lambda: adapter.put(namespace, key, io.BytesIO(b"pwned"))
    yield lambda: adapter.get(namespace, key)
    yield lambda: adapter.get_range(namespace, key, 0, 1)
    yield lambda: adapter.stat(namespace, key)
    yield lambda: adapter.delete(namespace, key)
    yield lambda: adapter.copy(NS, "ok", namespace, key)
    yield lambda: adapter.copy(namespace, key, NS, "copy")
    yield lambda: adapter.create_multipart_upload(namespace, key)
    yield lambda: adapter.upload_part(namespace, key, upload, 1, io.BytesIO(b"pwned"))
    yield lambda: adapter.upload_part_copy(NS, "ok", upload, 1, namespace, key)


# --- path safety ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "key"),
    [
        (NS, "../x"),
        (NS, "../../outside/secret"),
        (NS, "a/../../x"),
        (NS, "/etc/passwd"),
        (NS, "a\x00b"),
        (NS, "..\\..\\outside\\secret"),
        (NS, "a/./b"),
        (NS, ".silt-uploads"),
        ("local://../outside", "secret"),
        ("local://..", "outside/secret"),
        ("local://a/../../outside", "secret"),
        ("local:///etc", "passwd"),
        ("local://a\x00b", "x"),
        ("local://", "x"),
        ("local://.silt-uploads", "x"),
        ("file:///etc", "passwd"),
    ],
)
def test_escape_attempts_are_refused_and_write_nothing_outside_the_root(
    adapter: LocalAdapter, sandbox: Path, namespace: str, key: str
) -> None:
    put(adapter, "ok", b"fine")
    before = tree_outside_root(sandbox)
    for operation in every_operation(adapter, namespace, key):
        with pytest.raises(InvalidArgument):
            operation()
    assert tree_outside_root(sandbox) == before


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


@pytest.mark.parametrize(
    ("link", "namespace", "key"),
    [
        ("repo-ns/door", NS, "door/secret"),  # a directory link inside the namespace
        ("repo-ns/door", NS, "door/new/deeper"),  # ... that put would create directories under
        ("evil-ns", "local://evil-ns", "secret"),  # the namespace directory itself
        ("repo-ns/a/b", NS, "a/b/secret"),  # a deeper directory
    ],
)
def test_symlinked_directories_pointing_outside_are_refused(
    adapter: LocalAdapter, sandbox: Path, link: str, namespace: str, key: str
) -> None:
    put(adapter, "ok", b"fine")
    _link(Path(adapter.root) / link, sandbox / "outside")
    before = tree_outside_root(sandbox)
    for operation in every_operation(adapter, namespace, key):
        with pytest.raises(InvalidArgument):
            operation()
    assert tree_outside_root(sandbox) == before
    assert (sandbox / "outside" / "secret").read_bytes() == b"top secret"


def test_a_symlinked_object_is_refused(adapter: LocalAdapter, sandbox: Path) -> None:
    put(adapter, "ok", b"fine")
    _link(ns_dir(adapter) / "alias", sandbox / "outside" / "secret")
    before = tree_outside_root(sandbox)
    for operation in every_operation(adapter, NS, "alias"):
        with pytest.raises(InvalidArgument):
            operation()
    assert tree_outside_root(sandbox) == before


def test_symlinks_inside_the_root_are_refused_too(adapter: LocalAdapter) -> None:
    # Objects are regular files reached through real directories, with no exceptions.
    put(adapter, "real/object", b"bytes")
    _link(ns_dir(adapter) / "alias", ns_dir(adapter) / "real")
    with pytest.raises(InvalidArgument):
        read(adapter, "alias/object")


def test_a_root_behind_a_symlink_is_fine(sandbox: Path) -> None:
    (sandbox / "real-root").mkdir()
    (sandbox / "root-link").symlink_to(sandbox / "real-root")
    adapter = LocalAdapter(sandbox / "root-link")
    put(adapter, "k", b"through the configured link")
    assert read(adapter, "k") == b"through the configured link"
    assert (sandbox / "real-root" / "repo-ns" / "k").exists()


def test_a_root_swapped_for_a_link_after_start_is_refused(adapter: LocalAdapter, sandbox: Path) -> None:
    put(adapter, "k", b"before the swap")
    (sandbox / "root").rename(sandbox / "root-moved")
    (sandbox / "root").symlink_to(sandbox / "outside")
    before = tree_outside_root(sandbox)
    operations: list[Callable[[], Any]] = [
        lambda: adapter.put(NS, "k", io.BytesIO(b"pwned")),
        lambda: adapter.put(NS, "new/deeper", io.BytesIO(b"pwned")),
        lambda: adapter.get(NS, "k"),
        lambda: adapter.get_range(NS, "k", 0, 1),
        lambda: adapter.stat(NS, "k"),
        lambda: adapter.delete(NS, "k"),
        lambda: adapter.copy(NS, "k", NS, "copy"),
        lambda: adapter.create_multipart_upload(NS, "k"),
    ]
    for operation in operations:
        with pytest.raises(InvalidArgument, match="symbolic link"):
            operation()
    assert tree_outside_root(sandbox) == before
    assert (sandbox / "root-moved" / "repo-ns" / "k").read_bytes() == b"before the swap"


@pytest.mark.parametrize("key", ["a/b", "a/b/c", "a/b/c/d"])
def test_a_key_below_an_existing_object_is_refused(adapter: LocalAdapter, key: str) -> None:
    put(adapter, "a", b"an object, not a directory")
    with pytest.raises(InvalidArgument, match="existing object"):
        put(adapter, key, b"x")
    with pytest.raises(InvalidArgument, match="existing object"):
        adapter.copy(NS, "a", NS, key)
    assert read(adapter, "a") == b"an object, not a directory"


def test_a_put_into_existing_directories_looks_at_each_component_once(
    adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The walk that proves containment also proves the directories exist, so a put into them
    # neither creates directories nor walks again.
    key = "year=2026/month=11/day=24/part-0.parquet"
    put(adapter, key, b"first")
    looked: list[str] = []
    made: list[str] = []
    real_lstat, real_makedirs = os.lstat, os.makedirs

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        looked.append(os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    def makedirs(path: Any, *args: Any, **kwargs: Any) -> None:
        made.append(os.fspath(path))
        real_makedirs(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "makedirs", makedirs)
    put(adapter, key, b"second")
    adapter.copy(NS, key, NS, "year=2026/month=11/day=24/part-1.parquet")
    monkeypatch.undo()
    assert made == []
    # Per walk: the root and each of the target's five components (namespace, three directories,
    # name). The put walks once; the copy walks its source and its destination, and the
    # destination again once the source's ETag is known.
    assert len(looked) == 6 + 3 * 6
    assert read(adapter, key) == b"second"
    assert read(adapter, "year=2026/month=11/day=24/part-1.parquet") == b"second"


def test_a_destination_swapped_for_a_link_while_copy_reads_the_source_is_refused(
    adapter: LocalAdapter, sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With no ETag record (a small object has none), a copy reads its whole source for the MD5
    # first: for a large object that takes long enough for a destination directory to be
    # swapped for a link meanwhile.
    put(adapter, "source", b"bytes to copy")
    put(adapter, "d/existing", b"makes d a real directory")
    assert not (ns_dir(adapter) / ".silt-etag-source").exists()
    real_md5 = local_adapter._md5_of_fd

    def md5_then_swap(fd: int, size: int) -> str:
        digest = real_md5(fd, size)
        (ns_dir(adapter) / "d").rename(ns_dir(adapter) / "d-moved")
        _link(ns_dir(adapter) / "d", sandbox / "outside")
        return digest

    monkeypatch.setattr(local_adapter, "_md5_of_fd", md5_then_swap)
    before = tree_outside_root(sandbox)
    with pytest.raises(InvalidArgument, match="symbolic link"):
        adapter.copy(NS, "source", NS, "d/copy")
    assert tree_outside_root(sandbox) == before


def test_a_removed_root_is_made_again_by_the_next_put(adapter: LocalAdapter, sandbox: Path) -> None:
    put(adapter, "k", b"before")
    shutil.rmtree(sandbox / "root")
    with pytest.raises(NotFound):
        read(adapter, "k")
    put(adapter, "k", b"after")
    assert read(adapter, "k") == b"after"


def test_a_fifo_is_not_an_object_and_does_not_hang(adapter: LocalAdapter) -> None:
    ns_dir(adapter).mkdir(parents=True)
    os.mkfifo(ns_dir(adapter) / "pipe")
    with pytest.raises(NotFound):
        adapter.get(NS, "pipe")
    with pytest.raises(NotFound):
        adapter.stat(NS, "pipe")


def test_key_components_are_limited_by_the_file_system(adapter: LocalAdapter) -> None:
    put(adapter, "n" * MAX_COMPONENT_BYTES, b"longest")
    assert read(adapter, "n" * MAX_COMPONENT_BYTES) == b"longest"
    with pytest.raises(InvalidArgument):
        put(adapter, "n" * (MAX_COMPONENT_BYTES + 1), b"too long")


def test_a_key_cannot_be_both_an_object_and_a_directory(adapter: LocalAdapter) -> None:
    put(adapter, "a/b", b"inner")
    with pytest.raises(InvalidArgument):
        put(adapter, "a", b"outer")
    with pytest.raises(NotFound):
        adapter.stat(NS, "a")
    adapter.delete(NS, "a")  # a directory is no object: nothing to delete
    assert read(adapter, "a/b") == b"inner"
    put(adapter, "c", b"file")
    with pytest.raises(InvalidArgument):
        put(adapter, "c/d", b"below a file")


@pytest.mark.parametrize("upload", ["../../repo-ns", "..", "", "0" * 31, "0" * 32 + "/..", "G" * 32])
def test_upload_ids_are_never_paths(adapter: LocalAdapter, upload: str) -> None:
    with pytest.raises(NotFound):
        adapter.upload_part(NS, "k", upload, 1, io.BytesIO(b"x"))
    with pytest.raises(NotFound):
        adapter.abort_multipart_upload(NS, "k", upload)


def test_an_upload_id_belongs_to_its_key(adapter: LocalAdapter) -> None:
    upload = adapter.create_multipart_upload(NS, "mine")
    with pytest.raises(NotFound):
        adapter.upload_part(NS, "someone-else", upload, 1, io.BytesIO(b"x"))
    with pytest.raises(NotFound):
        adapter.abort_multipart_upload("local://other-ns", "mine", upload)
    adapter.abort_multipart_upload(NS, "mine", upload)


# --- atomicity -----------------------------------------------------------------------


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if not p.is_dir())


def failing_chunks(good_bytes: int) -> Iterator[bytes]:
    yield from pattern_chunks(good_bytes)
    raise ConnectionResetError("client went away")


def test_a_put_whose_stream_fails_leaves_nothing(adapter: LocalAdapter) -> None:
    with pytest.raises(ConnectionResetError):
        adapter.put(NS, "dir/broken", GeneratorStream(failing_chunks(3 * MiB)).binary())
    with pytest.raises(NotFound):
        adapter.stat(NS, "dir/broken")
    assert files_under(ns_dir(adapter)) == []


def test_a_failed_overwrite_keeps_the_old_object(adapter: LocalAdapter) -> None:
    put(adapter, "k", b"old and whole")
    with pytest.raises(ConnectionResetError):
        adapter.put(NS, "k", GeneratorStream(failing_chunks(2 * MiB)).binary())
    assert read(adapter, "k") == b"old and whole"
    assert adapter.stat(NS, "k").etag == md5_hex(b"old and whole")
    assert files_under(ns_dir(adapter)) == ["k"]  # small: no ETag record


class _StallingStream(io.RawIOBase):
    """Hands out `before_stall` bytes, signals through a file, then blocks forever."""

    def __init__(self, before_stall: int, signal_path: str) -> None:
        super().__init__()
        self._left = before_stall
        self._signal_path = signal_path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            Path(self._signal_path).touch()
            time.sleep(600)  # the scenario: the stream stalls until the process is killed
        count = min(len(buffer), self._left)
        buffer[:count] = b"x" * count
        self._left -= count
        return count


def _put_until_killed(root: str, signal_path: str) -> None:
    LocalAdapter(root).put(NS, "crashed", _StallingStream(3 * MiB, signal_path))  # type: ignore[arg-type]


def test_a_put_killed_midway_leaves_no_object(adapter: LocalAdapter, tmp_path: Path) -> None:
    put(adapter, "crashed", b"previous version")
    signal_path = tmp_path / "stalled"
    process = multiprocessing.get_context("spawn").Process(
        target=_put_until_killed, args=(adapter.root, str(signal_path))
    )

    def stalled() -> bool:
        assert process.is_alive(), "the writer died before it stalled"
        return signal_path.exists()

    process.start()
    try:
        wait_until(stalled, 60, "the writer under way", interval=0.02)
    finally:
        process.kill()  # SIGKILL: no cleanup code runs, like a crash
        process.join()
    assert read(adapter, "crashed") == b"previous version"
    leftovers = [name for name in os.listdir(ns_dir(adapter)) if name not in ("crashed", ".silt-etag-crashed")]
    assert len(leftovers) == 1 and leftovers[0].startswith(".silt-tmp-"), leftovers
    # The leftover is no object: no key can name it.
    with pytest.raises(InvalidArgument):
        adapter.stat(NS, leftovers[0])
    put(adapter, "crashed", b"next version")
    assert read(adapter, "crashed") == b"next version"


def test_readers_during_overwrites_see_one_version_whole(adapter: LocalAdapter) -> None:
    versions = [b"".join(pattern_chunks(MiB + 17, seed=s)) for s in range(3)]
    etags = {md5_hex(v) for v in versions}
    put(adapter, "hot", versions[0])
    done = threading.Event()
    problems: list[str] = []
    reads = [0]

    def reader() -> None:
        while not done.is_set():
            data = read(adapter, "hot")
            if md5_hex(data) not in etags:
                problems.append(f"torn read of {len(data)} bytes")
            info = adapter.stat(NS, "hot")
            if info.etag not in etags or info.size != MiB + 17:
                problems.append(f"stat showed {info}")
            reads[0] += 1

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for i in range(30):
            put(adapter, "hot", versions[i % 3])
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert problems == []
    assert reads[0] > 10


# --- ETag records and layout ---------------------------------------------------------


def test_objects_are_plain_files_under_the_root(adapter: LocalAdapter) -> None:
    put(adapter, "dir/data.parquet", b"PAR1...PAR1", namespace="local://repo-ns/prefix")
    assert (Path(adapter.root) / "repo-ns" / "prefix" / "dir" / "data.parquet").read_bytes() == b"PAR1...PAR1"


def _multipart(adapter: LocalAdapter, key: str, parts: list[bytes]) -> str:
    upload = adapter.create_multipart_upload(NS, key)
    infos = [adapter.upload_part(NS, key, upload, n, io.BytesIO(p)) for n, p in enumerate(parts, start=1)]
    return adapter.complete_multipart_upload(NS, key, upload, infos).etag


def test_a_multipart_etag_outlives_the_adapter(adapter: LocalAdapter) -> None:
    parts = [b"first part", b"second part"]
    etag = _multipart(adapter, "mp", parts)
    assert LocalAdapter(adapter.root).stat(NS, "mp").etag == etag == multipart_etag(parts)


def test_uploads_leave_nothing_behind(adapter: LocalAdapter) -> None:
    _multipart(adapter, "done", [b"a", b"b"])
    aborted = adapter.create_multipart_upload(NS, "aborted")
    adapter.upload_part(NS, "aborted", aborted, 1, io.BytesIO(b"x"))
    adapter.abort_multipart_upload(NS, "aborted", aborted)
    assert os.listdir(Path(adapter.root) / ".silt-uploads") == []
    assert files_under(ns_dir(adapter)) == [".silt-etag-done", "done"]


def test_a_copy_keeps_a_multipart_etag(adapter: LocalAdapter) -> None:
    etag = _multipart(adapter, "mp", [b"one", b"two"])
    assert adapter.copy(NS, "mp", NS, "copy").etag == etag
    assert adapter.stat(NS, "copy").etag == etag


def _replace_behind_the_adapters_back(adapter: LocalAdapter, key: str, data: bytes) -> None:
    # What a crash between the record's rename and the data's rename leaves: bytes the
    # record does not describe.
    tmp = ns_dir(adapter) / "by-hand"
    tmp.write_bytes(data)
    os.replace(tmp, ns_dir(adapter) / key)


def test_a_record_of_other_bytes_is_never_reported(adapter: LocalAdapter) -> None:
    _multipart(adapter, "k", [b"abc", b"def"])
    _replace_behind_the_adapters_back(adapter, "k", b"ABCDEF")  # same size, other bytes
    assert adapter.stat(NS, "k").etag == md5_hex(b"ABCDEF")
    with adapter.get(NS, "k") as stream:
        assert stream.read() == b"ABCDEF"


def test_a_missing_or_corrupt_record_falls_back_to_the_md5(adapter: LocalAdapter) -> None:
    put(adapter, "k", b"bytes")
    record = ns_dir(adapter) / ".silt-etag-k"
    record.write_bytes(b"{not json")
    assert adapter.stat(NS, "k").etag == md5_hex(b"bytes")
    record.unlink()
    assert adapter.stat(NS, "k").etag == md5_hex(b"bytes")
    (ns_dir(adapter) / "foreign").write_bytes(b"dropped in by hand")
    assert adapter.stat(NS, "foreign").etag == md5_hex(b"dropped in by hand")


def test_a_small_put_has_no_record_and_replaces_a_multipart_ones(adapter: LocalAdapter) -> None:
    _multipart(adapter, "k", [b"abc", b"def"])
    assert ".silt-etag-k" in files_under(ns_dir(adapter))
    put(adapter, "k", b"small")
    assert files_under(ns_dir(adapter)) == ["k"]
    assert adapter.stat(NS, "k").etag == md5_hex(b"small")
    large = b"x" * (local_adapter.RECORDLESS_BYTES + 1)
    put(adapter, "k", large)
    assert files_under(ns_dir(adapter)) == [".silt-etag-k", "k"]
    assert adapter.stat(NS, "k").etag == md5_hex(large)
    assert adapter.put_if_absent(NS, "new", io.BytesIO(b"small")).etag == md5_hex(b"small")
    assert ".silt-etag-new" not in files_under(ns_dir(adapter))
    assert adapter.stat(NS, "new").etag == md5_hex(b"small")


def test_delete_removes_the_record_too(adapter: LocalAdapter) -> None:
    put(adapter, "k", b"bytes")
    adapter.delete(NS, "k")
    assert files_under(ns_dir(adapter)) == []


def test_open_adapter_builds_a_local_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    adapter = open_adapter(BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path="~/silt-data")))
    assert isinstance(adapter, LocalAdapter)
    assert adapter.root == os.path.realpath(tmp_path / "silt-data")


def test_a_small_put_removes_a_record_left_with_no_object(
    adapter: LocalAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A delete racing a copy, a failed rename or a crash can leave a record with no object at
    # its path, naming an inode that is free again. A new file given that number, with the same
    # size and mtime, would match it: every fingerprint matches here to stand for that.
    monkeypatch.setattr(local_adapter, "_fingerprint", lambda st: [1, 2, 3])
    for key, write in (
        ("k", lambda: put(adapter, "k", b"small")),
        ("new", lambda: adapter.put_if_absent(NS, "new", io.BytesIO(b"small"))),
    ):
        ns_dir(adapter).mkdir(parents=True, exist_ok=True)
        (ns_dir(adapter) / f".silt-etag-{key}").write_text('{"etag": "' + "0" * 32 + '", "file": [1, 2, 3]}')
        write()
        assert f".silt-etag-{key}" not in files_under(ns_dir(adapter))
        assert adapter.stat(NS, key).etag == md5_hex(b"small")


def test_a_closed_reader_does_not_read(adapter: LocalAdapter) -> None:
    put(adapter, "k", b"bytes")
    reader = adapter.get(NS, "k")
    reader.close()
    with pytest.raises(ValueError):
        reader.read(1)
