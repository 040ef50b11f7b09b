"""Refs: repositories, branches, tags and commits, and resolving ref expressions to commits."""

from engine.core.refs.manager import (
    COMMITS,
    GRAVELER_PARTITION,
    BranchRecord,
    RefManager,
    RepoHandle,
    Resolved,
    branch_tokens,
    new_commit,
    set_tokens,
)

__all__ = [
    "COMMITS",
    "GRAVELER_PARTITION",
    "BranchRecord",
    "RefManager",
    "RepoHandle",
    "Resolved",
    "branch_tokens",
    "new_commit",
    "set_tokens",
]
