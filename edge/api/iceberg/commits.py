"""Committing each catalog change, when the server is set to (`api.iceberg.commit_per_change`).

A change is committed as a graveler commit of the prefixes it touched only: the namespace's
marker, or the whole of each table's directory (its pointer, its metadata files and the
manifests and data files the client wrote under it before the catalog commit that names them),
never the rest of the branch, which may hold the user's unrelated staged changes. The commit's
right (CommitBranch) is checked before the change is made, so a caller who may not commit
changes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import Request

from edge.api.context import Context
from edge.api.errors import ApiError
from edge.api.iceberg.errors import IcebergError
from edge.api.iceberg.store import Where
from silt.errors import SiltError
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import COMMIT_BRANCH, branch_resource

OPERATION_KEY = "iceberg_operation"


def enabled(request: Request) -> bool:
    """Whether this server commits each catalog change (set on the catalog app at start-up)."""
    return bool(getattr(request.app.state, "commit_per_change", False))


@dataclass
class Change:
    """What a catalog change touched, filled in by the route as it learns it."""

    prefixes: list[str]


def commit_request(
    where: Where, operation: str, name: str, prefixes: Sequence[str], committer: str
) -> api.CommitRequest:
    """The commit of one catalog change: its prefixes only, a message naming the operation and
    what it changed ("iceberg: commit table db.events"), the operation in its metadata."""
    return api.CommitRequest(
        repository=where.repository,
        branch=where.ref,
        message=f"iceberg: {operation} {name}",
        metadata={OPERATION_KEY: operation.replace(" ", "_")},
        committer=committer,
        # A concurrent change's commit may have taken this one's keys along: nothing is left,
        # and the change is committed all the same.
        allow_empty=True,
        prefixes=sorted(set(prefixes)),
    )


@asynccontextmanager
async def committed(
    request: Request, ctx: Context, where: Where, operation: str, name: str, prefixes: Sequence[str] = ()
) -> AsyncIterator[Change]:
    """Around a catalog change on where's branch: with the setting on, CommitBranch is checked
    first, and when the change succeeds its prefixes (those given and those the route adds to
    the yielded Change) are committed. A commit that then fails leaves the change staged: 500
    CommitStateUnknownException, as the client must reload to see what stands."""
    change = Change(list(prefixes))
    if not enabled(request):
        yield change
        return
    await ctx.authorize(COMMIT_BRANCH, branch_resource(where.repository, where.ref))
    yield change
    if not change.prefixes:
        return
    commit = commit_request(where, operation, name, change.prefixes, ctx.caller.user_id)
    try:
        await ctx.call(ctx.backend.graveler.Commit, commit)
    except (ApiError, SiltError) as exc:
        raise IcebergError(
            500,
            f"the change is staged on {where.ref} but its commit failed: {exc}",
            "CommitStateUnknownException",
        ) from None
