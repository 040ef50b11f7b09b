"""The catalog's own actions (silt/iam_actions.py `catalog:*`, lakeFS's names and resources), asked
of auth before a request reads or writes anything, so that a refusal says nothing of what
exists. They come beside the object actions on the files the request reads and writes
(edge/api/iceberg/store.py), as a lakeFS user needs both catalog: and fs: statements. Resources
name the repository and the namespace below the ref, never the ref: a grant holds on every
branch, tag and commit."""

from __future__ import annotations

from edge.api.context import Context
from edge.api.iceberg.store import Where
from silt import iam_actions as a


def namespace_resource(where: Where) -> str:
    return a.catalog_namespace_resource(where.repository, ".".join(where.levels))


def view_resource(where: Where, name: str) -> str:
    return a.catalog_view_resource(where.repository, ".".join(where.levels), name)


def table_resource(where: Where, name: str) -> str:
    return a.catalog_table_resource(where.repository, ".".join(where.levels), name)


async def on_namespace(ctx: Context, action: str, where: Where) -> None:
    """403 ForbiddenException unless the caller may do action on the namespace (for a listing
    of a ref's top level, on the repository's root namespace)."""
    await ctx.authorize(action, namespace_resource(where))


async def on_table(ctx: Context, action: str, where: Where, name: str) -> None:
    await ctx.authorize(action, table_resource(where, name))


async def on_view(ctx: Context, action: str, where: Where, name: str) -> None:
    await ctx.authorize(action, view_resource(where, name))
