"""Resolving ref expressions against a repository: names, prefixes, ``~N``, ``^N`` and ``@``.

Runs the engine in-process on the in-memory KV driver and a local-disk object store.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.core.refs import Resolved
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store

REPO = "refs"


@dataclass
class History:
    """main: root - m1 - m2 - merge(m2, f2) - m3; feature: root - f1 - f2; tag v1 at m1."""

    graveler: Graveler
    root: str
    m1: str
    m2: str
    f1: str
    f2: str
    merge: str
    m3: str

    def resolve(self, ref: str) -> str:
        return _resolve(self.graveler, REPO, ref).commit_id


def _resolve(graveler: Graveler, repository: str, ref: str) -> Resolved:
    return graveler.refs.resolve(graveler.refs.repository(repository), ref)


def _commit(graveler: Graveler, branch: str, key: str) -> str:
    graveler.stage_entry(REPO, branch, key, pb.Entry(physical_address=f"data/{key}", size=1, etag=key))
    return graveler.commit(REPO, branch, f"add {key}").id


@pytest.fixture
def history(tmp_path: Path) -> Iterator[History]:
    graveler = open_graveler(open_store(DatabaseConfig(type="mem")), LocalAdapter(tmp_path / "data"))
    try:
        graveler.lifecycle.create_repository(REPO, f"local://{REPO}", "", False)
        root = graveler.refs.get_branch(graveler.refs.repository(REPO), "main").commit_id
        graveler.create_branch(REPO, "feature", "main")
        m1 = _commit(graveler, "main", "m1")
        graveler.create_tag(REPO, "v1", "main")
        m2 = _commit(graveler, "main", "m2")
        f1 = _commit(graveler, "feature", "f1")
        f2 = _commit(graveler, "feature", "f2")
        merged = graveler.merge(REPO, "feature", "main").commit
        assert merged is not None
        m3 = _commit(graveler, "main", "m3")
        _commit(graveler, "feature", "staged-later")  # feature moves on; main^... must not
        graveler.stage_entry(REPO, "main", "uncommitted", pb.Entry(physical_address="data/u", size=1, etag="u"))
        yield History(graveler, root, m1, m2, f1, f2, merged.id, m3)
    finally:
        graveler.close()


def test_first_parent_walks(history: History) -> None:
    h = history
    assert h.resolve("main") == h.m3
    assert h.resolve("main~0") == h.m3
    assert h.resolve("main~") == h.resolve("main~1") == h.merge
    assert h.resolve("main~2") == h.m2
    assert h.resolve("main~~") == h.m2
    assert h.resolve("main~4") == h.root


def test_nth_parent_of_a_merge(history: History) -> None:
    h = history
    assert h.resolve("main~1^1") == h.resolve("main^^") == h.m2
    assert h.resolve("main~1^2") == h.f2
    assert h.resolve("main~1^2~1") == h.f1
    assert h.resolve("main^^2^") == h.f1


def test_walking_past_the_history_or_the_parents_is_not_found(history: History) -> None:
    h = history
    for ref in ["main~5", "main~999999999", "main^2", "main~1^3", "v1~2", f"{h.root[:8]}^"]:
        with pytest.raises(NotFound):
            h.resolve(ref)


def test_committed_only_view_of_a_branch(history: History) -> None:
    g = history.graveler
    plain = _resolve(g, REPO, "main")
    committed = _resolve(g, REPO, "main@")
    assert plain.kind == committed.kind == "branch"
    assert plain.commit_id == committed.commit_id == history.m3
    assert plain.branch is not None  # staged changes visible
    assert committed.branch is None  # committed state only
    assert _resolve(g, REPO, "main@~1").commit_id == history.merge
    assert _resolve(g, REPO, "main~1").branch is None  # an ancestor is a commit, never staged


def test_at_applies_to_branches_only(history: History) -> None:
    for ref in ["v1@", f"{history.m1[:10]}@"]:
        with pytest.raises(InvalidArgument, match="branches only"):
            history.resolve(ref)


def test_tags_and_commit_ids(history: History) -> None:
    g = history.graveler
    tag = _resolve(g, REPO, "v1")
    assert (tag.kind, tag.commit_id, tag.branch) == ("tag", history.m1, None)
    assert history.resolve("v1~1") == history.root
    full = _resolve(g, REPO, history.f2)
    assert (full.kind, full.commit_id) == ("commit", history.f2)
    assert history.resolve(history.merge + "^2") == history.f2


def test_unique_commit_prefixes_resolve(history: History) -> None:
    for commit_id in [history.root, history.m2, history.f1]:
        for length in (4, 7, 12, 63):
            assert history.resolve(commit_id[:length]) == commit_id
        assert history.resolve(commit_id[:7] + "~0") == commit_id


def test_short_upper_case_or_unknown_prefixes_are_not_found(history: History) -> None:
    commit_id = history.m2
    # Upper case only differs from the id when the prefix holds a letter; an 8-digit prefix
    # (about 2% of ids) would resolve, so extend it up to its first letter.
    first_letter = next(i for i, c in enumerate(commit_id) if c in "abcdef")
    upper_prefix = commit_id[: max(8, first_letter + 1)].upper()
    unknown = next(p for p in (f"{i:04x}" for i in range(65536)) if not _is_prefix_of_any(history, p))
    for ref in [commit_id[:3], upper_prefix, unknown, "nosuchbranch"]:
        with pytest.raises(NotFound):
            history.resolve(ref)


def test_an_ambiguous_prefix_is_an_invalid_argument(history: History) -> None:
    g = history.graveler
    repo = g.refs.get_repository(REPO)
    twins = ["abcd" + "1" * 60, "abcd" + "2" * 60]
    for commit_id in twins:
        # Hand-made records sharing a prefix: real ids would need ~300 commits to collide.
        g.refs.put_commit(repo, pb.Commit(id=commit_id, parents=[history.root], generation=2))
    with pytest.raises(InvalidArgument, match="ambiguous"):
        history.resolve("abcd")
    assert history.resolve("abcd1") == twins[0]
    assert history.resolve("abcd2~1") == history.root


def test_branch_names_win_over_tags_and_commit_prefixes(history: History) -> None:
    g = history.graveler
    prefix = history.m1[:6]
    g.create_branch(REPO, prefix, history.f2)  # a branch named like a commit prefix
    g.create_tag(REPO, "feature", history.root)  # a tag named like a branch
    assert _resolve(g, REPO, prefix).kind == "branch"
    assert history.resolve(prefix) == history.f2
    assert history.resolve(history.m1[:7]) == history.m1  # a longer prefix is still the commit
    assert _resolve(g, REPO, "feature").kind == "branch"
    assert history.resolve("feature") != history.root


def test_an_empty_repository_name_or_ref_is_rejected(history: History) -> None:
    g = history.graveler
    with pytest.raises(InvalidArgument):
        _resolve(g, REPO, "")
    with pytest.raises(InvalidArgument):
        _resolve(g, "", "main")
    with pytest.raises(NotFound):
        _resolve(g, "no-such-repo", "main")


def _is_prefix_of_any(history: History, prefix: str) -> bool:
    repo = history.graveler.refs.get_repository(REPO)
    return bool(history.graveler.refs.commits_with_prefix(repo, prefix, limit=1))
