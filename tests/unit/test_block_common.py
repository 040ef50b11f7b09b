"""silt/block/common.py: how the S3 and Azure adapters cut a stream into an upload's pieces,
spool a part, and turn SDK errors into Silt errors, checked here with small sizes."""

from __future__ import annotations

import hashlib
import io

import pytest

from silt.block.common import Calls, Pieces, Spool, check_part_size, spool_part
from silt.errors import InvalidArgument, NotFound, SiltError, Unavailable

SMALL = Pieces("test", "the test's limit of 5 pieces", base=4, most=5, doubling=2)


def _cut(data: bytes, size: int | None) -> list[bytes]:
    stream = io.BytesIO(data)
    piece = SMALL.size_for(size)
    first, carry, single = SMALL.first(stream, size, piece, "obj")
    if single:
        with first:
            return [first.file.read()]
    return [spool.file.read() for spool in SMALL.all(stream, size, first, carry, piece, "obj")]


def test_a_stream_of_unknown_size_is_cut_in_pieces_that_double() -> None:
    data = bytes(range(30))
    # 4, 4, then doubled after two pieces: 8, 8, then 16 after four (the rest, 6).
    assert [len(p) for p in _cut(data, None)] == [4, 4, 8, 8, 6]
    assert b"".join(_cut(data, None)) == data
    # Exactly one piece: one request, told apart from a longer stream by one byte of look-ahead.
    assert _cut(data[:4], None) == [data[:4]]
    assert _cut(data[:5], None) == [data[:4], data[4:5]]


def test_a_known_size_sets_the_piece_size_so_that_the_pieces_suffice() -> None:
    assert SMALL.size_for(None) == 4 and SMALL.size_for(12) == 4 and SMALL.size_for(41) == 9
    data = bytes(41)
    assert [len(p) for p in _cut(data, 41)] == [9, 9, 9, 9, 5]
    assert _cut(data[:4], 4) == [data[:4]]


def test_too_many_pieces_and_short_streams_are_invalid_argument() -> None:
    with pytest.raises(InvalidArgument, match="the test's limit of 5 pieces"):
        _cut(bytes(41), None)
    with pytest.raises(InvalidArgument, match="stream ended after 3 of 10 bytes"):
        _cut(bytes(3), 10)
    with pytest.raises(InvalidArgument, match="stream ended after 9 of 10 bytes"):
        _cut(bytes(9), 10)


def test_every_piece_is_closed_once_the_next_is_read_or_the_upload_stops() -> None:
    stream = io.BytesIO(bytes(20))
    first, carry, _ = SMALL.first(stream, None, 4, "obj")
    pieces = SMALL.all(stream, None, first, carry, 4, "obj")
    seen = [next(pieces), next(pieces)]
    assert seen[0].file.closed and not seen[1].file.closed
    pieces.close()
    assert seen[1].file.closed


def test_a_part_is_spooled_whole_within_its_limit() -> None:
    with spool_part(io.BytesIO(b"abcd"), None, "part", "test", 4, "4 bytes") as spool:
        assert (spool.file.read(), spool.size, spool.md5.hex()) == (b"abcd", 4, "e2fc714c4727ee9395f324cd2e7f331f")
        assert spool.content_md5 == "4vxxTEcn7pOV8yTNLn8zHw=="
    with pytest.raises(InvalidArgument, match=r"a part holds at most 4 bytes$"):
        spool_part(io.BytesIO(b"abcde"), None, "part", "test", 4, "4 bytes")
    with pytest.raises(InvalidArgument, match="stream ended after 2 of 3 bytes"):
        spool_part(io.BytesIO(b"ab"), 3, "part", "test", 4, "4 bytes")
    with pytest.raises(InvalidArgument, match="at most 4 bytes, got 5 bytes"):
        check_part_size(5, "part", 4, "4 bytes")
    with pytest.raises(InvalidArgument, match="non-negative integer"):
        check_part_size(-1, "part", 4, "4 bytes")


def test_a_spool_moves_to_a_temporary_file_past_its_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("silt.block.common.SPOOL_MEMORY", 8)
    running = hashlib.md5()
    with Spool(io.BytesIO(bytes(range(20))), 20, "obj", "test", first=b"", running=running) as spool:
        assert not isinstance(spool.file, io.BytesIO)
        assert spool.file.read() == bytes(range(20))
    assert running.digest() == spool.md5


class _SDKError(Exception):
    pass


def test_calls_translate_the_sdk_errors_named_and_nothing_else() -> None:
    calls = Calls((_SDKError,), lambda exc, what: NotFound(f"{what}: {exc}"))
    with pytest.raises(NotFound, match="obj: gone"), calls("obj"):
        raise _SDKError("gone")
    with pytest.raises(Unavailable), calls("obj"):
        raise Unavailable("already a Silt error")
    with pytest.raises(KeyError), calls("obj"):
        raise KeyError("a bug, not the store")
    assert issubclass(NotFound, SiltError)
