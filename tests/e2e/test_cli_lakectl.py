"""lakectl's habits in the `silt` CLI, against the running stack: `branch-protect`, `annotate`
(the last commit per object) and `fs presign` (a URL that reads one object without credentials)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from silt.client_base import EXIT_CONFLICT, EXIT_DENIED, EXIT_NOT_FOUND, EXIT_USAGE
from silt.errors import is_protection_refusal
from tests.e2e.conftest import Silt


def _upload(silt: Silt, tmp_path: Path, uri: str, text: str) -> None:
    source = tmp_path / "upload.txt"
    source.write_text(text)
    silt("fs", "upload", str(source), uri, "-q")


def test_branch_protect_add_list_delete(silt: Silt, tmp_path: Path) -> None:
    repo = "e2e-cli-branch-protect"
    silt("repo", "create", f"lakefs://{repo}")
    assert silt("branch-protect", "list", f"silt://{repo}", "--json").json() == []
    assert "no branch protection rules" in silt("branch-protect", "list", repo).out

    silt("branch-protect", "add", f"lakefs://{repo}", "main")
    silt(
        "branch-protect",
        "add",
        f"silt://{repo}",
        "release-*",
        "--required-approvals",
        "2",
        "--required-check",
        "ci/test",
    )
    rules = silt("branch-protect", "list", f"silt://{repo}", "--json").json()
    assert rules == [
        {"pattern": "main", "block_direct_writes": True, "required_approvals": 0, "required_checks": []},
        {"pattern": "release-*", "block_direct_writes": True, "required_approvals": 2, "required_checks": ["ci/test"]},
    ]
    # Adding a pattern again replaces its rule rather than adding a second one.
    silt("branch-protect", "add", f"silt://{repo}", "release-*")
    assert [r["required_approvals"] for r in silt("branch-protect", "list", repo, "--json").json()] == [0, 0]

    source = tmp_path / "x.txt"
    source.write_text("x")
    refused = silt("fs", "upload", str(source), f"silt://{repo}/main/x.txt", "-q", ok=False)
    assert refused.code == EXIT_DENIED and is_protection_refusal(refused.err)

    silt("branch-protect", "delete", f"silt://{repo}", "main")
    assert [r["pattern"] for r in silt("branch-protect", "list", repo, "--json").json()] == ["release-*"]
    _upload(silt, tmp_path, f"silt://{repo}/main/x.txt", "x")  # writable again

    missing = silt("branch-protect", "delete", f"silt://{repo}", "main", ok=False)
    assert missing.code == EXIT_NOT_FOUND and "no branch protection rule 'main'" in missing.err
    bad = silt("branch-protect", "list", f"silt://{repo}/main", ok=False)
    assert bad.code == EXIT_USAGE


def test_annotate_names_the_last_commit_of_each_object(silt: Silt, tmp_path: Path) -> None:
    repo = "e2e-cli-annotate"
    silt("repo", "create", repo)
    _upload(silt, tmp_path, f"silt://{repo}/main/data/a.csv", "a1")
    _upload(silt, tmp_path, f"silt://{repo}/main/data/b.csv", "b1")
    _upload(silt, tmp_path, f"silt://{repo}/main/data/deep/c.csv", "c1")
    first = silt("commit", f"silt://{repo}/main", "-m", "first", "--json").json()["id"]
    _upload(silt, tmp_path, f"silt://{repo}/main/data/b.csv", "b2")
    second = silt("commit", f"silt://{repo}/main", "-m", "change b", "--json").json()["id"]
    _upload(silt, tmp_path, f"silt://{repo}/main/data/new.csv", "n")  # staged, never committed

    one_level = silt("annotate", f"lakefs://{repo}/main/data/", "--json").json()
    assert [(a["path"], a["commit_id"], a["message"]) for a in one_level] == [
        ("data/a.csv", first, "first"),
        ("data/b.csv", second, "change b"),
        ("data/new.csv", "", ""),
    ]
    everything = silt("annotate", f"silt://{repo}/main/data/", "-r", "--json").json()
    assert {a["path"]: a["commit_id"] for a in everything}["data/deep/c.csv"] == first
    # At the first commit, b's last change is that commit.
    at_first = silt("annotate", f"silt://{repo}/{first}/data/b.csv", "--json").json()
    assert [(a["path"], a["commit_id"]) for a in at_first] == [("data/b.csv", first)]
    human = silt("annotate", f"silt://{repo}/main/data/").out
    assert second[:12] in human and "(uncommitted)" in human


def test_fs_presign_reads_without_credentials_and_fails_clearly(silt: Silt, tmp_path: Path) -> None:
    repo = "e2e-cli-presign"
    silt("repo", "create", repo)
    _upload(silt, tmp_path, f"silt://{repo}/main/report.csv", "id,value\n1,2\n")
    url = silt("fs", "presign", f"lakefs://{repo}/main/report.csv").out.strip()
    assert url.startswith("http") and silt("fs", "presign", f"silt://{repo}/main/report.csv", "--json").json()["url"]
    with urllib.request.urlopen(url, timeout=30) as answer:  # no credentials: the URL carries them
        assert answer.read() == b"id,value\n1,2\n"
    tampered = url.replace("report.csv", "other.csv")
    try:
        urllib.request.urlopen(tampered, timeout=30)
        raise AssertionError("a tampered presigned URL was served")
    except urllib.error.HTTPError as refused:
        assert refused.code in (403, 404)

    missing = silt("fs", "presign", f"silt://{repo}/main/nothing.csv", ok=False)
    assert missing.code == EXIT_NOT_FOUND and missing.err.count("\n") == 1
    assert silt("fs", "presign", f"silt://{repo}/main", ok=False).code == EXIT_USAGE


def test_lakectl_syntax_and_commands_over_the_rest_api(silt: Silt, tmp_path: Path) -> None:
    repo = "e2e-cli-lakectl-syntax"
    created = silt("repo", "create", f"lakefs://{repo}", f"local://{repo}", "-d", "main")
    assert f"Repository: lakefs://{repo}" in created.out and f"local://{repo}" in created.out
    silt("branch", "create", f"lakefs://{repo}/dev", "--source", f"lakefs://{repo}/main")
    wrong_repo = silt("branch", "create", f"lakefs://{repo}/x", "--source", "lakefs://other/main", ok=False)
    assert wrong_repo.code == EXIT_USAGE
    _upload(silt, tmp_path, f"lakefs://{repo}/dev/table.csv", "id\n1\n")
    first = silt("commit", f"lakefs://{repo}/dev", "-m", "first", "--json").json()["id"]
    _upload(silt, tmp_path, f"lakefs://{repo}/dev/other.txt", "x")
    second = silt("commit", f"lakefs://{repo}/dev", "-m", "second", "--json").json()["id"]
    silt("tag", "create", f"lakefs://{repo}/v1", f"lakefs://{repo}/dev~1")
    assert silt("tag", "create", f"lakefs://{repo}/v1", "dev", ok=False).code == EXIT_CONFLICT
    silt("tag", "create", f"lakefs://{repo}/v1", f"lakefs://{repo}/dev", "-f")  # lakectl's: replaces it
    assert silt("tag", "show", f"lakefs://{repo}/v1", "--json").json()["commit_id"] == second

    assert [c["id"] for c in silt("log", f"lakefs://{repo}/dev", "--amount", "1", "--json").json()] == [second]
    touched = silt("log", f"lakefs://{repo}/dev", "--objects", "table.csv", "--json").json()
    assert [c["id"] for c in touched] == [first]
    assert silt("show", "commit", f"lakefs://{repo}/v1", "--json").json()["id"] == second
    base = silt("find-merge-base", f"lakefs://{repo}/dev", f"lakefs://{repo}/main", "--json").json()
    assert base["destination_commit_id"] == base["base_commit_id"]

    # diff as lakectl's: what dev brings since it left main (three-dot); --two-way also shows main's own change.
    _upload(silt, tmp_path, f"lakefs://{repo}/main/main-only.txt", "m")
    silt("commit", f"lakefs://{repo}/main", "-m", "main's own")
    three_dot = silt("diff", f"lakefs://{repo}/main", f"lakefs://{repo}/dev", "--json").json()
    assert three_dot == [{"key": "other.txt", "type": "added"}, {"key": "table.csv", "type": "added"}]
    two_way = silt("diff", f"lakefs://{repo}/main", f"lakefs://{repo}/dev", "--two-way", "--json").json()
    assert {"key": "main-only.txt", "type": "removed"} in two_way and len(two_way) == 3
    both = silt("diff", f"lakefs://{repo}/main", "dev", "--two-way", "--three-dot", ok=False)
    assert both.code == EXIT_USAGE

    stat = silt("fs", "stat", f"lakefs://{repo}/dev/table.csv", "--json").json()
    assert stat["content_type"] == "text/csv"  # guessed from the name
    silt("fs", "update-metadata", f"lakefs://{repo}/dev/table.csv", "--metadata", "owner=ana,tier=gold")
    assert silt("fs", "stat", f"lakefs://{repo}/dev/table.csv", "--json").json()["metadata"] == {
        "owner": "ana",
        "tier": "gold",
    }
    # This stack allows no import prefix: the server's own refusal, in one line, exit code 2.
    outside = silt(
        "fs",
        "stage",
        f"lakefs://{repo}/dev/staged.csv",
        "--location",
        "s3://elsewhere/staged.csv",
        "--size",
        "3",
        "--checksum",
        "abc",
        ok=False,
    )
    assert outside.code == EXIT_USAGE and outside.err.count("\n") == 1

    # Destructive commands refuse without a terminal and without -y; -y does it.
    refused = silt("tag", "delete", f"lakefs://{repo}/v1", ok=False)
    assert refused.code == EXIT_USAGE and "--yes" in refused.err
    silt("tag", "delete", f"lakefs://{repo}/v1", "-y")
    assert silt("tag", "list", f"lakefs://{repo}", "--json").json() == []

    manifest = silt("refs-dump", f"lakefs://{repo}").json()
    assert manifest["commits_meta_range_id"] and manifest["branches_meta_range_id"]
    missing = silt("usage", "summary", ok=False)  # Silt keeps no usage report: lakeFS's 404, its message
    assert missing.code == EXIT_NOT_FOUND and "usage report" in missing.err


def test_gc_rules_with_last_access_rules_over_the_rest_api(silt: Silt) -> None:
    repo = "e2e-cli-gc-rules"
    silt("repo", "create", f"lakefs://{repo}")
    assert silt("gc", "rules", "show", repo, "--json").json()["is_set"] is False
    done = silt(
        "gc", "rules", "set", f"lakefs://{repo}", "--default-days", "7", "--branch", "main=30",
        "--last-access", "main=30:logs/", "--last-access", "main=30:tmp/a=b:c",
        "--last-access", "scratch=5:", "--last-access", "main=30:logs/",
    )  # fmt: skip
    assert "2 last-access rules" in done.out
    shown = silt("gc", "rules", "show", f"lakefs://{repo}", "--json").json()
    assert shown["is_set"] and shown["rules"]["branch_retention_days"] == {"main": 30}
    assert shown["rules"]["last_access_rules"] == [
        {"branch": "main", "prefixes": ["logs/", "tmp/a=b:c"], "days": 30},
        {"branch": "scratch", "prefixes": [""], "days": 5},
    ]
    human = silt("gc", "rules", "show", repo).out
    assert "expire by last access" in human and "'logs/' 'tmp/a=b:c'" in human

    malformed = silt("gc", "rules", "set", repo, "--default-days", "1", "--last-access", "main:logs/", ok=False)
    assert malformed.code == EXIT_USAGE and "BRANCH=DAYS:PREFIX" in malformed.err
    too_long = silt("gc", "rules", "set", repo, "--default-days", "1", "--last-access", "main=3651:x", ok=False)
    assert too_long.code == EXIT_USAGE and "3650" in too_long.err
    assert silt("gc", "rules", "show", repo, "--json").json()["rules"]["default_retention_days"] == 7
    silt("gc", "rules", "delete", repo)
    assert silt("gc", "rules", "show", repo, "--json").json()["is_set"] is False
    assert silt("gc", "rules", "show", "no-such-repo", ok=False).code == EXIT_NOT_FOUND
