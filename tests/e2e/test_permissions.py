"""RBAC as a user meets it: an Analysts member reads, and every write is refused (exit code 6)."""

from __future__ import annotations

from silt.launcher import Stack
from tests.e2e.conftest import Silt, stage_tree

REPO = "e2e-rbac"


def test_analyst_reads_but_cannot_write(stack: Stack, silt: Silt) -> None:
    silt("repo", "create", REPO)
    stage_tree(stack, REPO, "main", ["reports/q1.csv"])
    silt("commit", f"silt://{REPO}/main", "-m", "q1")

    silt.proc("auth", "users", "create", "ana")
    silt("auth", "groups", "add-member", "Analysts", "ana")
    key = silt("auth", "credentials", "create", "--user", "ana", "--json").json()
    assert silt("auth", "users", "show", "ana", "--json").json()["groups"] == ["Analysts"]
    ana = silt.as_user(key["access_key_id"], key["secret_access_key"])

    assert ana("auth", "whoami").out.startswith("ana ")
    assert REPO in [r["name"] for r in ana("repo", "list", "--json").json()]
    assert [i["path"] for i in ana("fs", "ls", f"silt://{REPO}/main/reports/", "--json").json()] == ["reports/q1.csv"]
    assert ana("log", f"silt://{REPO}/main", "--oneline").out.splitlines()[0].endswith("q1")

    for args in (
        ("branch", "create", f"silt://{REPO}/mine", "--source", "main"),
        ("fs", "rm", f"silt://{REPO}/main/reports/q1.csv"),
        ("commit", f"silt://{REPO}/main", "-m", "x", "--allow-empty"),
        ("repo", "create", "ana-repo"),
        ("repo", "delete", REPO, "--yes"),
        ("auth", "users", "list"),
    ):
        denied = ana.proc(*args, ok=False) if args[0] == "branch" else ana(*args, ok=False)
        assert denied.code == 6, (args, denied)
        assert "permission denied" in denied.err.lower() and denied.err.count("\n") == 1, denied.err

    wrong = silt.as_user(key["access_key_id"], "x" * 40)
    refused = wrong("repo", "list", ok=False)
    assert refused.code == 6 and "authenticated" in refused.err


GC_REPO = "e2e-gc-admin"


def test_writers_do_not_administer_retention(stack: Stack, silt: Silt) -> None:
    """A Developers member writes, but GC rules (0 days deletes history) are the admins'."""
    silt("repo", "create", GC_REPO)
    silt("auth", "users", "create", "dev")
    silt("auth", "groups", "add-member", "Developers", "dev")
    key = silt("auth", "credentials", "create", "--user", "dev", "--json").json()
    dev = silt.as_user(key["access_key_id"], key["secret_access_key"])

    dev("branch", "create", f"silt://{GC_REPO}/dev-work", "--source", "main")
    for args, action in (
        (("gc", "rules", "set", GC_REPO, "--default-days", "0"), "SetGCRules"),
        (("gc", "rules", "delete", GC_REPO), "DeleteGCRules"),
    ):
        denied = dev(*args, ok=False)
        assert denied.code == 6 and action in denied.err, (args, denied)
    assert not dev("gc", "rules", "show", GC_REPO, "--json").json().get("is_set")

    silt("gc", "rules", "set", GC_REPO, "--default-days", "30")
    assert dev("gc", "rules", "show", GC_REPO, "--json").json()["rules"]["default_retention_days"] == 30
    silt("gc", "rules", "delete", GC_REPO)
