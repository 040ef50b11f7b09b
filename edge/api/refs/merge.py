"""What merge, revert and cherry-pick share: lakeFS's strategy names, its error texts that
clients match ("conflict found", "no changes", "dirty branch"), and a body that may be absent."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, TypeVar

from fastapi import Request
from pydantic.v1 import BaseModel

from edge.api.bodies import parsed_object, read_body, require_json, validate
from edge.api.context import Context
from edge.api.errors import ApiError, bad_request
from silt.graveler.v1 import graveler_pb2 as api

M = TypeVar("M", bound=BaseModel)

# lakeFS's names for merge strategies (Merge.strategy); "" and absent mean the default, where
# a conflict fails the merge.
STRATEGIES: dict[str, api.MergeStrategy.ValueType] = {
    "": api.MERGE_STRATEGY_FAIL,
    "dest-wins": api.MERGE_STRATEGY_DEST_WINS,
    "source-wins": api.MERGE_STRATEGY_SOURCE_WINS,
}
# lakeFS records the strategy of every merge commit under this metadata key.
STRATEGY_METADATA_KEY = ".lakefs.merge.strategy"
STRATEGY_LABELS = {"": "default", "dest-wins": "dest-wins", "source-wins": "source-wins"}

# A conflict answer names at most this many paths, each cut to this many characters.
MAX_CONFLICTS_NAMED = 10
MAX_PATH_SHOWN = 256

# Graveler's refusals (FailedPrecondition, 400) and the lakeFS texts clients match in them.
_DIRTY = "has uncommitted changes"
_NOTHING = ("nothing to merge", "changes nothing", "nothing to commit")
DIRTY_BRANCH = "uncommitted changes (dirty branch)"
NO_CHANGES = "no changes"
CONFLICT_FOUND = "conflict found"


def strategy_of(name: str | None) -> api.MergeStrategy.ValueType:
    strategy = STRATEGIES.get(name or "")
    if strategy is None:
        raise bad_request(f"invalid merge strategy {name!r}: use dest-wins or source-wins, or none")
    return strategy


def conflict_message(reply: api.MergeResponse) -> str:
    """lakeFS's "conflict found", naming a bounded number of the conflicting paths."""
    paths = [c.key[:MAX_PATH_SHOWN] for c in reply.conflicts[:MAX_CONFLICTS_NAMED]]
    more = len(reply.conflicts) > MAX_CONFLICTS_NAMED or reply.conflicts_truncated
    listed = ", ".join(paths) + (", ..." if more else "")
    return f"{CONFLICT_FOUND}: conflicting paths: {listed}"


def conflict_body(reply: api.MergeResponse, tables: Sequence[TableConflictLike] = ()) -> dict[str, object]:
    """A merge's 409: lakeFS's `message` and `reference` (valid as `MergeResult` and `Error`), and
    Silt's `conflicts`, every examined conflicting path with what each side did to it, so a
    client need not parse paths out of the text (a path may hold ", "); and `tables`, the Iceberg
    tables whose two sides' changes did not combine, each with the reason (table_merges.py)."""
    message = conflict_message(reply)
    if tables:
        message += "; " + "; ".join(table.text() for table in tables)
    return {
        "message": message,
        "reference": "",
        "conflicts": [
            {
                "path": c.key[:MAX_PATH_SHOWN],
                "source": _side_change(c, c.HasField("source")),
                "destination": _side_change(c, c.HasField("destination")),
            }
            for c in reply.conflicts
        ],
        "conflicts_truncated": reply.conflicts_truncated,
        "tables": [table.body() for table in tables],
    }


class TableConflictLike(Protocol):
    def text(self) -> str: ...

    def body(self) -> dict[str, str]: ...


def _side_change(conflict: api.Conflict, present: bool) -> str:
    """What one side of a conflict did to its path since the merge base."""
    if not present:
        return "removed"
    return "changed" if conflict.HasField("base") else "added"


def in_lakefs_terms(exc: ApiError) -> ApiError:
    """Graveler's 400s for a dirty branch or an empty result, with lakeFS's text in front (clients
    match "dirty branch" and "no changes"); graveler's own explanation follows it."""
    if exc.status != 400:
        return exc
    if _DIRTY in exc.message:
        return ApiError(400, f"{DIRTY_BRANCH}: {exc.message}")
    if any(text in exc.message for text in _NOTHING):
        return ApiError(400, f"{NO_CHANGES}: {exc.message}")
    return exc


async def lakefs_call(call: Awaitable[Any]) -> Any:
    """A graveler call whose refusals speak lakeFS's texts."""
    try:
        return await call
    except ApiError as exc:
        raise in_lakefs_terms(exc) from None


async def optional_body(request: Request, model: type[M]) -> M:
    """A body the schema does not require: absent or empty means every field's default. A body
    that is there must be JSON (the CSRF rule of bodies.require_json), and so must a declared
    Content-Type even with no body (a cross-site form always declares one)."""
    if request.headers.get("content-type") is not None:
        require_json(request)
    raw = await read_body(request, request.app.state.max_body_bytes)
    if not raw.strip():
        return model()
    require_json(request)
    return validate(model, parsed_object(raw))


async def commit_of(ctx: Context, repository: str, ref: str, parent_number: int | None, merge_needs: int) -> str:
    """The commit a revert or cherry-pick applies, checked against the parent number as lakeFS
    does before acting: a merge commit needs one (`merge_needs`: lakeFS answers 409 for revert,
    400 for cherry-pick), and it must exist. Resolved once, so graveler works on that commit."""
    if parent_number is not None and parent_number < 0:
        raise bad_request("parent_number must not be negative")
    resolved = await ctx.call(ctx.backend.graveler.ResolveRef, api.ResolveRefRequest(repository=repository, ref=ref))
    info = await ctx.call(
        ctx.backend.graveler.GetCommit, api.GetCommitRequest(repository=repository, commit_id=resolved.commit_id)
    )
    parents = len(info.parents)
    if parents > 1 and not parent_number:
        raise ApiError(merge_needs, f"{ref} is a merge commit: must specify 1-based parent number")
    if parent_number and parent_number > parents:
        raise bad_request(f"commit {info.id[:12]} does not have parent number {parent_number} (it has {parents})")
    commit_id: str = info.id
    return commit_id
