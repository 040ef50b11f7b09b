"""A log filtered by object returns, page after page, exactly the commits of the unfiltered log
whose object differs from their first parent's, computed the straightforward way."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.committed.model import MetaRangeId
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore

REPO = "logs"
KEYS = [f"data/{i:03d}" for i in range(0, 60, 2)]


@pytest.fixture
def graveler(tmp_path: Path) -> Iterator[Graveler]:
    g = open_graveler(MemStore(), LocalAdapter(tmp_path))
    g.lifecycle.create_repository(REPO, "local://logs", "main", False)
    yield g
    g.close()


def random_history(g: Graveler, rng: random.Random) -> None:
    """Commits on two branches that create, change, delete and re-create keys, and merges both ways."""
    g.create_branch(REPO, "side", "main")
    for step in range(40):
        branch = rng.choice(["main", "side"])
        for _ in range(rng.choice([1, 1, 2, 6])):
            key = rng.choice(KEYS)
            if rng.random() < 0.25:
                with contextlib.suppress(NotFound):  # nothing to delete: the commit changes other keys
                    g.delete_entry(REPO, branch, key)
            else:
                g.stage_entry(REPO, branch, key, pb.Entry(physical_address=f"p/{step}/{key}", size=step))
        g.commit(REPO, branch, f"step {step}", allow_empty=True)
        if step % 9 == 8:
            source, destination = ("side", "main") if rng.random() < 0.6 else ("main", "side")
            g.merge(REPO, source, destination, strategy="source-wins", allow_empty=True)


def oracle(g: Graveler, key: str, first_parent: bool) -> list[str]:
    """The unfiltered log, kept where the key's record differs from the first parent's."""
    repo = g.refs.repository(REPO)
    empty = g.committed.write_metarange(repo.namespace, iter(()))

    def record(metarange: str) -> tuple[bytes, bytes] | None:
        found = g.committed.get(repo.namespace, MetaRangeId(metarange), key.encode())
        return None if found is None else (found.identity, found.value)

    kept = []
    for commit in all_pages(g, first_parent=first_parent, objects=None, amount=1000):
        parent = g.refs.get_commit(repo, commit.parents[0]).metarange_id if commit.parents else empty
        if record(parent) != record(commit.metarange_id):
            kept.append(commit.id)
    return kept


def all_pages(g: Graveler, first_parent: bool, objects: list[str] | None, amount: int) -> list[pb.Commit]:
    commits: list[pb.Commit] = []
    after = ""
    while True:
        page = g.log(REPO, "main", after, amount, objects=objects, first_parent=first_parent)
        commits += page.commits
        if not page.next_after:
            return commits
        after = page.next_after


@pytest.mark.parametrize("seed", range(2))
def test_filtered_logs_are_the_straightforward_ones(graveler: Graveler, seed: int) -> None:
    rng = random.Random(seed)
    random_history(graveler, rng)
    for key in [*rng.sample(KEYS, 6), "data/001"]:  # data/001: never written
        for first_parent in (False, True):
            expected = oracle(graveler, key, first_parent)
            for amount in (1, 3, 1000):
                found = [c.id for c in all_pages(graveler, first_parent, [key], amount)]
                assert found == expected, (key, first_parent, amount)
