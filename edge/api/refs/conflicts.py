"""Whether a merge would conflict, without merging: the keys both sides changed since their
merge base, to different results.

A merge's own conflict report comes only from a merge that fails (graveler's Merge changes the
destination when it succeeds), so a page that wants to say "this would conflict" before anyone
presses Merge asks this instead. It walks the two diffs from the merge base (source's and
destination's) side by side in key order and compares what each side left at a key both
changed, by the entry's identity as graveler's merge does (engine/core/values.py: size, ETag,
content type and metadata, not where or when the bytes were written). The walk is bounded:
past MAX_EXAMINED changes on either side, or once MAX_CONFLICTS are found, it stops and says
that more may follow.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from edge.api.context import Context
from edge.api.refs import table_merges
from edge.api.refs.merge import MAX_PATH_SHOWN
from edge.api.refs.table_merges import TableConflict
from engine.core.values import entry_value
from silt.graveler.v1 import graveler_pb2 as api
from silt.paging import MAX_PAGE

# Changes read from each side before the answer says it stopped (conflicts_truncated).
MAX_EXAMINED = 100 * MAX_PAGE
# As many conflicts as a failed merge lists (graveler's report cap).
MAX_CONFLICTS = 100


@dataclass
class MergeCheck:
    """The two commits and their base, and the conflicts found between them."""

    source_commit_id: str
    destination_commit_id: str
    base_commit_id: str
    conflicts: list[dict[str, str]] = field(default_factory=list)
    conflicts_truncated: bool = False
    # Iceberg tables both sides changed: those the merge combines (their pointers are not
    # listed as conflicts), and those it would not, each with the reason (table_merges.py).
    tables_combined: list[str] = field(default_factory=list)
    tables: list[TableConflict] = field(default_factory=list)

    def body(self) -> dict[str, object]:
        return {
            "source_commit_id": self.source_commit_id,
            "destination_commit_id": self.destination_commit_id,
            "base_commit_id": self.base_commit_id,
            "mergeable": not self.conflicts,
            "conflicts": self.conflicts,
            "conflicts_truncated": self.conflicts_truncated,
            "tables_combined": self.tables_combined,
            "tables": [table.body() for table in self.tables],
        }


class _Budget:
    """How many changes one side may still read."""

    def __init__(self) -> None:
        self.left = MAX_EXAMINED
        self.exhausted = False


async def _changes(
    ctx: Context, repository: str, base: str, side: str, budget: _Budget
) -> AsyncGenerator[api.DiffItem, None]:
    """Every change of `side` since `base`, in key order, until the budget runs out."""
    after = ""
    while True:
        amount = min(MAX_PAGE, budget.left)
        if amount <= 0:
            budget.exhausted = True
            return
        request = api.DiffRequest(repository=repository, left_ref=base, right_ref=side, after=after, amount=amount)
        reply: api.DiffResponse = await ctx.call(ctx.backend.graveler.Diff, request)
        budget.left -= len(reply.items)
        for item in reply.items:
            yield item
        if not reply.has_more or not reply.items:
            return
        after = reply.items[-1].key


def _result(item: api.DiffItem) -> bytes | None:
    """What a change left at its key: the entry's identity, or None when it removed the key."""
    if item.type == api.DIFF_TYPE_REMOVED:
        return None
    return entry_value(item.right).identity


def _what(item: api.DiffItem) -> str:
    """What one side did to a key since the merge base, as a merge's 409 says it."""
    return {api.DIFF_TYPE_ADDED: "added", api.DIFF_TYPE_REMOVED: "removed"}.get(item.type, "changed")


async def _next(changes: AsyncIterator[api.DiffItem]) -> api.DiffItem | None:
    return await anext(changes, None)


async def check_merge(ctx: Context, repository: str, source_ref: str, destination: str) -> MergeCheck:
    """The conflicts a merge of source_ref into destination would meet now."""
    source = (await ctx.call(ctx.backend.graveler.ResolveRef, _resolve(repository, source_ref))).commit_id
    dest = (await ctx.call(ctx.backend.graveler.ResolveRef, _resolve(repository, destination))).commit_id
    found = api.FindMergeBaseRequest(repository=repository, left_ref=source, right_ref=dest)
    base = (await ctx.call(ctx.backend.graveler.FindMergeBase, found)).commit_id
    check = MergeCheck(source, dest, base)
    if base in (source, dest):
        return check  # one side holds the other: a fast-forward or nothing to merge, never a conflict
    source_budget, dest_budget = _Budget(), _Budget()
    ours = _changes(ctx, repository, base, source, source_budget)
    theirs = _changes(ctx, repository, base, dest, dest_budget)
    try:
        await _join(check, ours, theirs)
    finally:
        await ours.aclose()
        await theirs.aclose()
    if not check.conflicts_truncated:
        check.conflicts_truncated = source_budget.exhausted or dest_budget.exhausted
    if check.conflicts and not check.conflicts_truncated:
        keys = [conflict["path"] for conflict in check.conflicts]
        tables = await table_merges.predict(ctx, repository, (source, dest, base), destination, keys)
        if tables is not None:
            check.tables_combined, check.tables = tables
            if not check.tables:
                check.conflicts = []
    return check


async def _join(check: MergeCheck, ours: AsyncIterator[api.DiffItem], theirs: AsyncIterator[api.DiffItem]) -> None:
    """Walks both sides' changes in key order, noting the keys they left differently."""
    mine, other = await _next(ours), await _next(theirs)
    while mine is not None and other is not None:
        if mine.key < other.key:
            mine = await _next(ours)
        elif other.key < mine.key:
            other = await _next(theirs)
        else:
            if _result(mine) != _result(other):
                if len(check.conflicts) == MAX_CONFLICTS:
                    check.conflicts_truncated = True
                    return
                check.conflicts.append(
                    {"path": mine.key[:MAX_PATH_SHOWN], "source": _what(mine), "destination": _what(other)}
                )
            mine, other = await _next(ours), await _next(theirs)


def _resolve(repository: str, ref: str) -> api.ResolveRefRequest:
    return api.ResolveRefRequest(repository=repository, ref=ref)
