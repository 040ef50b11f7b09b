"""Graveler's NotFound errors say what is missing (silt.errors.NotFound.what)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore

REPO = "kinds"


@pytest.fixture
def graveler(tmp_path: Path) -> Iterator[Graveler]:
    g = open_graveler(MemStore(), LocalAdapter(tmp_path))
    g.lifecycle.create_repository(REPO, "local://kinds", "", False)
    g.stage_entry(REPO, "main", "present", pb.Entry(physical_address="data/x", etag="x"))
    g.create_tag(REPO, "v1", "main")
    yield g
    g.close()


CASES: list[tuple[str, Callable[[Graveler], object]]] = [
    ("repository", lambda g: g.refs.get_repository("absent").record),
    ("repository", lambda g: g.refs.get_branch(g.refs.repository("absent"), "main").branch),
    ("branch", lambda g: g.refs.get_branch(g.refs.repository(REPO), "absent").branch),
    ("branch", lambda g: g.commit(REPO, "absent", "message")),
    ("tag", lambda g: g.refs.get_tag(g.refs.repository(REPO), "absent")),
    ("ref", lambda g: g.refs.resolve(g.refs.repository(REPO), "absent")),
    ("ref", lambda g: g.refs.resolve(g.refs.repository(REPO), "main~5")),
    ("ref", lambda g: g.get_commit(REPO, "abcdef0123")),
    ("object", lambda g: g.entries.stat(g.refs.repository(REPO), "main", "absent", NO_DEADLINE)),
    ("object", lambda g: g.delete_entry(REPO, "main", "absent")),
]


@pytest.mark.parametrize(("what", "call"), CASES)
def test_not_found_names_the_kind(graveler: Graveler, what: str, call: Callable[[Graveler], object]) -> None:
    with pytest.raises(NotFound) as raised:
        call(graveler)
    assert raised.value.what == what
