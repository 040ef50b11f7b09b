"""The compactor's calls need what graveler's equivalents need: compacting rewrites what a branch's
reads go through, as a commit does; its status is what reading the branch shows."""

from __future__ import annotations

from services.compactor.permissions import TABLE as COMPACTOR
from services.graveler.permissions import TABLE as GRAVELER


def test_compacting_needs_what_committing_needs() -> None:
    assert COMPACTOR["Compact"] == GRAVELER["Commit"]
    assert COMPACTOR["Trigger"] == GRAVELER["Commit"]


def test_reading_the_status_needs_what_reading_the_branch_needs() -> None:
    assert COMPACTOR["GetStatus"] == GRAVELER["GetBranch"]
