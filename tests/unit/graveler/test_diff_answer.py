"""Diff's and DiffSummary's answers written from stored entries are the messages built field by field."""

from __future__ import annotations

import pytest

from engine.core.branching import SummaryPage
from engine.core.committed.diff import ADDED, CHANGED, REMOVED, Difference
from engine.core.committed.model import Record
from engine.core.paging import CommonPrefix, Page
from services.graveler.diff_answer import diff_response, summary_response
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

_TYPES = {ADDED: api.DIFF_TYPE_ADDED, REMOVED: api.DIFF_TYPE_REMOVED, CHANGED: api.DIFF_TYPE_CHANGED}


def _entry(i: int, metadata_bytes: int = 0) -> pb.Entry:
    entry = pb.Entry(physical_address=f"data/{i}", size=i, etag=f"{i:032x}")
    if metadata_bytes:
        entry.metadata["big"] = "m" * metadata_bytes
    return entry


def _record(key: bytes, entry: pb.Entry) -> Record:
    return Record(key, b"id", entry.SerializeToString())


def _side(record: Record | None) -> pb.Entry | None:
    return None if record is None else pb.Entry.FromString(record.value)


# Lengths on both sides of the one- and two-byte varints and of the lookup table, an empty
# entry (present, all defaults) and a common prefix.
_ITEMS: list[Difference | CommonPrefix] = [
    Difference(b"a", ADDED, None, _record(b"a", _entry(1))),
    CommonPrefix(b"dir/"),
    Difference("k\u00e9y/\U0001f600".encode(), REMOVED, _record(b"k", _entry(2)), None),
    Difference(b"x" * 127, CHANGED, _record(b"x", _entry(3)), _record(b"x", pb.Entry())),
    Difference(b"y" * 128, CHANGED, _record(b"y", _entry(4, 100)), _record(b"y", _entry(5, 200))),
    Difference(b"z" * 20_000, ADDED, None, _record(b"z", _entry(6, 70_000))),
]


@pytest.mark.parametrize("has_more", [False, True])
def test_diff_answer_equals_the_message_built_field_by_field(has_more: bool) -> None:
    expected = api.DiffResponse(has_more=has_more)
    for item in _ITEMS:
        if isinstance(item, CommonPrefix):
            expected.items.add(key=item.key.decode(), type=api.DIFF_TYPE_PREFIX_CHANGED)
        else:
            expected.items.add(
                key=item.key.decode(), type=_TYPES[item.kind], left=_side(item.left), right=_side(item.right)
            )
    answer = diff_response(Page(_ITEMS, has_more))
    assert answer == expected
    assert answer.items[3].HasField("right") and not answer.items[0].HasField("left")


@pytest.mark.parametrize("has_more", [False, True])
def test_summary_answer_is_the_diff_as_columns(has_more: bool) -> None:
    differences = [item for item in _ITEMS if isinstance(item, Difference)]
    page = SummaryPage(
        [d.key for d in differences],
        [d.kind for d in differences],
        [(d.right if d.right is not None else d.left).value for d in differences],  # type: ignore[union-attr]
        has_more,
    )
    answer = summary_response(page)
    assert list(answer.keys) == [d.key.decode() for d in differences]
    assert list(answer.types) == [_TYPES[d.kind] for d in differences]
    assert list(answer.sizes) == [1, 2, 0, 5, 6] and answer.has_more == has_more


def test_empty_pages() -> None:
    assert diff_response(Page([], False)) == api.DiffResponse()
    assert summary_response(SummaryPage([], [], [], False)) == api.DiffSummaryResponse()
