"""Import: lakeFS's importStart, importStatus and importCancel, over graveler's import calls.

Entries point at objects that stay where they are (docs/import.md); graveler checks what the
installation lets an import read, ingests in the background and makes one commit.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import Error, ImportCreation, ImportCreationResponse, ImportStatus

from edge.api import convert
from edge.api.bodies import json_body
from edge.api.context import Ctx
from edge.api.refs.merge import lakefs_call
from edge.api.responses import model_response, no_content
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import COMMIT_BRANCH, READ_BRANCH, WRITE_REPO, branch_resource

router = APIRouter()

IMPORT = "/repositories/{repository}/branches/{branch}/import"
_TYPES = {"common_prefix": api.ImportLocation.TYPE_COMMON_PREFIX, "object": api.ImportLocation.TYPE_OBJECT}
ImportId = Annotated[str, Query(min_length=1, max_length=64)]


@router.post(IMPORT, status_code=202)
async def import_start(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    # An import commits on the branch: a Deny of committing there holds for it too.
    await ctx.authorize(COMMIT_BRANCH, branch_resource(repository, branch))
    body = await json_body(request, ImportCreation)
    locations = [
        api.ImportLocation(type=_TYPES[location.type], path=location.path, destination=location.destination)
        for location in body.paths
    ]
    started = api.StartImportRequest(
        repository=repository,
        branch=branch,
        locations=locations,
        message=body.commit.message,
        metadata=body.commit.metadata or {},
        committer=ctx.caller.user_id,
    )
    reply = await lakefs_call(ctx.call(ctx.backend.graveler.StartImport, started))
    return model_response(ImportCreationResponse(id=reply.id), 202)


@router.get(IMPORT)
async def import_status(ctx: Ctx, repository: str, branch: str, id: ImportId) -> Response:  # id: lakeFS's name
    await ctx.authorize(READ_BRANCH, branch_resource(repository, branch))
    request = api.GetImportStatusRequest(repository=repository, branch=branch, id=id)
    info = await ctx.call(ctx.backend.graveler.GetImportStatus, request)
    status = ImportStatus(
        completed=info.completed,
        update_time=datetime.fromtimestamp(info.update_time.ToNanoseconds() / 1e9, tz=UTC),
        ingested_objects=info.ingested_objects,
        metarange_id=info.metarange_id or None,
        commit=convert.commit(info.commit, await ctx.backend.own_user_id()) if info.HasField("commit") else None,
        error=Error(message=info.error) if info.error else None,
    )
    # The model's own JSON: update_time is a date-time, which its to_dict leaves as an object.
    return JSONResponse(json.loads(status.json(by_alias=True, exclude_none=True)))


@router.delete(IMPORT, status_code=204)
async def import_cancel(ctx: Ctx, repository: str, branch: str, id: ImportId) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    await ctx.authorize(COMMIT_BRANCH, branch_resource(repository, branch))
    await ctx.call(
        ctx.backend.graveler.CancelImport, api.CancelImportRequest(repository=repository, branch=branch, id=id)
    )
    return no_content()
