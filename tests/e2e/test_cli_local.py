"""`silt local`: lakectl's local checkouts against the real stack — clone, status, commit, pull,
checkout and list, conflicts and bad input."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import Silt


@pytest.fixture
def repo(silt: Silt) -> str:
    name = f"local-{uuid.uuid4().hex[:8]}"
    silt("repo", "create", name)
    return name


def _seed(silt: Silt, repo: str, tmp_path: Path) -> None:
    """main: data/a.txt, data/sub/b.txt, and other.txt outside the cloned path."""
    src = tmp_path / "seed"
    (src / "data" / "sub").mkdir(parents=True)
    (src / "data" / "a.txt").write_text("alpha\n")
    (src / "data" / "sub" / "b.txt").write_text("beta\n")
    (src / "other.txt").write_text("other\n")
    silt("fs", "upload", "-r", "-q", str(src), f"silt://{repo}/main/")
    silt("commit", f"silt://{repo}/main", "-m", "seed")


def _status(silt: Silt, directory: Path) -> dict:
    return json.loads(silt("local", "status", str(directory), "--json").out)


def _changes(items: list[dict]) -> set[tuple[str, str]]:
    return {(i["type"], i["path"]) for i in items}


def test_round_trip_pull_and_conflict(silt: Silt, repo: str, tmp_path: Path) -> None:
    _seed(silt, repo, tmp_path)
    work = tmp_path / "work"
    cloned = json.loads(silt("local", "clone", f"silt://{repo}/main/data", str(work), "-q", "--json").out)
    assert cloned["files"] == 2
    assert (work / "a.txt").read_text() == "alpha\n"
    assert (work / "sub" / "b.txt").read_text() == "beta\n"
    assert not (work / "other.txt").exists()
    ref = (work / ".lakefs_ref.yaml").read_text()
    assert f"src: lakefs://{repo}/main/data/" in ref and f"at_head: {cloned['at_head']}" in ref
    assert _status(silt, work)["local"] == []

    # Edit (same size: the content check decides), add, delete.
    (work / "a.txt").write_text("ALPHA\n")
    (work / "new.txt").write_text("new\n")
    (work / "sub" / "b.txt").unlink()
    status = _status(silt, work)
    assert _changes(status["local"]) == {("modified", "a.txt"), ("added", "new.txt"), ("removed", "sub/b.txt")}
    assert status["remote"] == []
    human = silt("local", "status", str(work)).out
    assert "new.txt" in human and "modified" in human

    committed = json.loads(silt("local", "commit", str(work), "-m", "local edits", "--meta", "k=v", "--json").out)
    assert _status(silt, work)["local"] == []
    assert _status(silt, work)["at_head"] == committed["commit"]
    assert silt("fs", "cat", f"silt://{repo}/main/data/a.txt").out == "ALPHA\n"
    second = tmp_path / "second"
    silt("local", "clone", f"silt://{repo}/main/data", str(second), "-q")
    assert sorted(p.relative_to(second).as_posix() for p in second.rglob("*") if p.is_file()) == [
        ".lakefs_ref.yaml",
        "a.txt",
        "new.txt",
    ]

    # Someone else changes the branch: status shows it, pull brings it in.
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("from elsewhere\n")
    silt("fs", "upload", "-q", str(theirs), f"silt://{repo}/main/data/theirs.txt")
    silt("fs", "rm", f"silt://{repo}/main/data/new.txt")
    silt("commit", f"silt://{repo}/main", "-m", "someone else")
    assert _changes(_status(silt, work)["remote"]) == {("added", "theirs.txt"), ("removed", "new.txt")}
    silt("local", "pull", str(work), "-q")
    assert (work / "theirs.txt").read_text() == "from elsewhere\n"
    assert not (work / "new.txt").exists()
    assert _status(silt, work)["local"] == []

    # A local edit to a path that changed remotely: pull refuses and changes nothing.
    silt("fs", "upload", "-q", str(theirs), f"silt://{repo}/main/data/a.txt")
    silt("commit", f"silt://{repo}/main", "-m", "a.txt again")
    (work / "a.txt").write_text("mine, not theirs\n")
    refused = silt("local", "pull", str(work), ok=False)
    assert refused.code == 5
    assert "conflict: a.txt" in refused.out
    assert refused.err.count("\n") == 1 and refused.err.startswith("silt: ")
    assert (work / "a.txt").read_text() == "mine, not theirs\n"
    # Commit refuses too (pull first), exit 5; --force pull overwrites.
    assert silt("local", "commit", str(work), "-m", "clobber", ok=False).code == 5
    silt("local", "pull", str(work), "--force", "-q")
    assert (work / "a.txt").read_text() == "from elsewhere\n"
    assert _status(silt, work)["local"] == []

    # Uncommitted changes on the branch under the path that are not ours: commit refuses.
    silt("fs", "upload", "-q", str(theirs), f"silt://{repo}/main/data/staged.txt")
    (work / "mine.txt").write_text("mine\n")
    staged = silt("local", "commit", str(work), "-m", "would take theirs", ok=False)
    assert staged.code == 5 and "uncommitted" in staged.err and "conflict: staged.txt" in staged.out

    # Uncommitted changes outside the path are not the checkout's: its commit leaves them staged.
    silt("branch", "reset", f"lakefs://{repo}/main/data/staged.txt", "-y")
    silt("fs", "upload", "-q", str(theirs), f"silt://{repo}/main/outside.txt")
    silt("local", "commit", str(work), "-m", "only mine")
    assert silt("diff", f"lakefs://{repo}/main", "--json").json() == [{"key": "outside.txt", "type": "added"}]
    assert "data/mine.txt" in silt("fs", "ls", f"lakefs://{repo}/main~0/data/", "--json").out


def test_checkout_list_lakefs_uri_and_bad_input(silt: Silt, repo: str, tmp_path: Path) -> None:
    _seed(silt, repo, tmp_path)
    silt("tag", "create", f"silt://{repo}/v1", "main")
    silt("branch", "create", f"silt://{repo}/dev", "--source", "main")
    extra = tmp_path / "extra.txt"
    extra.write_text("dev only\n")
    silt("fs", "upload", "-q", str(extra), f"silt://{repo}/dev/data/extra.txt")
    silt("commit", f"silt://{repo}/dev", "-m", "dev")

    # lakectl's URI, through the real entry point; the directory defaults to the path's last element.
    silt.proc("local", "clone", f"lakefs://{repo}/v1/data", "-q")
    work = silt.cwd / "data"
    assert (work / "a.txt").read_text() == "alpha\n"

    # A tag takes no commits: exit 2, one line.
    (work / "a.txt").write_text("changed on a tag\n")
    on_tag = silt("local", "commit", str(work), "-m", "x", ok=False)
    assert on_tag.code == 2 and "tag" in on_tag.err and on_tag.err.count("\n") == 1
    # Checkout refuses to lose the edit, then --force switches to dev.
    assert silt("local", "checkout", str(work), "--ref", "dev", ok=False).code == 5
    assert (work / "a.txt").read_text() == "changed on a tag\n"
    silt("local", "checkout", str(work), "--ref", "dev", "--force", "-q")
    assert (work / "a.txt").read_text() == "alpha\n"
    assert (work / "extra.txt").read_text() == "dev only\n"
    assert _status(silt, work)["src"] == f"lakefs://{repo}/dev/data/"

    listed = json.loads(silt("local", "list", str(silt.cwd), "--json").out)
    assert {"directory": str(work), "src": f"lakefs://{repo}/dev/data/", "at_head": _status(silt, work)["at_head"]} in [
        {k: r[k] for k in ("directory", "src", "at_head")} for r in listed
    ]

    # Bad input: a non-empty directory for clone, a directory that is no checkout.
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    cloned = silt("local", "clone", f"silt://{repo}/main/data", str(busy), ok=False)
    assert cloned.code == 5 and cloned.err.count("\n") == 1 and "not an empty directory" in cloned.err
    plain = silt("local", "status", str(busy), ok=False)
    assert plain.code == 4 and ".lakefs_ref.yaml" in plain.err and plain.err.count("\n") == 1
    assert silt("local", "clone", f"silt://{repo}/nope/data", str(tmp_path / "n"), ok=False).code == 4


def test_init_connects_a_directory_without_downloading(silt: Silt, repo: str, tmp_path: Path) -> None:
    _seed(silt, repo, tmp_path)
    work = tmp_path / "existing"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")  # as main has it: no change
    (work / "fresh.csv").write_text("id\n1\n")
    silt("local", "init", f"lakefs://{repo}/main/data/", str(work))
    assert not (work / "sub").exists()  # nothing downloaded
    assert _changes(_status(silt, work)["local"]) == {("added", "fresh.csv"), ("removed", "sub/b.txt")}
    again = silt("local", "init", f"lakefs://{repo}/main/data/", str(work), ok=False)
    assert again.code == 5 and "--force" in again.err
    silt("local", "init", f"lakefs://{repo}/main/", str(work), "--force")
    assert _status(silt, work)["src"] == f"lakefs://{repo}/main/"
