"""Graveler.delete_entries: many deletes on one branch, each key with its own outcome."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.core.entries import MAX_DELETE_KEYS, DeleteOutcome
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore

REPO = "bulk"
TOO_LONG = "k" * 1025  # longer than S3 allows a key


@pytest.fixture
def graveler(tmp_path: Path) -> Iterator[Graveler]:
    g = open_graveler(MemStore(), LocalAdapter(tmp_path))
    g.lifecycle.create_repository(REPO, "local://bulk", "", False)
    for key in ("a", "b", "committed"):
        g.stage_entry(REPO, "main", key, pb.Entry(physical_address=f"data/{key}", etag=key))
    g.commit(REPO, "main", "committed")
    g.stage_entry(REPO, "main", "staged", pb.Entry(physical_address="data/staged", etag="s"))
    yield g
    g.close()


def test_each_key_has_its_outcome_in_the_order_asked(graveler: Graveler) -> None:
    outcomes = graveler.delete_entries(REPO, "main", ["staged", "absent", "committed", TOO_LONG])
    assert [(o.key, o.result) for o in outcomes] == [
        ("staged", "deleted"),
        ("absent", "not_found"),
        ("committed", "deleted"),
        (TOO_LONG, "invalid"),
    ]
    assert outcomes[3].message
    for key in ("staged", "committed"):
        with pytest.raises(NotFound):
            graveler.entries.stat(graveler.refs.repository(REPO), "main", key, NO_DEADLINE)
    assert graveler.entries.stat(graveler.refs.repository(REPO), "main", "a", NO_DEADLINE).etag == "a"  # untouched


def test_deleted_keys_leave_the_next_commit(graveler: Graveler) -> None:
    assert graveler.delete_entries(REPO, "main", ["a", "b"]) == [
        DeleteOutcome("a", "deleted"),
        DeleteOutcome("b", "deleted"),
    ]
    graveler.commit(REPO, "main", "without a and b")
    page = graveler.entries.list(graveler.refs.repository(REPO), "main", "", "", "", 100, NO_DEADLINE)
    assert [key for key, _ in page.items] == [b"committed", b"staged"]


def test_a_missing_branch_fails_the_whole_call(graveler: Graveler) -> None:
    with pytest.raises(NotFound) as raised:
        graveler.delete_entries(REPO, "absent", ["a"])
    assert raised.value.what == "ref"  # the branch, not a key: no per-key outcome
    assert graveler.entries.stat(graveler.refs.repository(REPO), "main", "a", NO_DEADLINE).etag == "a"


def test_too_many_keys_are_refused_before_anything_is_deleted(graveler: Graveler) -> None:
    with pytest.raises(InvalidArgument):
        graveler.delete_entries(REPO, "main", ["a"] * (MAX_DELETE_KEYS + 1))
    assert graveler.entries.stat(graveler.refs.repository(REPO), "main", "a", NO_DEADLINE).etag == "a"
