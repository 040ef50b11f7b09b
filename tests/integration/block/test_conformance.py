"""One suite, every block adapter: local disk, and S3 against a real moto_server."""

from __future__ import annotations

import gc
import hashlib
import io
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from silt.block import PartInfo
from silt.block.adapter import MAX_DELETE_BATCH
from silt.errors import InvalidArgument, NotFound
from tests.integration.block.conftest import Blocks, count_listing_calls
from tests.integration.block.streams import GeneratorStream, MiB, md5_hex, multipart_etag, pattern_chunks

# S3 refuses parts under 5 MiB except the last, so multipart tests use parts just above it.
PART = 5 * MiB + 3
BIG = 64 * MiB


def put_bytes(blocks: Blocks, key: str, data: bytes, *, sized: bool = True) -> None:
    result = blocks.adapter.put(blocks.namespace, key, io.BytesIO(data), len(data) if sized else None)
    assert result.size == len(data)
    assert result.etag == md5_hex(data)


def read_all(blocks: Blocks, key: str) -> bytes:
    with blocks.adapter.get(blocks.namespace, key) as stream:
        return stream.read()


def read_range(blocks: Blocks, key: str, start: int, end: int) -> bytes:
    with blocks.adapter.get_range(blocks.namespace, key, start, end) as stream:
        return stream.read()


# --- objects -----------------------------------------------------------------------


@pytest.mark.parametrize("sized", [True, False], ids=["size-known", "size-unknown"])
@pytest.mark.parametrize("data", [b"", b"hello, silt", bytes(range(256)) * 4099], ids=["empty", "small", "1MiB+"])
def test_put_then_get_returns_the_same_bytes(blocks: Blocks, data: bytes, sized: bool) -> None:
    put_bytes(blocks, "dir/object.bin", data, sized=sized)
    assert read_all(blocks, "dir/object.bin") == data


def test_put_replaces_an_existing_object(blocks: Blocks) -> None:
    put_bytes(blocks, "k", b"old bytes, longer than the new ones")
    put_bytes(blocks, "k", b"new")
    assert read_all(blocks, "k") == b"new"
    assert blocks.adapter.stat(blocks.namespace, "k").size == 3


def test_put_of_a_stream_shorter_than_its_size_is_refused(blocks: Blocks) -> None:
    with pytest.raises(InvalidArgument):
        blocks.adapter.put(blocks.namespace, "short", io.BytesIO(b"12345"), 10)
    with pytest.raises(NotFound):
        blocks.adapter.stat(blocks.namespace, "short")


def test_streams_can_be_read_in_small_pieces(blocks: Blocks) -> None:
    data = bytes(range(256)) * 100
    put_bytes(blocks, "pieces", data)
    with blocks.adapter.get(blocks.namespace, "pieces") as stream:
        got = b"".join(iter(lambda: stream.read(1000), b""))
    assert got == data


def _peak_while(action: Callable[[], object]) -> int:
    """Peak of Python memory allocated while action runs, in bytes."""
    gc.collect()
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_put_and_get_stream_without_holding_the_object_in_memory(blocks: Blocks) -> None:
    stream = GeneratorStream(pattern_chunks(BIG, seed=7))
    results = []
    peak_put = _peak_while(lambda: results.append(blocks.adapter.put(blocks.namespace, "big", stream.binary())))
    assert stream.size == BIG
    assert results[0].size == BIG

    md5 = hashlib.md5()

    def read_back() -> None:
        with blocks.adapter.get(blocks.namespace, "big") as body:
            while chunk := body.read(MiB):
                md5.update(chunk)

    peak_get = _peak_while(read_back)
    assert md5.hexdigest() == stream.md5.hexdigest()
    # Local copies 1 MiB chunks (about 3 MiB at peak); S3 holds one 8 MiB part at a time
    # (about 12 MiB at peak). Either way, far below the 64 MiB object.
    assert peak_put < BIG // 4, f"put peaked at {peak_put / MiB:.1f} MiB"
    assert peak_get < BIG // 8, f"get peaked at {peak_get / MiB:.1f} MiB"


# --- ranges --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (0, 0, b"0"),
        (2, 5, b"2345"),
        (9, 9, b"9"),
        (0, 9, b"0123456789"),
        (7, 100, b"789"),  # like HTTP, a range past the end is cut at the end
    ],
)
def test_get_range_returns_the_inclusive_range(blocks: Blocks, start: int, end: int, expected: bytes) -> None:
    put_bytes(blocks, "digits", b"0123456789")
    assert read_range(blocks, "digits", start, end) == expected


@pytest.mark.parametrize(("start", "end"), [(10, 12), (11, 11), (5, 4), (-1, 3), (-3, -1)])
def test_get_range_refuses_unsatisfiable_ranges(blocks: Blocks, start: int, end: int) -> None:
    put_bytes(blocks, "digits", b"0123456789")
    with pytest.raises(InvalidArgument):
        read_range(blocks, "digits", start, end)


def test_get_range_of_an_empty_object_is_refused(blocks: Blocks) -> None:
    put_bytes(blocks, "empty", b"")
    with pytest.raises(InvalidArgument):
        read_range(blocks, "empty", 0, 0)


def test_get_range_of_a_large_object(blocks: Blocks) -> None:
    data = b"".join(pattern_chunks(3 * MiB, seed=3))
    put_bytes(blocks, "large", data)
    assert read_range(blocks, "large", MiB - 5, 2 * MiB + 5) == data[MiB - 5 : 2 * MiB + 6]


# --- stat, delete, copy --------------------------------------------------------------


def test_stat_reports_size_md5_etag_and_utc_mtime(blocks: Blocks) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    put_bytes(blocks, "stat/me", b"some bytes")
    info = blocks.adapter.stat(blocks.namespace, "stat/me")
    assert info.size == 10
    assert info.etag == md5_hex(b"some bytes")
    assert info.mtime.utcoffset() == timedelta(0)
    assert before <= info.mtime <= datetime.now(UTC) + timedelta(seconds=5)


def test_delete_removes_and_is_idempotent(blocks: Blocks) -> None:
    put_bytes(blocks, "gone", b"x")
    blocks.adapter.delete(blocks.namespace, "gone")
    with pytest.raises(NotFound):
        blocks.adapter.stat(blocks.namespace, "gone")
    blocks.adapter.delete(blocks.namespace, "gone")
    blocks.adapter.delete(blocks.namespace, "never/existed")


def test_delete_many_removes_every_key_in_one_call_and_only_those(blocks: Blocks) -> None:
    keys = [f"batch/{index:04d}" for index in range(150)] + ["other/dir/one", "top"]
    for key in keys:
        put_bytes(blocks, key, key.encode())
    put_bytes(blocks, "batch/kept", b"kept")
    blocks.adapter.delete_many(blocks.namespace, [*keys, "never/existed", "batch/never"])
    listed = [item.key for item in blocks.adapter.list_objects(blocks.namespace, "")]
    assert listed == ["batch/kept"]
    assert read_all(blocks, "batch/kept") == b"kept"
    blocks.adapter.delete_many(blocks.namespace, keys)
    blocks.adapter.delete_many(blocks.namespace, [])


def test_delete_many_refuses_more_than_a_batch_and_invalid_keys(blocks: Blocks) -> None:
    put_bytes(blocks, "stays", b"x")
    with pytest.raises(InvalidArgument):
        blocks.adapter.delete_many(blocks.namespace, [f"k{index}" for index in range(MAX_DELETE_BATCH + 1)])
    with pytest.raises(InvalidArgument):
        blocks.adapter.delete_many(blocks.namespace, ["../escape", "stays"])
    assert read_all(blocks, "stays") == b"x"


@pytest.mark.parametrize(
    "operation",
    [
        lambda b: b.adapter.get(b.namespace, "missing"),
        lambda b: b.adapter.get_range(b.namespace, "missing", 0, 1),
        lambda b: b.adapter.stat(b.namespace, "missing"),
        lambda b: b.adapter.copy(b.namespace, "missing", b.namespace, "copy"),
        lambda b: b.adapter.get(b.namespace, "missing/deeper/key"),
    ],
    ids=["get", "get_range", "stat", "copy", "get-deep"],
)
def test_missing_objects_are_not_found(blocks: Blocks, operation: object) -> None:
    with pytest.raises(NotFound):
        operation(blocks)  # type: ignore[operator]


def test_copy_duplicates_bytes_and_etag(blocks: Blocks) -> None:
    data = b"copy me " * 1000
    put_bytes(blocks, "src", data)
    result = blocks.adapter.copy(blocks.namespace, "src", blocks.namespace, "dst/copy")
    assert result.size == len(data)
    assert result.etag == md5_hex(data)
    assert read_all(blocks, "dst/copy") == data
    assert blocks.adapter.stat(blocks.namespace, "dst/copy").etag == result.etag
    # The copy is an object of its own.
    put_bytes(blocks, "src", b"changed")
    blocks.adapter.delete(blocks.namespace, "src")
    assert read_all(blocks, "dst/copy") == data


def test_copy_across_namespaces(blocks: Blocks) -> None:
    other = blocks.namespace.rsplit("/", 1)[0] + "/other-prefix"
    put_bytes(blocks, "a", b"across")
    blocks.adapter.copy(blocks.namespace, "a", other, "b")
    with blocks.adapter.get(other, "b") as stream:
        assert stream.read() == b"across"


# --- names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["", "/abs", "a//b", "trailing/", "a/../b", "..", "./a", "a\x00b", "a\\b", ".silt-tmp-x", "d/.silt-etag-x"],
)
def test_invalid_keys_are_refused_everywhere(blocks: Blocks, key: str) -> None:
    with pytest.raises(InvalidArgument):
        blocks.adapter.put(blocks.namespace, key, io.BytesIO(b"x"))
    with pytest.raises(InvalidArgument):
        blocks.adapter.stat(blocks.namespace, key)
    with pytest.raises(InvalidArgument):
        blocks.adapter.create_multipart_upload(blocks.namespace, key)


def test_a_namespace_of_another_scheme_is_refused(blocks: Blocks) -> None:
    foreign = "s3://bucket/p" if blocks.kind == "local" else "local://name/p"
    for bad in (foreign, "repo-ns", "", f"{blocks.kind}://"):
        with pytest.raises(InvalidArgument):
            blocks.adapter.put(bad, "k", io.BytesIO(b"x"))
    with pytest.raises(InvalidArgument):
        blocks.adapter.copy(blocks.namespace, "k", foreign, "k")


def test_a_trailing_slash_on_the_namespace_names_the_same_prefix(blocks: Blocks) -> None:
    put_bytes(blocks, "slash", b"same")
    with blocks.adapter.get(blocks.namespace + "/", "slash") as stream:
        assert stream.read() == b"same"


# --- multipart uploads ---------------------------------------------------------------


def test_multipart_upload_joins_parts_in_order_with_s3_etag(blocks: Blocks) -> None:
    parts = [b"".join(pattern_chunks(PART, seed=s)) for s in (1, 2)] + [b"tail bytes"]
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "mp/object")
    infos = {}
    for number in (3, 1, 2):  # parts may arrive in any order
        data = parts[number - 1]
        info = blocks.adapter.upload_part(blocks.namespace, "mp/object", upload, number, io.BytesIO(data), len(data))
        assert info == PartInfo(number, md5_hex(data))
        infos[number] = info
    result = blocks.adapter.complete_multipart_upload(
        blocks.namespace, "mp/object", upload, [infos[1], infos[2], infos[3]]
    )
    expected_etag = multipart_etag(parts)
    assert result.etag == expected_etag
    assert result.size == sum(map(len, parts))
    assert blocks.adapter.stat(blocks.namespace, "mp/object").etag == expected_etag
    assert read_all(blocks, "mp/object") == b"".join(parts)


def test_reuploading_a_part_replaces_it(blocks: Blocks) -> None:
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "redo")
    blocks.adapter.upload_part(blocks.namespace, "redo", upload, 1, io.BytesIO(b"first try"))
    info = blocks.adapter.upload_part(blocks.namespace, "redo", upload, 1, io.BytesIO(b"second"))
    result = blocks.adapter.complete_multipart_upload(blocks.namespace, "redo", upload, [info])
    assert result.etag == multipart_etag([b"second"])
    assert read_all(blocks, "redo") == b"second"


def test_upload_part_copy_takes_a_range_of_an_existing_object(blocks: Blocks) -> None:
    source = b"".join(pattern_chunks(PART + 100, seed=5))
    put_bytes(blocks, "copy/source", source)
    put_bytes(blocks, "copy/small", b"whole small object")
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "copy/target")
    first = blocks.adapter.upload_part_copy(
        blocks.namespace, "copy/target", upload, 1, blocks.namespace, "copy/source", (50, 50 + PART - 1)
    )
    second = blocks.adapter.upload_part_copy(blocks.namespace, "copy/target", upload, 2, blocks.namespace, "copy/small")
    expected_parts = [source[50 : 50 + PART], b"whole small object"]
    assert first == PartInfo(1, md5_hex(expected_parts[0]))
    assert second == PartInfo(2, md5_hex(expected_parts[1]))
    result = blocks.adapter.complete_multipart_upload(blocks.namespace, "copy/target", upload, [first, second])
    assert result.etag == multipart_etag(expected_parts)
    assert read_all(blocks, "copy/target") == b"".join(expected_parts)


@pytest.mark.parametrize(
    "src_range", [(0, 10), (10, 10), (5, 4), (-1, 2)], ids=["past-end", "at-end", "reversed", "negative"]
)
def test_upload_part_copy_refuses_ranges_outside_the_source(blocks: Blocks, src_range: tuple[int, int]) -> None:
    put_bytes(blocks, "ten", b"0123456789")
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "t")
    with pytest.raises(InvalidArgument):
        blocks.adapter.upload_part_copy(blocks.namespace, "t", upload, 1, blocks.namespace, "ten", src_range)


def test_upload_part_copy_of_a_missing_object_is_not_found(blocks: Blocks) -> None:
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "t")
    with pytest.raises(NotFound):
        blocks.adapter.upload_part_copy(blocks.namespace, "t", upload, 1, blocks.namespace, "missing", (0, 1))


@pytest.mark.parametrize("number", [0, 10_001, -1])
def test_part_numbers_outside_1_to_10000_are_refused(blocks: Blocks, number: int) -> None:
    put_bytes(blocks, "src", b"abc")
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "t")
    with pytest.raises(InvalidArgument):
        blocks.adapter.upload_part(blocks.namespace, "t", upload, number, io.BytesIO(b"x"))
    with pytest.raises(InvalidArgument):
        blocks.adapter.upload_part_copy(blocks.namespace, "t", upload, number, blocks.namespace, "src")


def test_abort_discards_the_upload(blocks: Blocks) -> None:
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "aborted")
    blocks.adapter.upload_part(blocks.namespace, "aborted", upload, 1, io.BytesIO(b"part"))
    blocks.adapter.abort_multipart_upload(blocks.namespace, "aborted", upload)
    with pytest.raises(NotFound):
        blocks.adapter.stat(blocks.namespace, "aborted")
    with pytest.raises(NotFound):
        blocks.adapter.abort_multipart_upload(blocks.namespace, "aborted", upload)


def _unknown_upload_calls(blocks: Blocks, upload: str) -> dict[str, object]:
    ns = blocks.namespace
    return {
        "abort": lambda: blocks.adapter.abort_multipart_upload(ns, "k", upload),
        "upload_part": lambda: blocks.adapter.upload_part(ns, "k", upload, 1, io.BytesIO(b"x")),
        "upload_part_copy": lambda: blocks.adapter.upload_part_copy(ns, "k", upload, 1, ns, "src"),
        "complete": lambda: blocks.adapter.complete_multipart_upload(ns, "k", upload, [PartInfo(1, md5_hex(b"x"))]),
    }


@pytest.mark.parametrize("operation", ["abort", "upload_part", "upload_part_copy", "complete"])
def test_unknown_upload_ids_are_not_found(blocks: Blocks, operation: str, request: pytest.FixtureRequest) -> None:
    if blocks.kind == "s3" and operation != "abort":
        # AWS answers NoSuchUpload (mapped to NotFound; see test_s3.py's error mapping
        # test), but moto 5.2.5 fails these with a 500 (a KeyError on the upload id).
        request.applymarker(pytest.mark.xfail(reason="moto answers 500 for an unknown upload id", strict=True))
    put_bytes(blocks, "src", b"abc")
    for upload in ("0123456789abcdef0123456789abcdef", "no-such-upload"):
        with pytest.raises(NotFound):
            _unknown_upload_calls(blocks, upload)[operation]()  # type: ignore[operator]


def _two_part_upload(blocks: Blocks, key: str) -> tuple[str, list[PartInfo], list[bytes]]:
    data = [b"".join(pattern_chunks(PART, seed=9)), b"last"]
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, key)
    infos = [
        blocks.adapter.upload_part(blocks.namespace, key, upload, n, io.BytesIO(d), len(d))
        for n, d in enumerate(data, start=1)
    ]
    return upload, infos, data


@pytest.mark.parametrize(
    "listed",
    [
        lambda p: [p[0], PartInfo(2, "0" * 32)],  # wrong ETag
        lambda p: [p[1], p[0]],  # out of order
        lambda p: [p[0], p[0], p[1]],  # repeated
        lambda p: [p[0], PartInfo(3, p[1].etag)],  # never uploaded
        lambda p: [],  # nothing
    ],
    ids=["wrong-etag", "out-of-order", "repeated", "not-uploaded", "empty"],
)
def test_complete_refuses_a_bad_parts_list_and_keeps_the_upload(blocks: Blocks, listed: object) -> None:
    upload, infos, data = _two_part_upload(blocks, "bad/complete")
    with pytest.raises(InvalidArgument):
        blocks.adapter.complete_multipart_upload(blocks.namespace, "bad/complete", upload, listed(infos))  # type: ignore[operator]
    with pytest.raises(NotFound):
        blocks.adapter.stat(blocks.namespace, "bad/complete")
    # A refused complete leaves the upload as it was: it can still be completed.
    result = blocks.adapter.complete_multipart_upload(blocks.namespace, "bad/complete", upload, infos)
    assert result.etag == multipart_etag(data)


def test_complete_accepts_quoted_etags(blocks: Blocks) -> None:
    upload, infos, data = _two_part_upload(blocks, "quoted")
    quoted = [PartInfo(p.part_number, f'"{p.etag.upper()}"') for p in infos]
    assert blocks.adapter.complete_multipart_upload(blocks.namespace, "quoted", upload, quoted).etag == multipart_etag(
        data
    )


# --- listing -----------------------------------------------------------------------


def test_listing_gives_every_object_in_key_order_with_sizes_and_etags(blocks: Blocks) -> None:
    # "a-b" sorts between "a" and "a/b" by bytes ("-" is 0x2d, "/" 0x2f): a directory walk
    # that returned "a/..." before "a-b" would be out of order.
    keys = ["a/c/d", "a-b", "a/b", "data/2", "data/10", "z", "Z", "é"]
    sizes = {}
    for n, key in enumerate(keys):
        data = bytes([n]) * (n + 1)
        put_bytes(blocks, key, data)
        sizes[key] = (len(data), md5_hex(data))
    listed = list(blocks.adapter.list_objects(blocks.namespace))
    assert [item.key for item in listed] == sorted(keys, key=lambda k: k.encode())
    assert {item.key: (item.size, item.etag) for item in listed} == sizes
    now = datetime.now(UTC)
    assert all(now - timedelta(minutes=5) < item.mtime <= now + timedelta(minutes=5) for item in listed)
    assert all(item.mtime.utcoffset() == timedelta(0) for item in listed)


def test_listing_takes_a_prefix_and_a_start_after(blocks: Blocks) -> None:
    for key in ["data/a", "data/b", "data/c/d", "data2/e", "other"]:
        put_bytes(blocks, key, b"x")
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace, "data/")] == ["data/a", "data/b", "data/c/d"]
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace, "data")] == [
        "data/a",
        "data/b",
        "data/c/d",
        "data2/e",
    ]
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace, "data/", after="data/a")] == [
        "data/b",
        "data/c/d",
    ]
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace, "", after="data2/e")] == ["other"]
    assert list(blocks.adapter.list_objects(blocks.namespace, "nothing/")) == []


def test_listing_leaves_out_uploads_in_progress_and_other_namespaces(blocks: Blocks) -> None:
    put_bytes(blocks, "done", b"whole")
    upload = blocks.adapter.create_multipart_upload(blocks.namespace, "pending")
    blocks.adapter.upload_part(blocks.namespace, "pending", upload, 1, io.BytesIO(b"part"), 4)
    sibling = blocks.namespace.rstrip("/") + "-sibling"
    blocks.adapter.put(sibling, "elsewhere", io.BytesIO(b"y"), 1)
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace)] == ["done"]
    blocks.adapter.abort_multipart_upload(blocks.namespace, "pending", upload)


def test_listing_many_objects_crosses_pages(blocks: Blocks, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pages of 10 keys (the stores' own hold 1,000 keys on S3 and GCS, 5,000 on Azure: as many
    # objects put through an emulator cost the suite 11 s of CPU a store): 25 keys are three
    # pages, and a listing after a key starts in the middle of one. A local disk has no pages.
    monkeypatch.setattr(blocks.adapter, "list_page_size", 10)
    keys = [f"many/{n:05d}" for n in range(25)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: blocks.adapter.put(blocks.namespace, key, io.BytesIO(b""), 0), keys))
    calls = count_listing_calls(monkeypatch)
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace, "many/")] == keys
    assert len(calls) == (0 if blocks.kind.startswith("local") else 3), calls
    assert [i.key for i in blocks.adapter.list_objects(blocks.namespace, "many/", after="many/00012")] == keys[13:]
