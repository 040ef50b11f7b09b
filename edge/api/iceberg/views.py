"""The Iceberg REST catalog's view routes (the spec's listViews, createView, loadView, replaceView,
dropView, viewExists, renameView and registerView), kept as tables are (store.py): a view's
metadata files are objects under its location on the ref, and its pointer
(`<namespace>/<view>/_iceberg_view.json`) names the current one. A replace writes a new metadata
file and moves the pointer by one conditional staging (If-Match the pointer as read), so of two
replaces over the same view one wins and the other fails its commit (409), never
last-writer-wins. Tags and commit ids are read-only refs. A view and a table never share a name.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from edge.api.context import Ctx
from edge.api.iceberg import grants
from edge.api.iceberg.commits import committed
from edge.api.iceberg.errors import (
    IcebergError,
    already_exists,
    bad_request,
    commit_failed,
    commit_state_unknown,
    no_such_namespace,
    no_such_view,
)
from edge.api.iceberg.routes import (
    _dotted,
    _json,
    _live,
    _namespace,
    _parse_namespace,
    _read_pointer,
    _route,
    _through_ref,
    _valid_level,
    list_identifiers,
    metadata_location_key,
    rename_parties,
    view_exists_error,
)
from edge.api.iceberg.store import VIEW_POINTER, Conflict, Objects, OutcomeUnknown, RefGone, Replacement, Stored, Where
from edge.api.iceberg.view_metadata import (
    ViewMetadata,
    apply_view_updates,
    check_view_requirements,
    new_view_metadata,
)
from silt import iam_actions as a

router = APIRouter()

# A metadata file's name: its sequence number, as Iceberg names them (`00003-<uuid>.metadata.json`).
_SEQUENCE = re.compile(r"(\d+)-[^/]*\.metadata\.json$")


class View:
    """A view as read: its pointer (and ETag, for the conditional write that replaces it) and
    its current metadata."""

    def __init__(self, pointer: Stored, metadata_key: str, metadata: ViewMetadata) -> None:
        self.pointer = pointer
        self.metadata_key = metadata_key
        self.metadata = metadata


def _pointer_key(where: Where, name: str) -> str:
    return where.table_key(name) + VIEW_POINTER


async def _read_view_pointer(objects: Objects, where: Where, name: str) -> Stored | None:
    try:
        return await objects.read_json(where, _pointer_key(where, name))
    except RefGone:
        raise no_such_namespace((where.repository, where.ref, *where.levels)) from None


async def _read_view(objects: Objects, where: Where, name: str) -> View | None:
    pointer = await _read_view_pointer(objects, where, name)
    if pointer is None or not _live(pointer):
        return None
    key = str(pointer.value["metadata-key"])
    stored = await objects.read_json(where, key)
    if stored is None:
        raise IcebergError(500, f"the metadata file {key} of the view {name} is missing on {where.ref}")
    return View(pointer, key, stored.value)


async def _existing_view(objects: Objects, where: Where, name: str) -> View:
    view = await _read_view(objects, where, name)
    if view is None:
        raise no_such_view((where.repository, where.ref, *where.levels), name)
    return view


async def _refuse_taken(objects: Objects, where: Where, name: str) -> Stored | None:
    """AlreadyExistsException if a table or a view has the name; else the view pointer there
    (a tombstone a rename left, which a new view replaces only as read), or None."""
    if _live(await _read_pointer(objects, where, name)):
        raise already_exists(f"Table with same name already exists: {'.'.join((*where.levels, name))}")
    current = await _read_view_pointer(objects, where, name)
    if _live(current):
        raise view_exists_error(where, name)
    return current


def _metadata_key(where: Where, name: str, base: View | None) -> str:
    sequence = 1
    if base is not None:
        found = _SEQUENCE.search(base.metadata_key)
        sequence = int(found.group(1)) + 1 if found else 1
    return f"{where.table_key(name)}metadata/{sequence:05d}-{uuid.uuid4()}.metadata.json"


def _result(where: Where, key: str, metadata: ViewMetadata) -> dict[str, Any]:
    """A LoadViewResult; the location as seen through where's ref, as a table's is served."""
    served = {**metadata, "location": _through_ref(where, str(metadata.get("location", "")))}
    return {"metadata-location": where.location(key), "metadata": served, "config": {}}


async def _claim(objects: Objects, where: Where, name: str, metadata_key: str) -> None:
    """Point the new view `name` at metadata_key, only if no table or view has the name, the
    pointer written conditionally (absent, or the tombstone as read)."""
    current = await _refuse_taken(objects, where, name)
    value = {"metadata-key": metadata_key}
    try:
        if current is None:
            await objects.write_json(where, _pointer_key(where, name), value, if_absent=True)
        else:
            await objects.write_json(where, _pointer_key(where, name), value, if_match=current.etag)
    except Conflict:
        raise view_exists_error(where, name) from None


@_route("GET", "namespaces/{namespace}/views", on=router)
async def list_views(
    ctx: Ctx,
    namespace: str,
    prefix: str = "",
    page_token: Annotated[str, Query(alias="pageToken")] = "",
    page_size: Annotated[int | None, Query(alias="pageSize")] = None,
) -> dict[str, Any]:
    return await list_identifiers(ctx, a.CATALOG_LIST_VIEWS, prefix, namespace, page_token, page_size, _pointer_key)


@_route("POST", "namespaces/{namespace}/views", on=router)
async def create_view(ctx: Ctx, request: Request, namespace: str, prefix: str = "") -> dict[str, Any]:
    where = _parse_namespace(prefix, namespace)
    body = await _json(request)
    name = _valid_level(str(body.get("name", "")))
    await grants.on_view(ctx, a.CATALOG_CREATE_VIEW, where, name)
    objects = Objects(ctx)
    await _namespace(objects, where)
    await _refuse_taken(objects, where, name)
    location = str(body.get("location") or where.location(where.table_key(name).rstrip("/"))).rstrip("/")
    metadata = new_view_metadata(body, location)
    key = _metadata_key(where, name, None)
    async with committed(request, ctx, where, "create view", _dotted(where, name), [where.table_key(name)]):
        await objects.write_json(where, key, metadata)
        await _claim(objects, where, name, key)
    return _result(where, key, metadata)


@_route("GET", "namespaces/{namespace}/views/{view}", on=router)
async def load_view(ctx: Ctx, namespace: str, view: str, prefix: str = "") -> dict[str, Any]:
    where, name = _parse_namespace(prefix, namespace), _valid_level(view)
    await grants.on_view(ctx, a.CATALOG_READ_VIEW, where, name)
    found = await _existing_view(Objects(ctx), where, name)
    return _result(where, found.metadata_key, found.metadata)


@_route("HEAD", "namespaces/{namespace}/views/{view}", status=204, on=router)
async def view_exists(ctx: Ctx, namespace: str, view: str, prefix: str = "") -> Response:
    where, name = _parse_namespace(prefix, namespace), _valid_level(view)
    await grants.on_view(ctx, a.CATALOG_READ_VIEW, where, name)
    await _existing_view(Objects(ctx), where, name)
    return Response(status_code=204)


@_route("POST", "namespaces/{namespace}/views/{view}", on=router)
async def replace_view(ctx: Ctx, request: Request, namespace: str, view: str, prefix: str = "") -> dict[str, Any]:
    where, name = _parse_namespace(prefix, namespace), _valid_level(view)
    await grants.on_view(ctx, a.CATALOG_UPDATE_VIEW, where, name)
    body = await _json(request)
    requirements, updates = body.get("requirements") or [], body.get("updates")
    if not isinstance(updates, list) or not isinstance(requirements, list):
        raise bad_request("a view commit takes a list of updates (and of requirements)")
    objects = Objects(ctx)
    async with committed(request, ctx, where, "replace view", _dotted(where, name), [where.table_key(name)]):
        current = await _existing_view(objects, where, name)
        check_view_requirements(current.metadata, requirements)
        metadata = apply_view_updates(current.metadata, updates)
        key = _metadata_key(where, name, current)
        await objects.write_json(where, key, metadata)
        try:
            await objects.write_json(
                where, _pointer_key(where, name), {"metadata-key": key}, if_match=current.pointer.etag
            )
        except Conflict:
            raise commit_failed(f"Commit failed: the view {name} was changed concurrently; refresh and retry") from None
    return _result(where, key, metadata)


@_route("DELETE", "namespaces/{namespace}/views/{view}", status=204, on=router)
async def drop_view(ctx: Ctx, request: Request, namespace: str, view: str, prefix: str = "") -> Response:
    where, name = _parse_namespace(prefix, namespace), _valid_level(view)
    await grants.on_view(ctx, a.CATALOG_DELETE_VIEW, where, name)
    objects = Objects(ctx)
    await _existing_view(objects, where, name)
    async with committed(request, ctx, where, "drop view", _dotted(where, name), [where.table_key(name)]):
        await objects.delete(where, _pointer_key(where, name))
    return Response(status_code=204)


@_route("POST", "namespaces/{namespace}/register-view", on=router)
async def register_view(ctx: Ctx, request: Request, namespace: str, prefix: str = "") -> dict[str, Any]:
    where = _parse_namespace(prefix, namespace)
    body = await _json(request)
    name = _valid_level(str(body.get("name", "")))
    await grants.on_view(ctx, a.CATALOG_CREATE_VIEW, where, name)
    key = metadata_location_key(where, str(body.get("metadata-location", "")))
    objects = Objects(ctx)
    await _namespace(objects, where)
    stored = await objects.read_json(where, key)
    if stored is None:
        raise IcebergError(404, f"no metadata file {key} on {where.ref}", "NotFoundException")
    if "view-uuid" not in stored.value or "versions" not in stored.value:
        raise bad_request(f"{key} is not a view's metadata file")
    async with committed(request, ctx, where, "register view", _dotted(where, name), [where.table_key(name), key]):
        await _claim(objects, where, name, key)
    return _result(where, key, stored.value)


@_route("POST", "views/rename", status=204, on=router)
async def rename_view(ctx: Ctx, request: Request, prefix: str = "") -> Response:
    from_where, from_name, to_where, to_name = rename_parties(prefix, await _json(request), "a view")
    await grants.on_view(ctx, a.CATALOG_DELETE_VIEW, from_where, from_name)
    await grants.on_view(ctx, a.CATALOG_CREATE_VIEW, to_where, to_name)
    objects = Objects(ctx)
    view = await _existing_view(objects, from_where, from_name)
    await _namespace(objects, to_where)
    current = await _refuse_taken(objects, to_where, to_name)
    # As a table's rename: both pointers in one compare-and-set, the new name only while free
    # (absent, or its tombstone as read), the old one a tombstone only while it is as read.
    to_key = _pointer_key(to_where, to_name)
    moves = [
        Replacement(
            to_key, {"metadata-key": view.metadata_key}, "" if current is None else current.etag, current is None
        ),
        Replacement(
            _pointer_key(from_where, from_name), {"renamed-to": [*to_where.levels, to_name]}, view.pointer.etag
        ),
    ]
    renamed = f"{_dotted(from_where, from_name)} to {_dotted(to_where, to_name)}"
    touched = [from_where.table_key(from_name), to_where.table_key(to_name)]
    try:
        async with committed(request, ctx, from_where, "rename view", renamed, touched):
            await objects.replace_all_json(from_where, moves)
    except Conflict as conflict:
        if conflict.key == to_key:
            raise view_exists_error(to_where, to_name) from None
        raise commit_failed(f"Commit failed: the view {from_name} was changed during the rename; retry") from None
    except OutcomeUnknown as unknown:
        raise commit_state_unknown(str(unknown)) from None
    return Response(status_code=204)
