"""Walking the commit graph: merge bases and (filtered) logs."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from silt.graveler.v1 import model_pb2 as pb

GetCommit = Callable[[str], pb.Commit]


def _order(commit: pb.Commit) -> tuple[int, int, str]:
    # Newest first: higher generation, then later creation, then id for a total order.
    return (-commit.generation, -commit.creation_date.ToNanoseconds(), commit.id)


def find_merge_base(get_commit: GetCommit, left: str, right: str) -> str | None:
    """The best common ancestor of two commits: the one with the highest generation.

    Walks both histories together, newest first. Every descendant of a commit has a higher
    generation and is therefore visited before it, so a commit's reachability flags are
    final when it is popped; the first commit reachable from both sides is the answer.
    """
    if left == right:
        return left
    flags: dict[str, int] = {left: 1, right: 2}
    commits = {left: get_commit(left), right: get_commit(right)}
    heap = [(_order(c), c.id) for c in commits.values()]
    heapq.heapify(heap)
    done: set[str] = set()
    while heap:
        _, commit_id = heapq.heappop(heap)
        if commit_id in done:
            continue
        done.add(commit_id)
        if flags[commit_id] == 3:
            return commit_id
        for parent_id in commits[commit_id].parents:
            merged = flags.get(parent_id, 0) | flags[commit_id]
            if merged != flags.get(parent_id):
                flags[parent_id] = merged
                if parent_id not in commits:
                    commits[parent_id] = get_commit(parent_id)
                heapq.heappush(heap, (_order(commits[parent_id]), parent_id))
    return None


@dataclass
class LogFilter:
    first_parent: bool = False
    since_nanos: int = 0  # stop at commits created before this
    stop_at: str = ""  # stop at this commit, exclusive
    # Keep only commits whose change against their first parent touches these paths.
    touches: Callable[[pb.Commit], bool] | None = field(default=None)


def ancestors(get_commit: GetCommit, head: str, filters: LogFilter | None = None) -> Iterator[pb.Commit]:
    """The history of head, newest first, filtered."""
    filters = filters or LogFilter()
    first = get_commit(head)
    heap = [(_order(first), head)]
    commits = {head: first}
    seen = {head}
    while heap:
        _, commit_id = heapq.heappop(heap)
        commit = commits.pop(commit_id)
        if commit_id == filters.stop_at:
            continue
        if filters.since_nanos and commit.creation_date.ToNanoseconds() < filters.since_nanos:
            continue
        if filters.touches is None or filters.touches(commit):
            yield commit
        parents = commit.parents[:1] if filters.first_parent else commit.parents
        for parent_id in parents:
            if parent_id not in seen:
                seen.add(parent_id)
                commits[parent_id] = get_commit(parent_id)
                heapq.heappush(heap, (_order(commits[parent_id]), parent_id))
