"""Repositories: list, create, get, delete, metadata (labels kept on graveler's repository record)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import RepositoryCreation, RepositoryList, RepositoryMetadataKeys, RepositoryMetadataSet

from edge.api import convert
from edge.api.bodies import SMALL_BODY_BYTES, M, body_limit, json_body, json_object, validate
from edge.api.context import Context, Ctx
from edge.api.errors import ApiError, bad_request, from_graveler
from edge.api.paging import MAX_TOKEN, PrefixPageParams, pagination
from edge.api.responses import model_response, no_content
from edge.api.routes.setup import storage_config
from edge.api.sample.repo import fill_with_sample
from silt.errors import PermissionDenied, SiltError
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import CREATE_REPO, DELETE_REPO, READ_REFS, WRITE_REPO
from silt.paging import MAX_PAGE

router = APIRouter()

# A listing filtered by search or by what the caller may read stops after this many
# repositories examined, and says where to go on (has_more, next_offset): bounded work.
MAX_EXAMINED = 10 * MAX_PAGE


@router.get("/repositories")
async def list_repositories(
    ctx: Ctx,
    requested: PrefixPageParams,
    search: Annotated[str, Query(max_length=MAX_TOKEN)] = "",
) -> Response:
    prefix, size = requested.prefix, requested.size
    # Graveler lists names strictly after its `after`; every name with the prefix is after prefix[:-1].
    cursor = max(requested.after, prefix[:-1])
    found: list[api.RepositoryInfo] = []
    examined = 0
    exhausted = False
    while len(found) <= size and examined < MAX_EXAMINED and not exhausted:
        request = api.ListRepositoriesRequest(after=cursor, amount=MAX_PAGE)
        reply = await ctx.call(ctx.backend.graveler.ListRepositories, request)
        exhausted = not reply.has_more
        candidates = []
        for info in reply.repositories:
            if prefix and not info.name.startswith(prefix) and info.name > prefix:
                exhausted = True  # past every name with the prefix
                break
            examined += 1
            cursor = info.name
            if info.name.startswith(prefix) and search in info.name:
                candidates.append(info)
        # ReadRefs: held through ReadRepo too, and by readers of some keys who may open it.
        names = [i.name for i in candidates]
        allowed = await ctx.backend.allowed_many(ctx.caller.user_id, READ_REFS, names, ctx.source_ip)
        found.extend(info for info, ok in zip(candidates, allowed, strict=True) if ok)
    page = found[:size]
    if len(found) > size:
        has_more, next_offset = True, page[-1].name
    else:
        # Out of budget before the end: a short page, and where to go on.
        has_more, next_offset = not exhausted, cursor
    body = RepositoryList(
        pagination=pagination(has_more, next_offset, len(page), size),
        results=[convert.repository(i) for i in page],
    )
    return model_response(body)


async def _refuse_existing(ctx: Context, name: str) -> None:
    try:
        await ctx.call(ctx.backend.graveler.GetRepository, api.GetRepositoryRequest(name=name))
    except ApiError as exc:
        if exc.status == 404:
            return
        raise
    raise ApiError(409, f"repository {name!r} already exists")


@router.post("/repositories", status_code=201)
async def create_repository(ctx: Ctx, request: Request, bare: bool = False) -> Response:
    # The repository to authorize is named in the body: read it, kept small, first.
    data = await json_object(request, body_limit(request, SMALL_BODY_BYTES))
    # storage_namespace is optional here (lakeFS requires it) when GET /config names a default
    # prefix: graveler places an unnamed repository under the first of
    # graveler.allowed_namespace_roots, the prefix /config reports (routes/setup.py).
    derived = not data.get("storage_namespace")
    if derived:
        data = {**data, "storage_namespace": "local://placeholder"}
    body = validate(RepositoryCreation, data)
    await ctx.authorize(CREATE_REPO, body.name)
    if derived and storage_config(request).default_namespace_prefix is None:
        raise bad_request(
            "storage_namespace is required: this server has no default namespace root "
            "(graveler.allowed_namespace_roots is empty)"
        )
    if body.read_only or body.storage_id:
        # An existing name is a conflict whatever was asked for.
        await _refuse_existing(ctx, body.name)
        raise ApiError(400, "read-only repositories and storage ids are not supported")
    if body.sample_data:
        if bare:
            raise bad_request("a bare repository has no default branch to put sample data on")
        # Writing the sample needs what any writer needs: asked before the repository exists.
        await ctx.authorize(WRITE_REPO, body.name)
    request_pb = api.CreateRepositoryRequest(
        name=body.name,
        storage_namespace="" if derived else body.storage_namespace,
        default_branch=body.default_branch or "main",
        bare=bare,
        # A bare repository on another's namespace (where its dump is restored) needs the caller's
        # own RestoreRefs on that repository: graveler asks for the user named here.
        on_behalf_of=ctx.caller.user_id,
    )
    try:
        info = await ctx.backend.graveler_call(
            ctx.backend.graveler.CreateRepository, request_pb, ctx.deadline, metadata=ctx.client_ip_metadata
        )
    except PermissionDenied as exc:
        if not bare:
            raise from_graveler(exc, "graveler") from None
        # The one refusal of the user named: a bare repository on another's namespace needs
        # that repository's RestoreRefs (the API's own credentials hold what creation needs).
        raise ApiError(403, str(exc)) from None
    except SiltError as exc:
        raise from_graveler(exc, "graveler") from None
    if body.sample_data:
        await fill_with_sample(ctx, info)
    return model_response(convert.repository(info), 201)


async def get_info(ctx: Ctx, repository: str) -> api.RepositoryInfo:
    await ctx.authorize(READ_REFS, repository)
    return await ctx.call(ctx.backend.graveler.GetRepository, api.GetRepositoryRequest(name=repository))


@router.get("/repositories/{repository}")
async def get_repository(ctx: Ctx, repository: str) -> Response:
    return model_response(convert.repository(await get_info(ctx, repository)))


@router.delete("/repositories/{repository}", status_code=204)
async def delete_repository(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(DELETE_REPO, repository)
    await ctx.call(ctx.backend.graveler.DeleteRepository, api.DeleteRepositoryRequest(name=repository))
    ctx.backend.forget_namespace(repository)
    return no_content()


METADATA = "/repositories/{repository}/metadata"


@router.get(METADATA)
async def get_repository_metadata(ctx: Ctx, repository: str) -> Response:
    info = await get_info(ctx, repository)
    return JSONResponse(dict(sorted(info.metadata.items())))


async def _change_metadata(
    ctx: Context, request: Request, repository: str, model: type[M], change: Callable[[M], dict[str, Any]]
) -> Response:
    """A change to a repository's metadata, as setting and deleting keys make it: the body (a
    model) read once the caller may write, then UpdateRepositoryMetadata with change(body)."""
    await ctx.authorize(WRITE_REPO, repository)
    body = await json_body(request, model)
    update = api.UpdateRepositoryMetadataRequest(repository=repository, **change(body))
    await ctx.call(ctx.backend.graveler.UpdateRepositoryMetadata, update)
    return no_content()


@router.post(METADATA, status_code=204)
async def set_repository_metadata(ctx: Ctx, request: Request, repository: str) -> Response:
    """Add or replace the given keys, keeping the others (lakeFS)."""
    return await _change_metadata(ctx, request, repository, RepositoryMetadataSet, lambda body: {"set": body.metadata})


@router.delete(METADATA, status_code=204)
async def delete_repository_metadata(ctx: Ctx, request: Request, repository: str) -> Response:
    """Remove the given keys; absent ones are no error (lakeFS)."""
    return await _change_metadata(ctx, request, repository, RepositoryMetadataKeys, lambda body: {"delete": body.keys})
