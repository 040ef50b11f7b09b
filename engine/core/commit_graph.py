"""Walking the commit graph: merge bases and (filtered) logs."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from engine.core.deadline import Deadline
from silt.errors import FailedPrecondition, InvalidArgument
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


def descends_from(get_commit: GetCommit, head: str, commit: pb.Commit, limit: int) -> bool | None:
    """Whether commit is head or one of its ancestors; None if that is not settled within limit
    commits read.

    Walks back from head through every parent (of merge commits too), highest generation first.
    A commit's generation is above all of its parents', so nothing below commit's generation
    can lead to it: the walk does not go past such commits.
    """
    heap: list[tuple[int, str]] = []
    parents: dict[str, list[str]] = {}
    seen: set[str] = set()
    reached = [head]
    read = 0
    while True:
        for commit_id in reached:
            if commit_id == commit.id:
                return True
            if commit_id in seen:
                continue
            seen.add(commit_id)
            if read == limit:
                return None
            read += 1
            found = get_commit(commit_id)
            if found.generation >= commit.generation:
                parents[commit_id] = list(found.parents)
                heapq.heappush(heap, (-found.generation, commit_id))
        if not heap:
            return False
        _, commit_id = heapq.heappop(heap)
        reached = parents.pop(commit_id)


@dataclass
class LogFilter:
    first_parent: bool = False
    since_nanos: int = 0  # stop at commits created before this
    stop_at: str = ""  # stop at this commit, exclusive
    # Keep only commits whose change against their first parent touches these paths.
    touches: Callable[[pb.Commit], bool] | None = field(default=None)


class HistoryWalk:
    """The history of some commits, newest first, one commit at a time, resumable.

    Every commit is expanded (its parents read) when it is taken, and parents are always
    older in the walk's order than their children, so the walk so far is summed up by the
    commits still pending (its frontier): a walk started from a frontier goes on exactly as the
    walk that left it would have. That is what lets a log page resume without re-walking the
    history from the head.
    """

    def __init__(self, get_commit: GetCommit, start: Iterable[str], filters: LogFilter | None = None) -> None:
        self._get_commit = get_commit
        self._filters = filters or LogFilter()
        self._heap: list[tuple[tuple[int, int, str], str]] = []
        self._pending: dict[str, pb.Commit] = {}
        self._seen: set[str] = set()
        for commit_id in start:
            self._push(commit_id)

    def _push(self, commit_id: str) -> None:
        if commit_id in self._seen:
            return
        self._seen.add(commit_id)
        commit = self._pending[commit_id] = self._get_commit(commit_id)
        heapq.heappush(self._heap, (_order(commit), commit_id))

    def take(self) -> pb.Commit | None:
        """The next commit (not passing stop_at or since: those end their line), or None at the end."""
        filters = self._filters
        while self._heap:
            _, commit_id = heapq.heappop(self._heap)
            commit = self._pending.pop(commit_id)
            if commit_id == filters.stop_at:
                continue
            if filters.since_nanos and commit.creation_date.ToNanoseconds() < filters.since_nanos:
                continue
            for parent_id in commit.parents[:1] if filters.first_parent else commit.parents:
                self._push(parent_id)
            return commit
        return None

    @property
    def frontier(self) -> list[str]:
        """The commits the walk takes next, newest first."""
        return [commit_id for _, commit_id in sorted(self._heap)]


def ancestors(get_commit: GetCommit, head: str, filters: LogFilter | None = None) -> Iterator[pb.Commit]:
    """The history of head, newest first, filtered."""
    filters = filters or LogFilter()
    walk = HistoryWalk(get_commit, [head], filters)
    while (commit := walk.take()) is not None:
        if filters.touches is None or filters.touches(commit):
            yield commit


# --- log pages ----------------------------------------------------------------------------

# One call reads at most this many commits and compares at most this many with their first
# parent (the path filter): a page of a log over a long history costs a bounded amount, and
# the next page resumes where this one stopped.
MAX_LOG_STEPS = 10_000
MAX_LOG_DIFFS = 1_000
# A cursor names the walk's frontier: the lines of history open at that point (one per branch
# forked before it and merged after it). Past this many, a page cannot say where to resume.
MAX_CURSOR_FRONTIER = 1000
_CURSOR_TAG = "log1."
_COMMIT_ID_CHARS = 64
_HEX = frozenset("0123456789abcdef")


def is_commit_id(text: str) -> bool:
    return len(text) == _COMMIT_ID_CHARS and set(text) <= _HEX


@dataclass(frozen=True)
class LogCursor:
    """Where a log page resumes: the walk's frontier, the commit up to which a re-walk returns
    nothing (the last one a page returned), and how many commits pages returned so far (limit)."""

    frontier: tuple[str, ...]
    skip_to: str = ""
    returned: int = 0

    def encode(self) -> str:
        return f"{_CURSOR_TAG}{self.returned}.{self.skip_to}.{','.join(self.frontier)}"

    @classmethod
    def decode(cls, text: str) -> LogCursor:
        problem = "not a cursor from a previous page (next_after) nor a commit id"
        parts = text.removeprefix(_CURSOR_TAG).split(".") if text.startswith(_CURSOR_TAG) else []
        # Checked by length first: a hostile cursor costs its parse, no more.
        if len(text) > len(_CURSOR_TAG) + 12 + (MAX_CURSOR_FRONTIER + 1) * (_COMMIT_ID_CHARS + 1) or len(parts) != 3:
            raise InvalidArgument(f"invalid log cursor: {problem}")
        returned, skip_to, frontier = parts[0], parts[1], tuple(parts[2].split(",")) if parts[2] else ()
        if (
            not (returned.isascii() and returned.isdigit() and len(returned) <= 10)
            or (skip_to and not is_commit_id(skip_to))
            or not 0 < len(frontier) <= MAX_CURSOR_FRONTIER
            or not all(is_commit_id(commit_id) for commit_id in frontier)
        ):
            raise InvalidArgument(f"invalid log cursor: {problem}")
        return cls(frontier, skip_to, int(returned))


class LogPage(NamedTuple):
    commits: list[pb.Commit]
    next_after: str  # empty: the history ends here


def log_page(
    get_commit: GetCommit,
    head: str,
    filters: LogFilter,
    after: str,
    amount: int,
    limit: int,
    deadline: Deadline,
) -> LogPage:
    """Up to `amount` commits of head's history after `after` (a cursor or a commit id).

    Bounded per call: the deadline is checked before every commit, and a call stops after
    MAX_LOG_STEPS commits read or MAX_LOG_DIFFS path comparisons, returning what it found
    (perhaps nothing) and a cursor to go on from.
    """
    if not after:
        cursor = LogCursor((head,))
    elif is_commit_id(after):
        cursor = LogCursor((head,), skip_to=after)  # a page's last commit: re-walk up to it
    else:
        cursor = LogCursor.decode(after)
    walk = HistoryWalk(get_commit, cursor.frontier, filters)
    skip_to, returned = cursor.skip_to, cursor.returned
    page: list[pb.Commit] = []
    steps = diffs = 0

    def matches(commit: pb.Commit) -> bool:
        nonlocal diffs
        if filters.touches is None:
            return True
        diffs += 1
        return filters.touches(commit)

    while not (limit and returned >= limit):
        if len(page) == amount or steps >= MAX_LOG_STEPS or diffs >= MAX_LOG_DIFFS:
            frontier = walk.frontier
            if not frontier:
                break
            if len(frontier) > MAX_CURSOR_FRONTIER:
                raise FailedPrecondition(
                    f"the history has more than {MAX_CURSOR_FRONTIER} lines open at this point, too many to page "
                    "through: ask for larger pages or follow first parents only"
                )
            return LogPage(page, LogCursor(tuple(frontier), skip_to, returned).encode())
        deadline.check("log")
        commit = walk.take()
        if commit is None:
            break
        steps += 1
        if skip_to:
            # Commits earlier pages returned: counted for limit only (which needs the filter).
            if limit and matches(commit):
                returned += 1
            if commit.id == skip_to:
                skip_to = ""
            continue
        if matches(commit):
            page.append(commit)
            returned += 1
    return LogPage(page, "")
