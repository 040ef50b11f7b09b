"""The Iceberg REST catalog's routes (the spec's rest-catalog-open-api.yaml), each served with and
without the spec's `{prefix}`.

Names follow lakeFS's catalog: a namespace is `<repository>.<ref>.<namespace>...`; a catalog
whose `warehouse` is `<repository>.<ref>` gets that as its prefix from GET /v1/config, and its
namespaces are relative to it. Tags and commit ids are read-only refs.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse

from edge.api.context import Ctx, backend_of
from edge.api.errors import ApiError
from edge.api.iceberg import grants
from edge.api.iceberg.commits import committed
from edge.api.iceberg.errors import (
    IcebergError,
    already_exists,
    bad_request,
    commit_failed,
    commit_state_unknown,
    no_such_namespace,
    no_such_table,
)
from edge.api.iceberg.metadata import Metadata, apply_updates, check_requirements, empty_metadata, new_metadata
from edge.api.iceberg.signed import read_body
from edge.api.iceberg.store import (
    NAMESPACE_MARKER,
    TABLE_POINTER,
    VIEW_POINTER,
    Conflict,
    Objects,
    OutcomeUnknown,
    RefGone,
    Replacement,
    Stored,
    Where,
    metadata_location,
    pointer_to,
)
from silt import iam_actions as a

SEPARATOR = "\x1f"
# A page of namespaces or tables when the client names no size.
MAX_PAGE = 1000
# Tables one transaction changes: graveler moves their pointers in one compare-and-set.
MAX_TRANSACTION_TABLES = 32

router = APIRouter()


def _route(
    method: str, path: str, status: int = 200, on: APIRouter = router
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a handler at /v1/<path> and at /v1/{prefix}/<path> of the router `on`."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        on.add_api_route(f"/v1/{path}", fn, methods=[method], status_code=status)
        on.add_api_route(f"/v1/{{prefix}}/{path}", fn, methods=[method], status_code=status)
        return fn

    return register


# --- names ---------------------------------------------------------------------------------


def _valid_level(level: str) -> str:
    # No "." in a level: names are written dotted (`db.sales`), in lakeFS's form and in the
    # catalog's policy resources, where ("a", "b") and ("a.b",) would be one name.
    if not level or "/" in level or "." in level or level.startswith("_iceberg"):
        raise bad_request(f"invalid namespace or table name {level!r}")
    return level


def _fixes_ref(prefix: str) -> bool:
    """Whether the prefix is `<repository>.<ref>` (a warehouse's). Any other prefix (lakeFS's
    examples configure `prefix: lakefs`) names no ref: namespaces are then absolute."""
    return "." in prefix


def _where(prefix: str, levels: tuple[str, ...] | list[str]) -> Where:
    """A namespace's repository, ref and levels, from the prefix (`<repository>.<ref>`, or
    none) and its levels as the client names them."""
    levels = tuple(levels)
    if _fixes_ref(prefix):
        repository, _, ref = prefix.partition(".")
        if not repository or not ref:
            raise bad_request(f"the prefix {prefix!r} is not <repository>.<ref>")
    else:
        if len(levels) < 2:
            raise bad_request("a namespace is <repository>.<ref>.<namespace>...: name a repository and a ref")
        repository, ref, levels = levels[0], levels[1], levels[2:]
    return Where(repository, ref, tuple(_valid_level(level) for level in levels))


def _parse_namespace(prefix: str, namespace: str) -> Where:
    return _where(prefix, namespace.split(SEPARATOR))


def _names(where: Where, prefix: str) -> list[str]:
    """The namespace as the client names it."""
    return list(where.levels) if _fixes_ref(prefix) else [where.repository, where.ref, *where.levels]


def _dotted(where: Where, name: str = "") -> str:
    """A namespace, or a table in it, as a commit message names it: `db.events`."""
    return ".".join((*where.levels, name) if name else where.levels)


def _child(where: Where, name: str) -> Where:
    return Where(where.repository, where.ref, (*where.levels, name))


async def _json(request: Request) -> dict[str, Any]:
    try:
        value = json.loads(await read_body(request) or b"{}")
    except ValueError:
        raise bad_request("the body is not JSON") from None
    if not isinstance(value, dict):
        raise bad_request("the body is not a JSON object")
    return value


# --- config and tokens ---------------------------------------------------------------------


@router.get("/v1/config")
async def get_config(ctx: Ctx, warehouse: str = "") -> dict[str, Any]:
    overrides: dict[str, str] = {}
    # A warehouse that is not <repository>.<ref> fixes nothing, as such a prefix does: names
    # stay absolute (a client's generic warehouse setting must not break it).
    if _fixes_ref(warehouse):
        _where(warehouse, ())
        overrides["prefix"] = warehouse
    return {"defaults": {}, "overrides": overrides, "endpoints": ENDPOINTS}


@router.post("/v1/oauth/tokens")
async def get_token(request: Request) -> JSONResponse:
    """OAuth2 client credentials: client_id is an access key id, client_secret its secret; the
    token is a login session's, as lakeFS's."""
    form = parse_qs((await read_body(request)).decode("utf-8", "replace"))
    grant = form.get("grant_type", [""])[0]
    if grant != "client_credentials":
        return JSONResponse({"error": "unsupported_grant_type", "error_description": grant}, status_code=400)
    client_id = form.get("client_id", [""])[0]
    secret = form.get("client_secret", [""])[0]
    try:
        _, token, expires = await backend_of(request).create_session(client_id, secret)
    except ApiError:
        return JSONResponse(
            {"error": "invalid_client", "error_description": "invalid access key or secret"}, status_code=401
        )
    return JSONResponse(
        {
            "access_token": token,
            "token_type": "bearer",
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "expires_in": max(0, expires - int(time.time())),
        }
    )


# --- namespaces ----------------------------------------------------------------------------


async def _namespace(objects: Objects, where: Where) -> Stored:
    """The namespace's marker; NoSuchNamespaceException if it does not exist."""
    if not where.levels:
        raise no_such_namespace((where.repository, where.ref))
    try:
        stored = await objects.read_json(where, where.key + NAMESPACE_MARKER)
    except RefGone:
        stored = None
    if stored is None:
        raise no_such_namespace((where.repository, where.ref, *where.levels))
    return stored


async def _parent_exists(objects: Objects, where: Where) -> None:
    if len(where.levels) > 1:
        await _namespace(objects, Where(where.repository, where.ref, where.levels[:-1]))


def _page_size(size: int | None) -> int:
    if size is not None and size <= 0:
        raise bad_request("pageSize must be positive")
    return size or MAX_PAGE


@_route("GET", "namespaces")
async def list_namespaces(
    ctx: Ctx,
    prefix: str = "",
    parent: str = "",
    page_token: Annotated[str, Query(alias="pageToken")] = "",
    page_size: Annotated[int | None, Query(alias="pageSize")] = None,
) -> dict[str, Any]:
    objects = Objects(ctx)
    if not parent and not _fixes_ref(prefix):
        # Above <repository>.<ref> there are no namespaces to list.
        return {"namespaces": [], "next-page-token": None}
    limit = _page_size(page_size)
    where = _parse_namespace(prefix, parent) if parent else _where(prefix, ())
    await grants.on_namespace(ctx, a.CATALOG_LIST_NAMESPACES, where)
    if where.levels:
        await _namespace(objects, where)
    found: list[list[str]] = []
    last = ""
    try:
        async for name in objects.children(where, where.key, after=page_token):
            child = _child(where, name)
            if name.startswith("_iceberg"):
                continue
            if await objects.read_json(child, child.key + NAMESPACE_MARKER) is not None:
                if len(found) == limit:
                    return {"namespaces": found, "next-page-token": last}
                found.append(_names(child, prefix))
                last = name
    except RefGone:
        raise no_such_namespace((where.repository, where.ref, *where.levels)) from None
    return {"namespaces": found, "next-page-token": None}


@_route("POST", "namespaces")
async def create_namespace(ctx: Ctx, request: Request, prefix: str = "") -> dict[str, Any]:
    body = await _json(request)
    names = body.get("namespace")
    if not isinstance(names, list) or not names:
        raise bad_request("namespace must be a list of names")
    where = _where(prefix, names)
    if not where.levels:
        raise bad_request("name a namespace below <repository>.<ref>")
    await grants.on_namespace(ctx, a.CATALOG_CREATE_NAMESPACE, where)
    properties = {str(k): str(v) for k, v in (body.get("properties") or {}).items()}
    objects = Objects(ctx)
    try:
        await _parent_exists(objects, where)
    except IcebergError as missing:
        # The spec's createNamespace has no 404: a missing parent is a bad request.
        raise bad_request(f"the parent namespace does not exist: {missing.message}") from None
    marker = where.key + NAMESPACE_MARKER
    try:
        async with committed(request, ctx, where, "create namespace", _dotted(where), [marker]):
            await objects.write_json(where, marker, {"properties": properties}, if_absent=True)
    except Conflict:
        raise IcebergError(
            409, f"Namespace already exists: {'.'.join(names)}", "NamespaceAlreadyExistsException"
        ) from None
    except RefGone:
        raise no_such_namespace((where.repository, where.ref)) from None
    return {"namespace": names, "properties": properties}


@_route("GET", "namespaces/{namespace}")
async def load_namespace(ctx: Ctx, namespace: str, prefix: str = "") -> dict[str, Any]:
    where = _parse_namespace(prefix, namespace)
    await grants.on_namespace(ctx, a.CATALOG_GET_NAMESPACE, where)
    stored = await _namespace(Objects(ctx), where)
    return {"namespace": _names(where, prefix), "properties": stored.value.get("properties", {})}


@_route("HEAD", "namespaces/{namespace}", status=204)
async def namespace_exists(ctx: Ctx, namespace: str, prefix: str = "") -> Response:
    where = _parse_namespace(prefix, namespace)
    await grants.on_namespace(ctx, a.CATALOG_GET_NAMESPACE, where)
    await _namespace(Objects(ctx), where)
    return Response(status_code=204)


@_route("DELETE", "namespaces/{namespace}", status=204)
async def drop_namespace(ctx: Ctx, request: Request, namespace: str, prefix: str = "") -> Response:
    where = _parse_namespace(prefix, namespace)
    await grants.on_namespace(ctx, a.CATALOG_DELETE_NAMESPACE, where)
    objects = Objects(ctx)
    await _namespace(objects, where)
    async for name in objects.children(where, where.key):
        child = _child(where, name)
        nested = await objects.read_json(child, child.key + NAMESPACE_MARKER)
        if nested is not None or await _name_taken(objects, where, name):
            raise IcebergError(409, f"Namespace is not empty: {name} is in it", "NamespaceNotEmptyException")
    marker = where.key + NAMESPACE_MARKER
    async with committed(request, ctx, where, "drop namespace", _dotted(where), [marker]):
        await objects.delete(where, marker)
    return Response(status_code=204)


@_route("POST", "namespaces/{namespace}/properties")
async def update_namespace_properties(ctx: Ctx, request: Request, namespace: str, prefix: str = "") -> dict[str, Any]:
    where = _parse_namespace(prefix, namespace)
    await grants.on_namespace(ctx, a.CATALOG_UPDATE_NAMESPACE, where)
    body = await _json(request)
    removals = [str(k) for k in body.get("removals") or []]
    updates = {str(k): str(v) for k, v in (body.get("updates") or {}).items()}
    if set(removals) & set(updates):
        raise IcebergError(422, "a property is both removed and updated", "UnprocessableEntityException")
    objects = Objects(ctx)
    stored = await _namespace(objects, where)
    properties = dict(stored.value.get("properties", {}))
    missing = [k for k in removals if k not in properties]
    for key in removals:
        properties.pop(key, None)
    properties.update(updates)
    marker = where.key + NAMESPACE_MARKER
    try:
        async with committed(request, ctx, where, "update namespace", _dotted(where), [marker]):
            await objects.write_json(where, marker, {"properties": properties}, if_match=stored.etag)
    except Conflict:
        raise commit_failed("the namespace's properties changed concurrently: retry") from None
    removed = [k for k in removals if k not in missing]
    return {"updated": list(updates), "removed": removed, "missing": missing}


# --- tables --------------------------------------------------------------------------------


class Table:
    """A table as read: its pointer (and ETag, for the conditional write that replaces it) and
    its current metadata."""

    def __init__(self, where: Where, name: str, pointer: Stored, metadata_key: str, metadata: Metadata) -> None:
        self.where = where
        self.name = name
        self.pointer = pointer
        self.metadata_key = metadata_key
        self.metadata = metadata


def _table_where(prefix: str, namespace: str, table: str) -> tuple[Where, str]:
    return _parse_namespace(prefix, namespace), _valid_level(table)


def _live(pointer: Stored | None) -> bool:
    """Whether a table pointer names a table: a renamed table leaves its old pointer behind as
    a tombstone (no metadata-key), replaced by a conditional write like any other."""
    return pointer is not None and "metadata-key" in pointer.value


async def view_holds(objects: Objects, where: Where, name: str) -> bool:
    """Whether a view has the name: a table may not take it (views.py keeps views)."""
    try:
        return _live(await objects.read_json(where, where.table_key(name) + VIEW_POINTER))
    except RefGone:
        raise no_such_namespace((where.repository, where.ref, *where.levels)) from None


async def _name_taken(objects: Objects, where: Where, name: str) -> bool:
    """Whether a table or a view has the name."""
    return _live(await _read_pointer(objects, where, name)) or await view_holds(objects, where, name)


def view_exists_error(where: Where, name: str) -> IcebergError:
    return already_exists(f"View with same name already exists: {'.'.join((*where.levels, name))}")


async def _read_pointer(objects: Objects, where: Where, name: str) -> Stored | None:
    try:
        return await objects.read_json(where, where.table_key(name) + TABLE_POINTER)
    except RefGone:
        raise no_such_namespace((where.repository, where.ref, *where.levels)) from None


async def _claim(
    objects: Objects, where: Where, name: str, metadata_key: str, value: dict[str, Any] | None = None
) -> str:
    """Point a new table `name` at metadata_key: only if no table has the name (no pointer, or
    a tombstone still as read), as one conditional staging; AlreadyExistsException otherwise.
    Returns the pointer's ETag."""
    current = await _read_pointer(objects, where, name)
    if _live(current):
        raise already_exists(f"Table already exists: {'.'.join((*where.levels, name))}")
    # Checked before the pointer's conditional write, not in it: a view and a table created at
    # once under one name may both stand (docs/iceberg.md, known limits).
    if await view_holds(objects, where, name):
        raise view_exists_error(where, name)
    pointer_key = where.table_key(name) + TABLE_POINTER
    value = value or {"metadata-key": metadata_key}
    try:
        if current is None:
            return await objects.write_json(where, pointer_key, value, if_absent=True)
        return await objects.write_json(where, pointer_key, value, if_match=current.etag)
    except Conflict:
        raise already_exists(f"Table already exists: {'.'.join((*where.levels, name))}") from None


async def _read_table(objects: Objects, where: Where, name: str) -> Table | None:
    pointer = await _read_pointer(objects, where, name)
    if pointer is None or not _live(pointer):
        return None
    key = str(pointer.value["metadata-key"])
    stored = await objects.read_json(where, key)
    if stored is None:
        raise IcebergError(500, f"the metadata file {key} of {name} is missing on {where.ref}")
    return Table(where, name, pointer, key, stored.value)


async def _existing_table(objects: Objects, where: Where, name: str) -> Table:
    table = await _read_table(objects, where, name)
    if table is None:
        if where.levels:
            await _namespace(objects, where)
        raise no_such_table((where.repository, where.ref, *where.levels), name)
    return table


# Table properties that name where a writer puts new files: served through the ref, as the
# location is.
WRITE_PATH_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


def _through_ref(where: Where, path: str, branch: bool = False) -> str:
    """path (an s3:// address) seen through where's ref: an address in where's repository
    names that ref, whichever ref wrote it (`<ref>/...` or `@<branch>/...`); on a branch
    (branch), in the ref-neutral form `@<branch>/...`, so that the files a client writes there
    keep an address that outlives the branch. Any other address is left as it is."""
    head = f"s3://{where.repository}/"
    if not path.startswith(head):
        return path
    _, _, rest = path[len(head) :].partition("/")
    return where.neutral_location(rest) if branch else where.location(rest)


def _served(where: Where, metadata: Metadata, branch: bool) -> Metadata:
    """The metadata as served from where's ref: its location and its write paths in the
    repository name that ref, so a client writes a branch's new files on that branch (branch:
    where's ref is one), through the ref-neutral form. What is stored keeps the addresses as
    written; files the table already references (manifest lists, manifests, data files) keep
    their absolute paths, the old form's included."""
    served = {**metadata, "location": _through_ref(where, str(metadata.get("location", "")), branch)}
    properties = metadata.get("properties") or {}
    if any(name in properties for name in WRITE_PATH_PROPERTIES):
        served["properties"] = {
            name: _through_ref(where, value, branch) if name in WRITE_PATH_PROPERTIES else value
            for name, value in properties.items()
        }
    return served


def _result(where: Where, location: str, metadata: Metadata, branch: bool) -> dict[str, Any]:
    return {"metadata-location": location, "metadata": _served(where, metadata, branch), "config": {}}


def _metadata_key(where: Where, name: str, metadata: Metadata) -> str:
    version = len(metadata.get("metadata-log", [])) + 1
    return f"{where.table_key(name)}metadata/{version:05d}-{uuid.uuid4()}.metadata.json"


async def _write_metadata(objects: Objects, where: Where, name: str, metadata: Metadata, base: Table | None) -> str:
    """Write metadata as the table's next metadata file (its log naming base's); its key."""
    if base is not None:
        log = [*metadata.get("metadata-log", [])]
        previous = metadata_location(where, base.pointer.value, base.metadata_key)
        log.append({"metadata-file": previous, "timestamp-ms": base.metadata["last-updated-ms"]})
        metadata = {**metadata, "metadata-log": log}
    key = _metadata_key(where, name, metadata)
    # Written once under a name of its own: recorded for its ref-neutral address too.
    await objects.write_json(where, key, metadata, neutral=True)
    return key


async def _write_table(
    objects: Objects, where: Where, name: str, metadata: Metadata, base: Table | None
) -> tuple[str, str]:
    """Write metadata as a new metadata file and point the table at it, if the pointer is still
    the one base read (or, for a new table, there is none): CommitFailedException otherwise."""
    key = await _write_metadata(objects, where, name, metadata, base)
    if base is None:
        return key, await _claim(objects, where, name, key, pointer_to(where, key))
    pointer = pointer_to(where, key)
    try:
        etag = await objects.write_json(
            where, where.table_key(name) + TABLE_POINTER, pointer, if_match=base.pointer.etag
        )
    except Conflict:
        raise commit_failed(f"Commit failed: {name} was changed concurrently; refresh and retry") from None
    return key, etag


async def list_identifiers(
    ctx: Ctx,
    action: str,
    prefix: str,
    namespace: str,
    page_token: str,
    page_size: int | None,
    pointer_key: Callable[[Where, str], str],
) -> dict[str, Any]:
    """One page of a namespace's live tables or views (whichever pointer_key names): the spec's
    listTables and listViews answer alike, a child being listed only while its pointer is live."""
    limit = _page_size(page_size)
    where = _parse_namespace(prefix, namespace)
    await grants.on_namespace(ctx, action, where)
    objects = Objects(ctx)
    await _namespace(objects, where)
    identifiers: list[dict[str, Any]] = []
    last = ""
    async for name in objects.children(where, where.key, after=page_token):
        if _live(await objects.read_json(where, pointer_key(where, name))):
            if len(identifiers) == limit:
                return {"identifiers": identifiers, "next-page-token": last}
            identifiers.append({"namespace": _names(where, prefix), "name": name})
            last = name
    return {"identifiers": identifiers, "next-page-token": None}


def _table_pointer_key(where: Where, name: str) -> str:
    return where.table_key(name) + TABLE_POINTER


@_route("GET", "namespaces/{namespace}/tables")
async def list_tables(
    ctx: Ctx,
    namespace: str,
    prefix: str = "",
    page_token: Annotated[str, Query(alias="pageToken")] = "",
    page_size: Annotated[int | None, Query(alias="pageSize")] = None,
) -> dict[str, Any]:
    return await list_identifiers(
        ctx, a.CATALOG_LIST_TABLES, prefix, namespace, page_token, page_size, _table_pointer_key
    )


@_route("POST", "namespaces/{namespace}/tables")
async def create_table(ctx: Ctx, request: Request, namespace: str, prefix: str = "") -> dict[str, Any]:
    where = _parse_namespace(prefix, namespace)
    body = await _json(request)
    name = _valid_level(str(body.get("name", "")))
    await grants.on_table(ctx, a.CATALOG_CREATE_TABLE, where, name)
    if "schema" not in body:
        raise bad_request("a table needs a schema")
    objects = Objects(ctx)
    await _namespace(objects, where)
    if await _read_table(objects, where, name) is not None:
        raise already_exists(f"Table already exists: {'.'.join((*_names(where, prefix), name))}")
    if await view_holds(objects, where, name):
        raise view_exists_error(where, name)
    location = body.get("location") or where.location(where.table_key(name).rstrip("/"))
    metadata = new_metadata(body, str(location))
    if body.get("stage-create"):
        # Nothing is written: the client's first commit (assert-create) creates the table.
        return {"metadata": _served(where, metadata, await objects.is_branch(where)), "config": {}}
    async with committed(request, ctx, where, "create table", _dotted(where, name), [where.table_key(name)]):
        key, _ = await _write_table(objects, where, name, metadata, None)
    return _result(where, where.neutral_location(key), metadata, True)


@_route("GET", "namespaces/{namespace}/tables/{table}")
async def load_table(ctx: Ctx, namespace: str, table: str, prefix: str = "") -> dict[str, Any]:
    where, name = _table_where(prefix, namespace, table)
    await grants.on_table(ctx, a.CATALOG_READ_TABLE, where, name)
    # NoSuchTable even where the namespace is missing, as the spec answers a load: Spark's Iceberg catalog
    # reads `db.t.snapshots` (and `db.t.branch_x`) as the table `snapshots` in the namespace `db.t`
    # first, and falls back to the metadata table only on NoSuchTable.
    objects = Objects(ctx)
    found = await _read_table(objects, where, name)
    if found is None:
        raise no_such_table((where.repository, where.ref, *where.levels), name)
    location = metadata_location(where, found.pointer.value, found.metadata_key)
    return _result(where, location, found.metadata, await objects.is_branch(where))


@_route("HEAD", "namespaces/{namespace}/tables/{table}", status=204)
async def table_exists(ctx: Ctx, namespace: str, table: str, prefix: str = "") -> Response:
    where, name = _table_where(prefix, namespace, table)
    await grants.on_table(ctx, a.CATALOG_READ_TABLE, where, name)
    await _existing_table(Objects(ctx), where, name)
    return Response(status_code=204)


async def _commit(objects: Objects, where: Where, name: str, body: dict[str, Any]) -> tuple[str, Metadata]:
    requirements = body.get("requirements") or []
    updates = body.get("updates") or []
    current = await _read_table(objects, where, name)
    creating = any(r.get("type") == "assert-create" for r in requirements)
    if current is None and not creating:
        if where.levels:
            await _namespace(objects, where)
        raise no_such_table((where.repository, where.ref, *where.levels), name)
    check_requirements(None if current is None else current.metadata, requirements)
    if current is None:
        await _namespace(objects, where)
        location = where.location(where.table_key(name).rstrip("/"))
        base = empty_metadata(location)
    else:
        base = current.metadata
    metadata = apply_updates(base, updates)
    key, _ = await _write_table(objects, where, name, metadata, current)
    return key, metadata


@_route("POST", "namespaces/{namespace}/tables/{table}")
async def commit_table(ctx: Ctx, request: Request, namespace: str, table: str, prefix: str = "") -> dict[str, Any]:
    where, name = _table_where(prefix, namespace, table)
    await grants.on_table(ctx, a.CATALOG_UPDATE_TABLE, where, name)
    body = await _json(request)
    async with committed(request, ctx, where, "commit table", _dotted(where, name), [where.table_key(name)]):
        key, metadata = await _commit(Objects(ctx), where, name, body)
    return {"metadata-location": where.neutral_location(key), "metadata": _served(where, metadata, True)}


@_route("DELETE", "namespaces/{namespace}/tables/{table}", status=204)
async def drop_table(
    ctx: Ctx, request: Request, namespace: str, table: str, prefix: str = "", purgeRequested: bool = False
) -> Response:
    where, name = _table_where(prefix, namespace, table)
    await grants.on_table(ctx, a.CATALOG_DELETE_TABLE, where, name)
    objects = Objects(ctx)
    await _existing_table(objects, where, name)
    async with committed(request, ctx, where, "drop table", _dotted(where, name), [where.table_key(name)]):
        await objects.delete(where, where.table_key(name) + TABLE_POINTER)
        if purgeRequested:
            # The table's files on this branch: metadata and data under its location. Other
            # branches and commits keep theirs.
            keys = [key async for key in objects.list_keys(where, where.table_key(name))]
            for key in keys:
                await objects.delete(where, key)
    return Response(status_code=204)


def metadata_location_key(where: Where, location: str) -> str:
    """The key of a metadata file a register request names (read on where's ref, whichever ref
    the address names)."""
    head = f"s3://{where.repository}/"
    if not location.startswith(head) or "/" not in location[len(head) :]:
        raise bad_request(
            f"metadata-location must be an object of {where.repository}: s3://{where.repository}/<ref>/<key>"
        )
    return location[len(head) :].partition("/")[2]


@_route("POST", "namespaces/{namespace}/register")
async def register_table(ctx: Ctx, request: Request, namespace: str, prefix: str = "") -> dict[str, Any]:
    where = _parse_namespace(prefix, namespace)
    body = await _json(request)
    name = _valid_level(str(body.get("name", "")))
    await grants.on_table(ctx, a.CATALOG_CREATE_TABLE, where, name)
    key = metadata_location_key(where, str(body.get("metadata-location", "")))
    objects = Objects(ctx)
    await _namespace(objects, where)
    stored = await objects.read_json(where, key)
    if stored is None:
        raise IcebergError(404, f"no metadata file {key} on {where.ref}", "NotFoundException")
    existing = await _read_table(objects, where, name)
    async with committed(request, ctx, where, "register table", _dotted(where, name), [where.table_key(name), key]):
        if existing is None or not body.get("overwrite"):
            await _claim(objects, where, name, key)
        else:
            pointer_key = where.table_key(name) + TABLE_POINTER
            try:
                await objects.write_json(where, pointer_key, {"metadata-key": key}, if_match=existing.pointer.etag)
            except Conflict:
                raise commit_failed(f"Commit failed: {name} was changed concurrently; retry") from None
    return _result(where, where.location(key), stored.value, await objects.is_branch(where))


def rename_parties(prefix: str, body: dict[str, Any], what: str) -> tuple[Where, str, Where, str]:
    """A rename request's source and destination (where and name each), both in one
    repository and ref."""
    try:
        source, destination = body["source"], body["destination"]
        from_where, from_name = _where(prefix, source["namespace"]), _valid_level(source["name"])
        to_where, to_name = _where(prefix, destination["namespace"]), _valid_level(destination["name"])
    except (KeyError, TypeError):
        raise bad_request("rename takes a source and a destination, each a namespace and a name") from None
    if (from_where.repository, from_where.ref) != (to_where.repository, to_where.ref):
        raise bad_request(f"{what} is renamed within one repository and ref")
    return from_where, from_name, to_where, to_name


@_route("POST", "tables/rename", status=204)
async def rename_table(ctx: Ctx, request: Request, prefix: str = "") -> Response:
    from_where, from_name, to_where, to_name = rename_parties(prefix, await _json(request), "a table")
    # A rename takes the table away from its name and gives it another.
    await grants.on_table(ctx, a.CATALOG_DELETE_TABLE, from_where, from_name)
    await grants.on_table(ctx, a.CATALOG_CREATE_TABLE, to_where, to_name)
    objects = Objects(ctx)
    table = await _existing_table(objects, from_where, from_name)
    await _namespace(objects, to_where)
    # The new pointer names the same metadata file: the table's files stay where they are. Both
    # pointers change in one compare-and-set: the new name only while no table has it (no
    # pointer, or a tombstone still as read), the old one becomes a tombstone only while it is
    # as read, so a commit that lands on the old name meanwhile is never lost (the rename fails
    # whole), and no reader sees the table under both names or neither.
    current = await _read_pointer(objects, to_where, to_name)
    if _live(current):
        raise already_exists(f"Table already exists: {'.'.join((*to_where.levels, to_name))}")
    if await view_holds(objects, to_where, to_name):
        raise view_exists_error(to_where, to_name)
    to_key = to_where.table_key(to_name) + TABLE_POINTER
    moves = [
        Replacement(
            to_key, {"metadata-key": table.metadata_key}, "" if current is None else current.etag, current is None
        ),
        Replacement(
            from_where.table_key(from_name) + TABLE_POINTER,
            {"renamed-to": [*to_where.levels, to_name]},
            table.pointer.etag,
        ),
    ]
    renamed = f"{_dotted(from_where, from_name)} to {_dotted(to_where, to_name)}"
    # Both directories: the new name's pointer names metadata files under the old one's.
    touched = [from_where.table_key(from_name), to_where.table_key(to_name)]
    try:
        async with committed(request, ctx, from_where, "rename table", renamed, touched):
            await objects.replace_all_json(from_where, moves)
    except Conflict as conflict:
        if conflict.key == to_key:
            raise already_exists(f"Table already exists: {'.'.join((*to_where.levels, to_name))}") from None
        raise commit_failed(f"Commit failed: {from_name} was changed during the rename; retry") from None
    except OutcomeUnknown as unknown:
        raise commit_state_unknown(str(unknown)) from None
    return Response(status_code=204)


@_route("POST", "transactions/commit", status=204)
async def commit_transaction(ctx: Ctx, request: Request, prefix: str = "") -> Response:
    """Every table's requirements are checked and its metadata file written; then every pointer
    moves in one compare-and-set of the branch (graveler's StageEntriesIf): each still the one
    read, and all of them move, or none does (409). Readers see the tables before the
    transaction or after it, never some of each. The tables share one repository and branch:
    a branch's staging is the unit graveler changes atomically."""
    body = await _json(request)
    changes = body.get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise bad_request("table-changes must be a non-empty list")
    if len(changes) > MAX_TRANSACTION_TABLES:
        raise bad_request(f"a transaction changes at most {MAX_TRANSACTION_TABLES} tables")
    objects = Objects(ctx)
    targets: list[tuple[Where, str]] = []
    for change in changes:
        identifier = change.get("identifier") or {}
        targets.append(
            (_where(prefix, identifier.get("namespace") or []), _valid_level(str(identifier.get("name", ""))))
        )
    if len({(where.repository, where.levels, name) for where, name in targets}) != len(targets):
        raise bad_request("a transaction names a table twice")
    if len({(where.repository, where.ref) for where, _ in targets}) != 1:
        raise bad_request("the tables of a transaction must be on one repository and branch")
    # Every table's catalog action before any is read: a refusal tells nothing of what exists.
    for where, name in targets:
        await grants.on_table(ctx, a.CATALOG_UPDATE_TABLE, where, name)
    planned: list[tuple[Where, str, Table, Metadata]] = []
    for (where, name), change in zip(targets, changes, strict=True):
        current = await _read_table(objects, where, name)
        if current is None:
            raise no_such_table((where.repository, where.ref, *where.levels), name)
        check_requirements(current.metadata, change.get("requirements") or [])
        planned.append((where, name, current, apply_updates(current.metadata, change.get("updates") or [])))
    moves: list[Replacement] = []
    for where, name, current, metadata in planned:
        key = await _write_metadata(objects, where, name, metadata, current)
        moves.append(Replacement(where.table_key(name) + TABLE_POINTER, pointer_to(where, key), current.pointer.etag))
    names = ", ".join(_dotted(where, name) for where, name in targets)
    touched = [where.table_key(name) for where, name in targets]
    try:
        async with committed(request, ctx, targets[0][0], "commit transaction", names, touched):
            await objects.replace_all_json(targets[0][0], moves)
    except Conflict as conflict:
        changed = conflict.key.removesuffix("/" + TABLE_POINTER).replace("/", ".")
        raise commit_failed(f"Commit failed: {changed} was changed concurrently; refresh and retry") from None
    except OutcomeUnknown as unknown:
        raise commit_state_unknown(str(unknown)) from None
    return Response(status_code=204)


ENDPOINTS = [
    f"{method} /v1/{{prefix}}/{path}"
    for method, path in (
        ("GET", "namespaces"),
        ("POST", "namespaces"),
        ("GET", "namespaces/{namespace}"),
        ("HEAD", "namespaces/{namespace}"),
        ("DELETE", "namespaces/{namespace}"),
        ("POST", "namespaces/{namespace}/properties"),
        ("GET", "namespaces/{namespace}/tables"),
        ("POST", "namespaces/{namespace}/tables"),
        ("GET", "namespaces/{namespace}/tables/{table}"),
        ("HEAD", "namespaces/{namespace}/tables/{table}"),
        ("POST", "namespaces/{namespace}/tables/{table}"),
        ("DELETE", "namespaces/{namespace}/tables/{table}"),
        ("POST", "namespaces/{namespace}/register"),
        ("POST", "tables/rename"),
        ("POST", "transactions/commit"),
        ("GET", "namespaces/{namespace}/views"),
        ("POST", "namespaces/{namespace}/views"),
        ("GET", "namespaces/{namespace}/views/{view}"),
        ("HEAD", "namespaces/{namespace}/views/{view}"),
        ("POST", "namespaces/{namespace}/views/{view}"),
        ("DELETE", "namespaces/{namespace}/views/{view}"),
        ("POST", "namespaces/{namespace}/register-view"),
        ("POST", "views/rename"),
    )
]
