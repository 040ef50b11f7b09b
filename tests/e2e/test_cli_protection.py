"""Branch protection as the CLI meets it: every command that changes a protected branch (upload
through the S3 gateway, rm, commit, reset, revert, deleting a branch, a direct merge into a branch
that requires approvals) is refused by the server with one readable line and the "denied" exit
code, and nothing changes on the branch."""

from __future__ import annotations

from pathlib import Path

from silt.client_base import EXIT_DENIED
from silt.errors import is_protection_refusal
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.launcher import Stack
from tests.e2e.conftest import Silt, graveler_stub

REPO = "cli-protected"


def _refused(silt: Silt, *args: str) -> str:
    result = silt(*args, ok=False)
    assert result.code == EXIT_DENIED, f"silt {' '.join(args)} -> {result.code}: {result.err}{result.out}"
    assert is_protection_refusal(result.err), result.err
    assert "Traceback" not in result.err
    return result.err


def test_cli_writes_to_a_protected_branch_are_refused(stack: Stack, silt: Silt, tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("payload")
    silt("repo", "create", REPO)
    silt("fs", "upload", str(data), f"silt://{REPO}/main/kept.txt", "-q")
    first = silt("commit", f"silt://{REPO}/main", "-m", "first", "--json").json()["id"]
    silt("branch", "create", f"silt://{REPO}/feature", "--source", "main")
    silt("branch", "create", f"silt://{REPO}/stable", "--source", "main")
    silt("fs", "upload", str(data), f"silt://{REPO}/feature/new.txt", "-q")
    silt("commit", f"silt://{REPO}/feature", "-m", "feature work")
    stub = graveler_stub(stack)
    stub.SetBranchProtection(
        api.SetBranchProtectionRequest(
            repository=REPO,
            rules=[
                pb.BranchProtectionRule(pattern="main", required_approvals=1),
                pb.BranchProtectionRule(pattern="stab*", block_direct_writes=True),
            ],
        ),
        timeout=30,
    )

    _refused(silt, "fs", "upload", str(data), f"silt://{REPO}/main/direct.txt", "-q")
    _refused(silt, "fs", "rm", f"silt://{REPO}/main/kept.txt")
    _refused(silt, "commit", f"silt://{REPO}/main", "-m", "direct", "--allow-empty")
    _refused(silt, "branch", "reset", f"silt://{REPO}/main", "--hard", first, "-y")
    _refused(silt, "branch", "revert", f"silt://{REPO}/main", first, "-y")
    _refused(silt, "branch", "delete", f"silt://{REPO}/stable", "--yes")
    assert "pull request" in _refused(silt, "merge", f"silt://{REPO}/feature", "main")

    head = stub.GetBranch(api.GetBranchRequest(repository=REPO, name="main"), timeout=30)
    assert head.commit_id == first
    assert stub.GetBranch(api.GetBranchRequest(repository=REPO, name="stable"), timeout=30).commit_id == first
    listed = silt("fs", "ls", f"silt://{REPO}/main/", "--json").json()
    assert [row["path"] for row in listed] == ["kept.txt"]
    # The unprotected branch still takes writes.
    silt("fs", "upload", str(data), f"silt://{REPO}/feature/more.txt", "-q")
