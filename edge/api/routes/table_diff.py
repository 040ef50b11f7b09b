"""The Iceberg tables changed between two refs, table by table: snapshots added and removed,
rows added and deleted, schema changes. Beside lakeFS's object diff of the same refs
(`.../refs/{leftRef}/diff/{rightRef}`), and like it a diff of commits: a branch is its head
commit, so the catalog's staged changes show once committed."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request
from edge.api.iceberg.errors import IcebergError
from edge.api.iceberg.store import TABLE_POINTER, Objects, RefGone, Where
from edge.api.iceberg.table_diff import table_diff
from edge.api.paging import MAX_AFTER, MAX_TOKEN, pagination
from silt.graveler.v1 import graveler_pb2 as api

router = APIRouter()

# Tables per page, by default and at most: each costs up to four small object reads.
TABLES_PAGE = 20
MAX_TABLES_PAGE = 100
# Changed keys one page scans for tables' pointers at most (a table's data files are changed
# keys too): a page stops there and says where the next one goes on.
MAX_SCANNED = 20_000
_DIFF_PAGE = 1000
# A metadata file larger than this is not read: its table's diff says so instead.
MAX_METADATA_BYTES = 32 * 1024 * 1024
_POINTER_SUFFIX = "/" + TABLE_POINTER


@router.get("/repositories/{repository}/refs/{leftRef}/diff/{rightRef}/tables")
async def diff_tables(
    ctx: Ctx,
    repository: str,
    left_ref: Annotated[str, Path(alias="leftRef", max_length=MAX_TOKEN)],
    right_ref: Annotated[str, Path(alias="rightRef", max_length=MAX_TOKEN)],
    prefix: Annotated[str, Query(max_length=MAX_TOKEN, description="only tables under this path")] = "",
    after: Annotated[str, Query(max_length=MAX_AFTER, description="a page's next_offset")] = "",
    amount: Annotated[int, Query(ge=1, le=MAX_TABLES_PAGE)] = TABLES_PAGE,
    type: Literal["two_dot", "three_dot"] = "three_dot",
) -> JSONResponse:
    if after and prefix and not after.startswith(prefix):
        raise bad_request("after must be within prefix")
    scope = await ctx.read_repo_scope(repository)
    right = await _resolve(ctx, repository, right_ref)
    if type == "three_dot":
        base = api.FindMergeBaseRequest(repository=repository, left_ref=left_ref, right_ref=right)
        left = str((await ctx.call(ctx.backend.graveler.FindMergeBase, base)).commit_id)
    else:
        left = await _resolve(ctx, repository, left_ref)
    objects = Objects(ctx)
    results: list[dict[str, Any]] = []
    cursor, scanned, has_more, done = after, 0, False, False
    while not done:
        request = api.DiffRequest(
            repository=repository, left_ref=left, right_ref=right, prefix=prefix, after=cursor, amount=_DIFF_PAGE
        )
        page = await ctx.call(ctx.backend.graveler.Diff, request)
        done = not page.has_more or not page.items
        for index, item in enumerate(page.items):
            cursor, scanned = item.key, scanned + 1
            if item.key.endswith(_POINTER_SUFFIX) and scope.allows(item.key):
                table = await _table(objects, repository, left, right, item.key)
                if table is not None:
                    results.append(table)
            if len(results) == amount or scanned >= MAX_SCANNED:
                has_more = index < len(page.items) - 1 or page.has_more
                done = True
                break
    body = {
        "left_commit": left,
        "right_commit": right,
        "pagination": pagination(has_more, cursor, len(results), amount).to_dict(),
        "results": results,
    }
    return JSONResponse(body)


async def _resolve(ctx: Ctx, repository: str, ref: str) -> str:
    reply = await ctx.call(ctx.backend.graveler.ResolveRef, api.ResolveRefRequest(repository=repository, ref=ref))
    commit_id: str = reply.commit_id
    return commit_id


async def _table(objects: Objects, repository: str, left: str, right: str, pointer: str) -> dict[str, Any] | None:
    """The diff of the table whose pointer is at key `pointer` (None: a table on neither side,
    such as a pointer that was a rename's tombstone on both)."""
    path = pointer.removesuffix(_POINTER_SUFFIX)
    found: list[dict[str, Any] | None] = []
    errors: list[str] = []
    locations: list[str | None] = []
    for ref in (left, right):
        where = Where(repository, ref, ())
        try:
            metadata, location = await _metadata(objects, where, pointer)
        except _Unreadable as exc:
            metadata, location = None, None
            errors.append(f"{ref}: {exc}")
        found.append(metadata)
        locations.append(location)
    if found == [None, None] and not errors:
        return None
    diff = table_diff(found[0], found[1])
    if diff["left"] is not None:
        diff["left"]["metadata_location"] = locations[0]
    if diff["right"] is not None:
        diff["right"]["metadata_location"] = locations[1]
    return {"table": path.replace("/", "."), "path": path, **diff, **({"errors": errors} if errors else {})}


class _Unreadable(Exception):
    """A table's metadata that cannot be diffed (too large, missing, not JSON)."""


async def _metadata(objects: Objects, where: Where, pointer: str) -> tuple[dict[str, Any] | None, str | None]:
    """The table's current metadata on where's ref and its key; (None, None) when the ref has
    no live table there."""
    try:
        stored = await objects.read_json(where, pointer)
        if stored is None or "metadata-key" not in stored.value:
            return None, None
        key = str(stored.value["metadata-key"])
        metadata = await objects.read_json(where, key, max_bytes=MAX_METADATA_BYTES)
    except IcebergError as exc:
        if exc.status == 403:
            raise ApiError(403, exc.message) from None
        raise _Unreadable(exc.message) from None
    except RefGone as exc:
        raise ApiError(404, str(exc)) from None
    if metadata is None:
        raise _Unreadable(f"the metadata file {key} is missing")
    return metadata.value, where.location(key)
