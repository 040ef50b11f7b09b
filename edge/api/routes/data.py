"""Silt's own data-aware endpoints for the web UI (docs/design/api.md): one object compared
between two refs (a table's schema and rows, a text's lines, anything else's metadata), and SQL
over one CSV, TSV or Parquet object. Decoding and SQL run in the bounded child processes of
preview/sandbox.py, never in this one, and share the previews' cap (routes/preview.py)."""

from __future__ import annotations

import json
from typing import Annotated, Any, BinaryIO, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from edge.api.bodies import read_body
from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request
from edge.api.objects.stats import mtime
from edge.api.objects.write import checked_path
from edge.api.preview.kinds import TABLE_FORMATS, kind_of
from edge.api.preview.limits import DIFF_BYTES, MAX_LISTED, MAX_PAGE, PAGE_SIZE, QUERY_BYTES
from edge.api.preview.sandbox import Refused, Source
from edge.api.routes.objects import REF_OBJECTS, ObjectPath
from edge.api.routes.preview import gate, sandbox
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT
from silt.objects import DEFAULT_CONTENT_TYPE, split_address, user_metadata

router = APIRouter()

MAX_SQL_BYTES = 16 * 1024
# The body: the SQL, its page and JSON's quoting of both.
MAX_QUERY_BODY = 4 * MAX_SQL_BYTES
MAX_KEY_CHARS = 256
MAX_OFFSET = MAX_PAGE * PAGE_SIZE

Key = Annotated[str | None, Query(max_length=MAX_KEY_CHARS, description="the key column of a table diff")]
RowMatch = Annotated[
    Literal["auto", "content", "position"],
    Query(
        description="without a key: auto (a detected key column, else the rows' content), content, or position",
    ),
]
Limit = Annotated[int, Query(ge=1, le=MAX_LISTED, description="changed rows listed at most")]
DiffType = Annotated[
    Literal["two_dot", "three_dot"],
    Query(description="two_dot: left as it is; three_dot: the merge base of left and right instead"),
]


async def _entry(ctx: Ctx, repository: str, ref: str, key: str) -> pb.Entry | None:
    try:
        info = await ctx.backend.stat_entry(api.StatEntryRequest(repository=repository, ref=ref, key=key), ctx.deadline)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    entry: pb.Entry = info.entry
    return entry


async def _source(ctx: Ctx, repository: str, entry: pb.Entry) -> Source:
    repository_namespace = await ctx.backend.namespace(repository, ctx.deadline)
    namespace, address = split_address(repository_namespace, entry.physical_address)
    reader = ctx.backend.entry_reader(repository_namespace, entry)

    def read_range(start: int, end: int) -> BinaryIO:
        return reader.get_range(namespace, address, start, end)

    return Source(read_range, int(entry.size))


def _side(ref: str, entry: pb.Entry | None) -> dict[str, Any]:
    """What the UI shows of a side: never its physical address."""
    if entry is None:
        return {"ref": ref, "exists": False}
    return {
        "ref": ref,
        "exists": True,
        "size_bytes": int(entry.size),
        "checksum": entry.etag.strip('"'),
        "content_type": entry.content_type or DEFAULT_CONTENT_TYPE,
        "mtime": mtime(entry),
        "metadata": user_metadata(entry.metadata),
    }


def _run(kind: str, sources: list[Source], params: dict[str, Any], budget: int, head: dict[str, Any]) -> bytes:
    """The job's answer as the response's JSON, built in the worker thread (see preview.py)."""
    try:
        answer = sandbox.run(kind, sources, params, budget)
    except Refused as refused:
        raise ApiError(refused.status, refused.message) from None
    return json.dumps({**head, **answer}, ensure_ascii=False, separators=(",", ":")).encode()


@router.get("/repositories/{repository}/refs/{left}/diff/{right}/object")
async def diff_object(
    ctx: Ctx,
    repository: str,
    left: str,
    right: str,
    path: ObjectPath = None,
    key: Key = None,
    match: RowMatch = "auto",
    limit: Limit = 100,
    type: DiffType = "two_dot",  # lakeFS's name for it, as on the diff list
) -> Response:
    name = checked_path(path)
    await ctx.authorize_key(READ_OBJECT, repository, name)
    if type == "three_dot":
        # What right changed since it left `left`, as the three-dot diff list shows it.
        request = api.FindMergeBaseRequest(repository=repository, left_ref=left, right_ref=right)
        left = (await ctx.call(ctx.backend.graveler.FindMergeBase, request)).commit_id
    entries = [await _entry(ctx, repository, left, name), await _entry(ctx, repository, right, name)]
    if entries[0] is None and entries[1] is None:
        raise ApiError(404, f"no object {name} at {left} or at {right}")
    found = [entry for entry in entries if entry is not None]
    kind = kind_of(name, found[-1].content_type)
    head: dict[str, Any] = {
        "path": name,
        "kind": kind,
        "left": _side(left, entries[0]),
        "right": _side(right, entries[1]),
        "identical": entries[0] is not None and entries[1] is not None and entries[0].etag == entries[1].etag,
    }
    if kind in ("image", "binary") or head["identical"]:
        return Response(json.dumps(head, ensure_ascii=False).encode(), media_type="application/json")
    sources = [await _source(ctx, repository, entry) for entry in found]
    indices = iter(range(len(found)))
    params: dict[str, Any] = {
        "format": kind,
        "key": key or None,
        "match": match,
        "limit": limit,
        "left": next(indices) if entries[0] is not None else None,
        "right": next(indices) if entries[1] is not None else None,
    }
    with gate.enter(ctx.caller.user_id):
        body = await ctx.backend.run(_run, "diff", sources, params, DIFF_BYTES, head)
    return Response(body, media_type="application/json")


def _query_request(raw: bytes) -> tuple[str, int]:
    """The SQL and the first row to answer: `offset` (the previous answer's `next_offset`), or
    `page` (pages of PAGE_SIZE rows, as clients asked before answers could be cut)."""
    try:
        body = json.loads(raw)
    except ValueError:
        raise bad_request("the body is not JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("sql"), str):
        raise bad_request('the body must be {"sql": "...", "offset": 0}')
    sql = body["sql"]
    if len(sql.encode()) > MAX_SQL_BYTES:
        raise ApiError(413, f"the SQL is longer than {MAX_SQL_BYTES // 1024} KiB")
    if not sql.strip():
        raise bad_request("no SQL to run")
    if "offset" in body:
        offset = body["offset"]
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= MAX_OFFSET:
            raise bad_request(f"offset must be a whole number from 0 to {MAX_OFFSET}")
        return sql, offset
    page = body.get("page", 0)
    if not isinstance(page, int) or isinstance(page, bool) or not 0 <= page <= MAX_PAGE:
        raise bad_request(f"page must be a whole number from 0 to {MAX_PAGE}")
    return sql, page * PAGE_SIZE


@router.post(REF_OBJECTS + "/query")
async def query_object(ctx: Ctx, request: Request, repository: str, ref: str, path: ObjectPath = None) -> Response:
    name = checked_path(path)
    await ctx.authorize_key(READ_OBJECT, repository, name)
    sql, offset = _query_request(await read_body(request, MAX_QUERY_BODY))
    entry = await _entry(ctx, repository, ref, name)
    if entry is None:
        raise ApiError(404, f"no object {name} at {ref}")
    kind = kind_of(name, entry.content_type)
    if kind not in TABLE_FORMATS:
        raise bad_request("only CSV, TSV and Parquet objects can be queried")
    source = await _source(ctx, repository, entry)
    params = {"format": kind, "sql": sql, "offset": offset}
    head = {"path": name, "ref": ref, "table": "data"}
    with gate.enter(ctx.caller.user_id):
        body = await ctx.backend.run(_run, "query", [source], params, QUERY_BYTES, head)
    return Response(body, media_type="application/json")
