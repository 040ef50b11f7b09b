"""A user's day, through the `silt` CLI against the running stack: import a tree, branch,
change and delete on the branch, diff, commit, merge, read an old version, revert."""

from __future__ import annotations

from pathlib import Path

import pytest

from silt.launcher import Stack
from tests.e2e.conftest import Silt, stage_tree

REPO = "e2e-flow"
TREE = [f"tables/t{t}/part-{i:03d}.csv" for t in range(3) for i in range(100)]


@pytest.fixture(scope="module")
def imported(stack: Stack, silt: Silt) -> str:
    """A repository with 300 objects committed on main; returns that commit's id."""
    silt.proc("repo", "create", REPO)
    # Object bytes arrive through the S3 gateway (test_gateway.py); here only their metadata is staged.
    stage_tree(stack, REPO, "main", TREE)
    done = silt("commit", f"silt://{REPO}/main", "-m", "initial import", "--meta", "source=e2e", "--json")
    return str(done.json()["id"])


def test_branch_change_diff_commit_merge_revert(stack: Stack, silt: Silt, imported: str) -> None:
    silt.proc("branch", "create", f"silt://{REPO}/dev", "--source", "main")
    assert {b["name"] for b in silt("branch", "list", f"silt://{REPO}", "--json").json()} == {"dev", "main"}

    changed = TREE[:5]
    stage_tree(stack, REPO, "dev", changed, version="v2")
    silt("fs", "rm", f"silt://{REPO}/dev/{TREE[10]}")
    removed = silt("fs", "rm", "-r", f"silt://{REPO}/dev/tables/t2")
    assert "Removed 100 object(s)" in removed.out

    uncommitted = silt.proc("diff", f"silt://{REPO}/dev")
    lines = uncommitted.out.splitlines()
    assert f"~ {TREE[0]}" in lines and f"- {TREE[10]}" in lines and f"- {TREE[250]}" in lines
    assert len(lines) == 5 + 1 + 100

    commit = silt("commit", f"silt://{REPO}/dev", "-m", "change and delete", "--json").json()
    assert silt("diff", f"silt://{REPO}/dev", "--json").json() == []
    diff = silt("diff", f"silt://{REPO}/main", f"silt://{REPO}/dev", "--json").json()
    assert {d["type"] for d in diff} == {"changed", "removed"} and len(diff) == 106

    merged = silt("merge", f"silt://{REPO}/dev", "main", "-m", "merge dev", "--json").json()
    assert merged["parents"][1] == commit["id"]

    stat = silt("fs", "stat", f"silt://{REPO}/main/{TREE[0]}", "--json").json()
    assert stat["etag"] == f"v2-{TREE[0]}"
    gone = silt.proc("fs", "stat", f"silt://{REPO}/main/{TREE[10]}", ok=False)
    assert gone.code == 4 and gone.err.count("\n") == 1 and "not found" in gone.err

    # The old version stays readable by commit id (and by ref expression).
    old = silt("fs", "stat", f"silt://{REPO}/{imported}/{TREE[0]}", "--json").json()
    assert old["etag"] == f"v1-{TREE[0]}"
    assert silt("fs", "stat", f"silt://{REPO}/main~1/{TREE[10]}").code == 0

    listing = silt("fs", "ls", f"silt://{REPO}/main/tables/", "--json").json()
    assert [i["path"] for i in listing] == ["tables/t0/", "tables/t1/"]

    silt("tag", "create", f"silt://{REPO}/before-revert", "main")
    reverted = silt("branch", "revert", f"silt://{REPO}/main", "main", "--parent-number", "1", "-y", "--json").json()
    assert reverted["id"]
    back = silt("fs", "stat", f"silt://{REPO}/main/{TREE[250]}", "--json").json()
    assert back["etag"] == f"v1-{TREE[250]}"
    assert silt("diff", f"silt://{REPO}/main", imported, "--two-way", "--json").json() == []

    log = silt("log", f"silt://{REPO}/main", "--json").json()
    messages = [c["message"] for c in log]
    assert messages[1] == "merge dev" and "initial import" in messages
    assert silt("tag", "list", f"silt://{REPO}", "--json").json()[0]["id"] == "before-revert"


def test_merge_conflicts_are_listed_with_exit_code_5(stack: Stack, silt: Silt, imported: str) -> None:
    key = TREE[42]
    for branch in ("left", "right"):
        silt("branch", "create", f"silt://{REPO}/{branch}", "--source", imported)
        stage_tree(stack, REPO, branch, [key], version=branch)
        silt("commit", f"silt://{REPO}/{branch}", "-m", f"{branch} edit")
    stopped = silt.proc("merge", f"silt://{REPO}/left", "right", ok=False)
    assert stopped.code == 5
    assert f"conflict: {key}" in stopped.out and "1 conflict(s)" in stopped.err
    assert stopped.err.count("\n") == 1
    silt("merge", f"silt://{REPO}/left", "right", "--strategy", "source-wins")
    assert silt("fs", "stat", f"silt://{REPO}/right/{key}", "--json").json()["etag"] == f"left-{key}"


def test_reset_and_cherry_pick(stack: Stack, silt: Silt, imported: str) -> None:
    silt("branch", "create", f"silt://{REPO}/scratch", "--source", imported)
    stage_tree(stack, REPO, "scratch", TREE[:3], version="junk")
    silt("branch", "reset", f"silt://{REPO}/scratch/{TREE[0]}", "-y")
    assert len(silt("diff", f"silt://{REPO}/scratch", "--json").json()) == 2
    silt("branch", "reset", f"silt://{REPO}/scratch", "--yes")
    assert silt("diff", f"silt://{REPO}/scratch", "--json").json() == []

    stage_tree(stack, REPO, "scratch", ["extra/new.csv"], version="pick")
    picked = silt("commit", f"silt://{REPO}/scratch", "-m", "add extra", "--json").json()
    silt("branch", "create", f"silt://{REPO}/target", "--source", imported)
    silt("branch", "cherry-pick", f"silt://{REPO}/target", picked["id"])
    assert silt("fs", "stat", f"silt://{REPO}/target/extra/new.csv").code == 0
    silt("branch", "delete", f"silt://{REPO}/target", "--yes")
    assert silt("branch", "list", f"silt://{REPO}", "--json", ok=False).code == 0


def test_lakectl_uris_work_in_every_command_group(silt: Silt, tmp_path: Path) -> None:
    """lakectl's `lakefs://repo/ref/path` is taken wherever `silt://` is, so a lakeFS user's
    habits and scripts carry over: repositories, branches, tags, objects, history and GC rules."""
    repo = "e2e-lakectl-uris"
    uri = f"lakefs://{repo}"
    silt("repo", "create", uri)
    assert silt("repo", "show", uri, "--json").json()["name"] == repo

    silt("branch", "create", f"{uri}/dev", "--source", "main")
    assert {b["name"] for b in silt("branch", "list", uri, "--json").json()} == {"dev", "main"}
    data = tmp_path / "hello.txt"
    data.write_text("hello from lakectl\n")
    silt("fs", "upload", str(data), f"{uri}/dev/docs/hello.txt")
    assert silt("fs", "cat", f"{uri}/dev/docs/hello.txt").out == "hello from lakectl\n"
    assert [i["path"] for i in silt("fs", "ls", f"{uri}/dev/docs/", "--json").json()] == ["docs/hello.txt"]
    assert silt("fs", "stat", f"{uri}/dev/docs/hello.txt", "--json").json()["size"] == len(data.read_text())
    assert [d["key"] for d in silt("diff", f"{uri}/dev", "--json").json()] == ["docs/hello.txt"]

    commit = silt("commit", f"{uri}/dev", "-m", "hello", "--json").json()
    # The right side of a diff and a merge's destination may be URIs of either scheme too.
    assert len(silt("diff", f"{uri}/main", f"{uri}/dev", "--json").json()) == 1
    merged = silt("merge", f"{uri}/dev", f"{uri}/main", "-m", "merge dev", "--json").json()
    assert merged["parents"][1] == commit["id"]
    assert silt("log", f"{uri}/main", "--json").json()[0]["id"] == merged["id"]

    silt("tag", "create", f"{uri}/v1", "main")
    assert silt("tag", "show", f"{uri}/v1", "--json").json()["commit_id"] == merged["id"]
    silt("fs", "rm", f"{uri}/main/docs/hello.txt")
    silt("branch", "reset", f"{uri}/main", "-y")
    assert silt("fs", "stat", f"silt://{repo}/main/docs/hello.txt").code == 0

    silt("gc", "rules", "set", uri, "--default-days", "7")
    assert silt("gc", "rules", "show", uri, "--json").json()["rules"]["default_retention_days"] == 7

    # A scheme that is neither is refused with the usage exit code, naming both forms.
    wrong = silt("fs", "ls", f"s3://{repo}/main/", ok=False)
    assert wrong.code == 2 and "silt://" in wrong.err and "lakefs://" in wrong.err
    silt("repo", "delete", uri, "--yes")
