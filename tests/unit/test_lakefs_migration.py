"""The migration's commit order and its ledger (cli/lakefs_migration/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.lakefs_migration.history import parents_first
from cli.lakefs_migration.ledger import Ledger
from cli.lakefs_migration.source import SourceCommit
from silt.client_base import ClientError


def _commit(commit_id: str, *parents: str, date: int = 0) -> SourceCommit:
    return SourceCommit(commit_id, parents, "someone", f"commit {commit_id}", date)


def test_every_commit_comes_after_its_parents_even_when_dates_say_otherwise() -> None:
    # A merge whose second parent is older in date but deeper in history than its first.
    commits = {
        c.id: c
        for c in [
            _commit("root", date=10),
            _commit("a", "root", date=50),
            _commit("b1", "root", date=20),
            _commit("b2", "b1", date=21),
            _commit("b3", "b2", date=22),
            _commit("merge", "a", "b3", date=30),
            _commit("after", "merge", date=5),  # a skewed clock
        ]
    }
    order = [c.id for c in parents_first(commits)]
    position = {commit_id: n for n, commit_id in enumerate(order)}
    for commit in commits.values():
        assert all(position[parent] < position[commit.id] for parent in commit.parents), order
    assert [c.id for c in parents_first(dict(reversed(list(commits.items()))))] == order


def test_a_deep_history_needs_no_recursion() -> None:
    commits = {"c0": _commit("c0")}
    for n in range(1, 20_000):
        commits[f"c{n}"] = _commit(f"c{n}", f"c{n - 1}")
    assert [c.id for c in parents_first(commits)][-1] == "c19999"


def test_an_incomplete_history_is_refused() -> None:
    with pytest.raises(ClientError, match="unknown parent"):
        parents_first({"a": _commit("a", "gone")})


def test_the_ledger_resumes_with_what_it_recorded(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    header = {"endpoint": "http://lakefs", "source": "repo", "target": "repo"}
    first = Ledger.open(path, header)
    first.note_created("initial")
    first.map("s1", "t1", objects=3, size=30)
    first.recording("s2")
    first.close()
    with path.open("a") as cut:
        cut.write('{"mapped": "s2", "to"')  # a line cut short by a kill

    again = Ledger.open(path, header)
    assert again.created == "initial" and again.mapped == {"s1": "t1"}
    assert again.unsure == "s2" and (again.objects, again.bytes) == (3, 30)
    again.map("s2", "t2", objects=1, size=5)
    again.close()

    third = Ledger.open(path, header)
    assert third.mapped == {"s1": "t1", "s2": "t2"} and third.unsure is None and third.objects == 4
    third.write_mapping(tmp_path / "map.tsv")
    assert (tmp_path / "map.tsv").read_text() == "s1\tt1\ns2\tt2\n"


def test_a_ledger_of_another_migration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    Ledger.open(path, {"endpoint": "e", "source": "a", "target": "a"}).close()
    with pytest.raises(ClientError, match="another migration"):
        Ledger.open(path, {"endpoint": "e", "source": "b", "target": "b"})
    assert json.loads(path.read_text().splitlines()[0])["source"] == "a"


def test_a_damaged_ledger_is_refused_not_guessed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    header = {"endpoint": "e", "source": "a", "target": "a"}
    Ledger.open(path, header).close()
    with path.open("a") as damaged:
        damaged.write("not json\n" + json.dumps({"mapped": "s", "to": "t"}) + "\n")
    with pytest.raises(ClientError, match="damaged"):
        Ledger.open(path, header)
