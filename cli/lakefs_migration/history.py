"""The order commits are recorded in: every commit after all of its parents."""

from __future__ import annotations

from collections.abc import Mapping

from cli.lakefs_migration.source import SourceCommit
from silt.client_base import EXIT_FAILURE, ClientError


def parents_first(commits: Mapping[str, SourceCommit]) -> list[SourceCommit]:
    """Commits in an order where each comes after its parents: by depth (the longest path from a
    root), then date and id, so that a rerun orders them alike. Iterative: histories are deep."""
    depth: dict[str, int] = {}
    for start in commits:
        stack = [start]
        while stack:
            commit_id = stack[-1]
            if commit_id in depth:
                stack.pop()
                continue
            commit = commits[commit_id]
            missing = [parent for parent in commit.parents if parent not in commits]
            if missing:
                unknown = f"{commit_id} has unknown parent {missing[0]}"
                raise ClientError(f"source history is incomplete: {unknown}", EXIT_FAILURE)
            pending = [parent for parent in commit.parents if parent not in depth]
            if pending:
                if any(parent in stack for parent in pending):
                    raise ClientError(f"source history has a cycle through {commit_id}", EXIT_FAILURE)
                stack.extend(pending)
                continue
            depth[commit_id] = 1 + max((depth[parent] for parent in commit.parents), default=-1)
            stack.pop()
    return sorted(commits.values(), key=lambda c: (depth[c.id], c.creation_date, c.id))
