"""Which commits a GC run treats as expired, and the export through the facade (engine/features/retention.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.deadline import NO_DEADLINE, Deadline
from engine.features.retention import expired_commits, validate_rules
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import DeadlineExceeded, FailedPrecondition, InvalidArgument
from silt.gc_runs import validate_run_id
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore

DAY = 86_400
NOW = 1_000 * DAY


def _commit(commit_id: str, age_days: float, *parents: str) -> pb.Commit:
    return pb.Commit(id=commit_id, creation_date=Timestamp(seconds=int(NOW - age_days * DAY)), parents=list(parents))


def _graph() -> dict[str, pb.Commit]:
    # root(40d) <- a(20d) <- b(5d) <- c(1d) = main; b <- f(2d) = feature; a <- x(30d, tagged)
    commits = [
        _commit("root", 40),
        _commit("a", 20, "root"),
        _commit("b", 5, "a"),
        _commit("c", 1, "b"),
        _commit("f", 2, "b"),
        _commit("x", 30, "a"),
        _commit("dangling", 3, "root"),
    ]
    return {c.id: c for c in commits}


def test_heads_tags_and_young_ancestors_are_retained() -> None:
    rules = pb.GCRules(default_retention_days=7)
    expired = expired_commits(_graph(), {"main": "c", "feature": "f"}, ["x"], rules, NOW)
    # a is 20 days old: the walk from c stops there; dangling is reachable from no HEAD.
    assert expired == {"root", "a", "dangling"}


def test_branch_override_and_zero_retention() -> None:
    rules = pb.GCRules(default_retention_days=0, branch_retention_days={"main": 25})
    expired = expired_commits(_graph(), {"main": "c", "feature": "f"}, [], rules, NOW)
    assert expired == {"root", "x", "dangling"}
    only_heads = expired_commits(_graph(), {"main": "c"}, [], pb.GCRules(), NOW)
    assert only_heads == set(_graph()) - {"c"}


def test_an_old_commit_ends_the_walk_even_if_older_ancestors_are_young() -> None:
    # Clock skew: a parent younger than its child is not reached through an old child.
    commits = {c.id: c for c in [_commit("p", 1), _commit("old", 10, "p"), _commit("h", 0, "old")]}
    assert expired_commits(commits, {"main": "h"}, [], pb.GCRules(default_retention_days=7), NOW) == {"old", "p"}


def test_rules_and_run_ids_are_validated() -> None:
    with pytest.raises(InvalidArgument):
        validate_rules(pb.GCRules(default_retention_days=-1))
    with pytest.raises(InvalidArgument):
        validate_rules(pb.GCRules(branch_retention_days={"main": 10**6}))
    with pytest.raises(InvalidArgument):
        validate_run_id("../../etc")
    assert validate_run_id("20261122T104519Z-4a810362") == "20261122T104519Z-4a810362"


def test_the_export_of_an_engine_stops_when_its_caller_gives_up(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    graveler = open_graveler(MemStore(), adapter)
    retention = graveler.retention
    try:
        graveler.lifecycle.create_repository("repo", "local://repo", "", False)
        repo = graveler.refs.repository("repo")
        with pytest.raises(FailedPrecondition):  # no rules yet
            retention.prepare(repo, NO_DEADLINE)
        retention.set_rules(repo, pb.GCRules(default_retention_days=7))
        assert retention.get_rules(repo) == pb.GCRules(default_retention_days=7)
        with pytest.raises(DeadlineExceeded):
            retention.prepare(repo, Deadline(is_active=lambda: False))
        run = retention.prepare(repo, Deadline.after(60))
        assert run.commits == 1 and run.expired_commits == 0
        assert (tmp_path / "data" / "repo" / run.commits_location).is_file()
        retention.delete_rules(repo)
        assert retention.get_rules(repo) is None
    finally:
        graveler.close()
