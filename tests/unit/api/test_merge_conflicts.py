"""The merge check's walk (edge/api/refs/conflicts.py) over graveler answers of the test's: a key
both sides changed to different results is a conflict; the same result, or a key only one side
changed, is not; the walk pages through both diffs and says when it stopped short."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from edge.api.refs import conflicts
from edge.api.refs.conflicts import check_merge
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

ADDED, REMOVED, CHANGED = api.DIFF_TYPE_ADDED, api.DIFF_TYPE_REMOVED, api.DIFF_TYPE_CHANGED


def _item(key: str, kind: api.DiffType.ValueType, etag: str = "") -> api.DiffItem:
    item = api.DiffItem(key=key, type=kind)
    if kind != REMOVED:
        item.right.CopyFrom(pb.Entry(physical_address=f"data/{key}-{etag}", size=len(etag), etag=etag))
    return item


class Graveler:
    """ResolveRef (the ref is its commit), FindMergeBase ("base"), and Diff from "base" to
    "src" or "dst" out of the test's changes, paged by `after` and `amount`."""

    def __init__(self, changes: dict[str, list[api.DiffItem]]) -> None:
        self.changes = changes
        self.diff_calls = 0

    def ResolveRef(self, request: api.ResolveRefRequest) -> api.ResolveRefResponse:
        return api.ResolveRefResponse(commit_id=request.ref)

    def FindMergeBase(self, request: api.FindMergeBaseRequest) -> Any:
        return SimpleNamespace(commit_id="base")

    def Diff(self, request: api.DiffRequest) -> api.DiffResponse:
        self.diff_calls += 1
        assert request.left_ref == "base"
        items = [i for i in self.changes[request.right_ref] if i.key > request.after]
        return api.DiffResponse(items=items[: request.amount], has_more=len(items) > request.amount)


class Ctx:
    def __init__(self, graveler: Graveler) -> None:
        self.backend = SimpleNamespace(graveler=graveler)

    async def call(self, method: Any, request: Any) -> Any:
        return method(request)


def _check(changes: dict[str, list[api.DiffItem]]) -> tuple[dict[str, Any], Graveler]:
    graveler = Graveler(changes)
    check = asyncio.run(check_merge(Ctx(graveler), "repo", "src", "dst"))  # type: ignore[arg-type]
    return check.body(), graveler


def test_only_keys_both_sides_left_differently_conflict() -> None:
    body, _ = _check(
        {
            "src": [
                _item("a.csv", CHANGED, "s"),
                _item("b.csv", ADDED, "same"),
                _item("c.csv", REMOVED),
                _item("d.csv", REMOVED),
                _item("only-src", ADDED, "x"),
            ],
            "dst": [
                _item("a.csv", CHANGED, "d"),  # both changed, differently: conflict
                _item("b.csv", ADDED, "same"),  # the same object added on both sides: none
                _item("c.csv", REMOVED),  # removed on both: none
                _item("d.csv", CHANGED, "d"),  # removed here, changed there: conflict
                _item("only-dst", ADDED, "y"),
            ],
        }
    )
    assert body["mergeable"] is False
    assert body["conflicts"] == [
        {"path": "a.csv", "source": "changed", "destination": "changed"},
        {"path": "d.csv", "source": "removed", "destination": "changed"},
    ]
    assert body["conflicts_truncated"] is False
    assert (body["source_commit_id"], body["destination_commit_id"], body["base_commit_id"]) == ("src", "dst", "base")


def test_the_walk_pages_and_says_when_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conflicts, "MAX_PAGE", 2)
    keys = [f"k{n:02d}" for n in range(7)]
    body, graveler = _check({"src": [_item(k, CHANGED, "s") for k in keys], "dst": [_item(keys[-1], CHANGED, "d")]})
    assert [c["path"] for c in body["conflicts"]] == ["k06"]  # found past the first pages
    assert body["conflicts_truncated"] is False
    assert graveler.diff_calls >= 4

    monkeypatch.setattr(conflicts, "MAX_EXAMINED", 4)
    body, _ = _check({"src": [_item(k, CHANGED, "s") for k in keys], "dst": [_item(keys[-1], CHANGED, "d")]})
    assert body["conflicts"] == [] and body["conflicts_truncated"] is True
