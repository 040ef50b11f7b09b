"""Ref-neutral writes when the staging after the record fails: the record stays and the answer is
one an edge may not read as "not applied" (it keeps the bytes the record names)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import NotFound, OutcomeUnknown, Unavailable
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore

REPO = "neutral"


@pytest.fixture
def graveler(tmp_path: Path) -> Iterator[Graveler]:
    g = open_graveler(MemStore(), LocalAdapter(tmp_path))
    g.lifecycle.create_repository(REPO, f"local://{REPO}", "", False)
    yield g
    g.close()


def _written(g: Graveler, address: str) -> pb.Entry:
    g.committed.adapter.put(f"local://{REPO}", address, io.BytesIO(b"bytes"), 5)
    return pb.Entry(physical_address=address, size=5, etag="e")


def test_a_refusal_after_a_fresh_record_is_no_refusal(graveler: Graveler, monkeypatch: pytest.MonkeyPatch) -> None:
    def branch_gone(*_: Any, **__: Any) -> None:
        raise NotFound("branch 'main' not found", what="branch")  # deleted between check and write

    monkeypatch.setattr(graveler.entries, "stage", branch_gone)
    with pytest.raises(Unavailable):
        graveler.stage_entry(REPO, "main", "k", _written(graveler, "data/one"), neutral=True)
    handle = graveler.refs.repository(REPO)
    assert graveler.neutral.get(handle, "k").physical_address == "data/one"
    # A retry finds the record its own (same ETag) and is refused as it is: nothing new recorded.
    with pytest.raises(NotFound):
        graveler.stage_entry(REPO, "main", "k", _written(graveler, "data/two"), neutral=True)
    assert graveler.neutral.get(handle, "k").physical_address == "data/one"


def test_an_identical_write_over_gone_bytes_stages_its_own(graveler: Graveler) -> None:
    first = _written(graveler, "data/one")
    graveler.stage_entry(REPO, "main", "k", first, neutral=True)
    graveler.committed.adapter.delete(f"local://{REPO}", "data/one")
    graveler.stage_entry(REPO, "main", "k", _written(graveler, "data/two"), neutral=True)
    handle = graveler.refs.repository(REPO)
    assert graveler.neutral.get(handle, "k").physical_address == "data/two"


class _LostAnswers(MemStore):
    """A MemStore whose next compare-and-set of a ref-neutral record applies (or not) and then
    answers OutcomeUnknown, as Cassandra does when a Paxos round is cut short."""

    def __init__(self) -> None:
        super().__init__()
        self.apply_then_lose: bool | None = None

    def set_if(self, partition: bytes, key: bytes, value: bytes, predicate: Any) -> None:
        step, self.apply_then_lose = self.apply_then_lose, None
        if step is None or not key.startswith(b"neutral/"):
            super().set_if(partition, key, value, predicate)
            return
        if step:
            super().set_if(partition, key, value, predicate)
        raise OutcomeUnknown("test: outcome unknown")


@pytest.mark.parametrize("applied", [True, False])
def test_a_record_whose_outcome_was_lost_is_settled_by_its_address(tmp_path: Path, applied: bool) -> None:
    store = _LostAnswers()
    g = open_graveler(store, LocalAdapter(tmp_path))
    try:
        g.lifecycle.create_repository(REPO, f"local://{REPO}", "", False)
        store.apply_then_lose = applied
        # Not applied: the store's read-back then finds nothing, and the create is sent again.
        g.stage_entry(REPO, "main", "k", _written(g, "data/one"), neutral=True)
        handle = g.refs.repository(REPO)
        assert g.neutral.get(handle, "k").physical_address == "data/one"
        assert g.entries.stat(handle, "main", "k", NO_DEADLINE).physical_address == "data/one"
    finally:
        g.close()
