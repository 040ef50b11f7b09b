"""Filling a new repository with the sample (edge/api/sample/files.py) for its creator:
the same writes, commits, branch and pull request a client would make, so the sample looks
like any repository (history, review, garbage collection)."""

from __future__ import annotations

import asyncio
import io
import logging

from edge.api.context import Context
from edge.api.objects.write import now, stage_new_bytes
from edge.api.sample.files import PULL_TITLE, REVIEW_BRANCH, SampleFile, sample_steps
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import new_physical_address
from silt.repository_place import RepositoryPlace

log = logging.getLogger(__name__)

PULL_DESCRIPTION = "An example change to review: the hardware prices in tables/products.csv go up by 10%."


async def _write(ctx: Context, repository: str, place: RepositoryPlace, branch: str, file: SampleFile) -> None:
    backend = ctx.backend
    namespace = place.namespace
    address = new_physical_address()
    async with backend.new_bytes(namespace, address):
        result = await backend.write_bytes(namespace, address, io.BytesIO(file.data), len(file.data))
    entry = pb.Entry(
        physical_address=address,
        size=result.size,
        etag=result.etag.strip('"'),
        last_modified=now(),
        content_type=file.content_type,
    )
    await stage_new_bytes(
        ctx, api.StageEntryRequest(repository=repository, branch=branch, key=file.path, entry=entry), place
    )
    ctx.record(ev.WRITE, repository, branch, file.path, entry.size)


async def fill_with_sample(ctx: Context, info: api.RepositoryInfo) -> None:
    """Commit the sample's steps and open its pull request; the repository is deleted again if
    any step fails, so a failed creation leaves nothing half-made."""
    repository, main = info.name, info.default_branch
    try:
        steps = await asyncio.get_running_loop().run_in_executor(None, sample_steps, main)
        for step in steps:
            if step.branch != main:
                branch = api.CreateBranchRequest(
                    repository=repository, name=step.branch, source_ref=main, user=ctx.caller.user_id
                )
                await ctx.call(ctx.backend.graveler.CreateBranch, branch)
            for file in step.files:
                await _write(ctx, repository, RepositoryPlace.of(info), step.branch, file)
            commit = api.CommitRequest(
                repository=repository, branch=step.branch, message=step.message, committer=ctx.caller.user_id
            )
            await ctx.call(ctx.backend.graveler.Commit, commit)
        pull = api.CreatePullRequestRequest(
            repository=repository,
            title=PULL_TITLE,
            description=PULL_DESCRIPTION,
            source_branch=REVIEW_BRANCH,
            destination_branch=main,
            author=ctx.caller.user_id,
        )
        await ctx.call(ctx.backend.graveler.CreatePullRequest, pull)
    except BaseException:
        log.warning("sample data for repository %r failed; deleting the repository", repository)
        await asyncio.shield(_delete(ctx, repository))
        raise


async def _delete(ctx: Context, repository: str) -> None:
    try:
        await ctx.backend.call(ctx.backend.graveler.DeleteRepository, api.DeleteRepositoryRequest(name=repository))
    except Exception:  # the original failure is what the caller is told
        log.exception("could not delete the half-made sample repository %r", repository)
