"""Ref-neutral writes when the staging after the record fails: the record stays and the answer is
one an edge may not read as "not applied" (it keeps the bytes the record names)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import NotFound, Unavailable
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
