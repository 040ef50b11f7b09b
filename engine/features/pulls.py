"""Pull requests, their comments and reviews: repository metadata in the repository's partition.

Key schema (partition ``<repo>-<unique id>``):

* ``pulls/<id>`` -> PullRequest, with its reviews (one current verdict per reviewer);
* ``pull_comments/<pull id>/<comment id>`` -> PullRequestComment.

Ids are ``<creation time in ns, 16 hex digits><8 random hex digits>``: unique without a
counter that every creator would contend on (each creation is a set_if on its own fresh key,
retried with a new id in the astronomically rare collision), and sorted by creation time, so
listing in key order is listing oldest first (across replicas, as ordered as their clocks).

Every change of a pull request is a set_if on its record, retried by BranchUpdater.retry. A
merge first *claims* the record (status stays OPEN, merge_claim set), deciding on the reviews
it holds at that moment; reviews, updates and other merges are refused while the claim is live,
so a review either lands before the claim and counts, or after it and is refused — never counted
by one and lost by the other. The claim lapses after the merge's deadline (a crashed merge does
not block the pull request forever). Comments are their own keys and never contend.

Reviews are of a commit: each records the source branch's head when submitted. A merge resolves
the source head once, when it claims, counts only the reviews of that commit (a push after an
approval leaves it stale: it stays listed but no longer counts, where GitHub would dismiss it),
and merges that commit id, not the branch, so commits pushed during the merge are not merged
unreviewed. Reopening a closed pull request drops its reviews: it is reviewed afresh.

An approval counts only from someone who wrote none of what is merged: neither the pull
request's author nor the committer of any commit the merge brings in (reachable from the source
head and not from the destination's, i.e. since their merge base). That is decided when the
merge claims, from the commits as recorded, so no order of pushes and reviews gets around it; a
commit's committer is the user it was made for on every path (services/graveler/servicer.py).
"""

from __future__ import annotations

import heapq
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.branching import Branching, MergeOutcome
from engine.core.commit_graph import GetCommit
from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.filtered_page import filtered_page
from engine.core.hooks import EventUser, HookRecord, Hooks, after_commit
from engine.core.key_changes import KeyCheck
from engine.core.merge_resolutions import Resolutions
from engine.core.model import REQUESTED_COMMITTER_KEY, MergeStrategy
from engine.core.refs import RefManager, RepoHandle
from engine.core.refs.manager import now
from engine.core.updater import BranchUpdater
from engine.features.protection import PROTECTED, BranchPolicy, Protection
from silt.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, PredicateFailed, ProtectedBranch
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Predicate
from silt.kv.conditional import replace
from silt.kv.store import scan_prefix
from silt.paging import page_size, take_page

PULLS = b"pulls/"
COMMENTS = b"pull_comments/"
MAX_TITLE_BYTES = 1024
MAX_DESCRIPTION_BYTES = 64 * 1024
MAX_COMMENT_BYTES = 64 * 1024
MAX_REVIEW_BYTES = 4 * 1024
MAX_REVIEWERS = 100  # bounds the record: 100 reviews of 4 KiB
MAX_ID_BYTES = 64
# A merge claim lasts until the merge's deadline (the merge itself stops there) plus a margin;
# a call without a deadline (gRPC reports one centuries away) holds it at most MAX_CLAIM_SECONDS.
MAX_CLAIM_SECONDS = 3600.0
CLAIM_MARGIN_SECONDS = 30.0
# A status filter may skip many records of other statuses: one call examines at most this
# many and then returns what it found with a cursor (a short, even empty, page that has more).
MAX_LIST_EXAMINED = 10_000
# Who committed between two commits never changes: remembered per (source head, destination head).
MAX_CACHED_RANGES = 1024

OPEN = pb.PULL_REQUEST_STATUS_OPEN
CLOSED = pb.PULL_REQUEST_STATUS_CLOSED
MERGED = pb.PULL_REQUEST_STATUS_MERGED
APPROVE = pb.REVIEW_VERDICT_APPROVE
REQUEST_CHANGES = pb.REVIEW_VERDICT_REQUEST_CHANGES


def new_id() -> str:
    return f"{time.time_ns():016x}{secrets.token_hex(4)}"


def _bounded(value: str, limit: int, what: str) -> str:
    size = len(value.encode())
    if size > limit:
        raise InvalidArgument(f"{what} is {size} bytes; at most {limit} are allowed")
    return value


def _check_id(pull_id: str) -> bytes:
    if not pull_id or len(pull_id.encode()) > MAX_ID_BYTES or "/" in pull_id:
        raise InvalidArgument(f"invalid pull request id {pull_id[:MAX_ID_BYTES]!r}")
    return pull_id.encode()


def _stamp_after(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(time.time_ns() + int(seconds * 1e9))
    return stamp


@dataclass(frozen=True)
class Standing:
    """Where a pull request stands against its destination's protection."""

    approvals: int
    required: int
    blocked_reason: str
    required_checks: tuple[str, ...] = ()


def standing(
    pull: pb.PullRequest, policy: BranchPolicy, head: str, committers: frozenset[str] = frozenset()
) -> Standing:
    """Counting only the reviews of head, the source branch's head commit ("" if it is gone), and
    only approvals by neither the author nor one of the committers of what the merge brings in."""
    current = [r for r in pull.reviews if head and r.commit_id == head]
    approving = [r.author for r in current if r.verdict == APPROVE and r.author != pull.author]
    approvers = [a for a in approving if a not in committers]
    self_approved = [a for a in approving if a in committers]
    objectors = [r.author for r in current if r.verdict == REQUEST_CHANGES]
    required = policy.required_approvals
    reason = ""
    if required > 0:
        where = f"{PROTECTED} {pull.destination_branch!r}"
        if objectors:
            reason = f"{where}: changes requested by {', '.join(objectors)}"
        elif len(approvers) < required:
            reason = (
                f"{where}: the pull request has {len(approvers)} of {required} required approval(s)"
                f" of the source's head commit {head[:16] or '(none)'}"
            )
            if self_approved:
                reason += f"; approvals by committers of the source's commits do not count ({', '.join(self_approved)})"
    if not reason and policy.required_checks:
        passed = {c.name for c in pull.checks if c.commit_id == head and head and c.status == pb.CHECK_STATUS_PASSED}
        missing = [name for name in policy.required_checks if name not in passed]
        if missing:
            reason = (
                f"{PROTECTED} {pull.destination_branch!r}: required check(s) {', '.join(repr(m) for m in missing)}"
                f" have not passed on the source's head commit {head[:16] or '(none)'}"
            )
    return Standing(len(approvers), required, reason, policy.required_checks)


def _committers_of(commit: pb.Commit) -> set[str]:
    names = {commit.committer}
    # An old commit the REST API made is its service user's and names the user in metadata; a
    # name there can only take an approval away, so it is counted whoever wrote it.
    legacy = commit.metadata.get(REQUESTED_COMMITTER_KEY)
    if legacy:
        names.add(legacy)
    return names


def _order(commit: pb.Commit) -> tuple[int, int, str]:
    # As history.find_merge_base walks: newest first, so a commit comes after all its descendants.
    return (-commit.generation, -commit.creation_date.ToNanoseconds(), commit.id)


_SOURCE, _DESTINATION = 1, 2


def committers_between(get_commit: GetCommit, source: str, destination: str, deadline: Deadline) -> frozenset[str]:
    """The committers of the commits reachable from source and not from destination: what a
    merge of source into destination brings in, since their merge base(s).

    One walk of both histories, newest first, as for the merge base: a commit's flags (reached
    from source, from destination) are final when it is taken, because every descendant has a
    higher generation and was taken before it. The walk stops once no commit reached from source
    alone is pending, so it reads what the merge's own merge-base walk reads, not the history.
    """
    flags = {source: _SOURCE}
    flags[destination] = flags.get(destination, 0) | _DESTINATION
    pending: dict[str, pb.Commit] = {}
    heap: list[tuple[tuple[int, int, str], str]] = []

    def push(commit_id: str) -> None:
        commit = pending[commit_id] = get_commit(commit_id)
        heapq.heappush(heap, (_order(commit), commit_id))

    for commit_id in flags:
        push(commit_id)
    source_only = sum(1 for flag in flags.values() if flag == _SOURCE)
    names: set[str] = set()
    taken = 0
    while source_only:
        _, commit_id = heapq.heappop(heap)
        commit = pending.pop(commit_id)
        flag = flags[commit_id]
        if flag == _SOURCE:
            source_only -= 1
            names |= _committers_of(commit)
        taken += 1
        if taken % 256 == 0:
            deadline.check("finding who committed to a pull request's source")
        for parent_id in commit.parents:
            before = flags.get(parent_id, 0)
            after = before | flag
            if after == before:
                continue
            flags[parent_id] = after
            if not before:
                push(parent_id)
                source_only += after == _SOURCE
            elif before == _SOURCE:  # still pending (older than this commit): now reached from both
                source_only -= 1
    return frozenset(names)


class PullRequests:
    def __init__(
        self, refs: RefManager, updater: BranchUpdater, branching: Branching, protection: Protection, hooks: Hooks
    ) -> None:
        self._refs = refs
        self._kv = refs.kv
        self._updater = updater
        self._branching = branching
        self._protection = protection
        self._ranges_lock = threading.Lock()
        self._ranges: OrderedDict[tuple[bytes, str, str], frozenset[str]] = OrderedDict()
        # Hooks around a pull request's merge (pre-merge may refuse it).
        self._hooks = hooks

    # --- records -------------------------------------------------------------------------

    def _read(self, repo: RepoHandle, pull_id: str) -> tuple[pb.PullRequest, Predicate]:
        key = PULLS + _check_id(pull_id)
        try:
            got = self._kv.get(repo.partition, key)
        except NotFound:
            raise NotFound(f"pull request {pull_id!r} not found in repository {repo.name!r}") from None
        pull = pb.PullRequest()
        pull.ParseFromString(got.value)
        return pull, got.predicate

    def get(self, repo: RepoHandle, pull_id: str) -> pb.PullRequest:
        return self._read(repo, pull_id)[0]

    def _head(self, repo: RepoHandle, branch: str) -> str:
        return str(self._refs.resolve(repo, branch).commit_id)

    def committers(
        self, repo: RepoHandle, source_head: str, destination_head: str, deadline: Deadline
    ) -> frozenset[str]:
        """Who committed what merging source_head into destination_head brings in."""
        key = (repo.partition, source_head, destination_head)
        with self._ranges_lock:
            known = self._ranges.get(key)
            if known is not None:
                self._ranges.move_to_end(key)
                return known
        found = committers_between(
            lambda cid: self._refs.get_commit(repo, cid), source_head, destination_head, deadline
        )
        with self._ranges_lock:
            self._ranges[key] = found
            while len(self._ranges) > MAX_CACHED_RANGES:
                self._ranges.popitem(last=False)
        return found

    def set_checks(
        self, repo: RepoHandle, pull_id: str, change: Callable[[pb.PullRequest], None], deadline: Deadline
    ) -> pb.PullRequest:
        """Change the checks of a pull request (engine/actions/checks.py)."""
        return self._change(repo, pull_id, change, "recording checks", deadline)

    def _standing(self, repo: RepoHandle, pull: pb.PullRequest, head: str, deadline: Deadline) -> Standing:
        policy = self._protection.policy(repo, pull.destination_branch)
        committers: frozenset[str] = frozenset()
        if policy.required_approvals > 0 and any(r.commit_id == head and r.verdict == APPROVE for r in pull.reviews):
            committers = self.committers(repo, head, self._head(repo, pull.destination_branch), deadline)
        return standing(pull, policy, head, committers)

    def standing(self, repo: RepoHandle, pull: pb.PullRequest, deadline: Deadline = NO_DEADLINE) -> Standing:
        try:
            head = self._head(repo, pull.source_branch)
        except NotFound:  # the source branch was deleted: no review is of anything that remains
            head = ""
        try:
            return self._standing(repo, pull, head, deadline)
        except NotFound:  # the destination was deleted: nothing can be merged into it
            return standing(pull, self._protection.policy(repo, pull.destination_branch), "")

    def _change(
        self,
        repo: RepoHandle,
        pull_id: str,
        change: Callable[[pb.PullRequest], None],
        what: str,
        deadline: Deadline,
    ) -> pb.PullRequest:
        """set_if change(copy of the record) over the record; re-read and redo on a race."""

        def attempt(_: int) -> pb.PullRequest:
            current, predicate = self._read(repo, pull_id)
            updated = pb.PullRequest()
            updated.CopyFrom(current)
            change(updated)
            self._kv.set_if(repo.partition, PULLS + pull_id.encode(), updated.SerializeToString(), predicate)
            return updated

        return self._updater.retry(attempt, f"{what} of pull request {pull_id!r}", deadline)

    # --- pull requests -------------------------------------------------------------------

    def create(
        self,
        repo: RepoHandle,
        title: str,
        description: str,
        source: str,
        destination: str,
        author: str,
        submitted_by: str = "",
    ) -> pb.PullRequest:
        if not title.strip():
            raise InvalidArgument("a pull request needs a title")
        _bounded(title, MAX_TITLE_BYTES, "title")
        _bounded(description, MAX_DESCRIPTION_BYTES, "description")
        if source == destination:
            raise InvalidArgument("a pull request's source and destination branches must differ")
        for name in (source, destination):
            self._refs.get_branch(repo, name)  # NotFound names the missing branch
        for _ in range(5):
            pull = pb.PullRequest(
                id=new_id(),
                status=OPEN,
                title=title,
                description=description,
                source_branch=source,
                destination_branch=destination,
                author=author,
                creation_date=now(),
                submitted_by=submitted_by or author,
            )
            try:
                self._kv.set_if(repo.partition, PULLS + pull.id.encode(), pull.SerializeToString(), None)
                return pull
            except PredicateFailed:  # two creations in one nanosecond with the same random part
                continue
        raise AlreadyExists("could not find a free pull request id; retry")

    def list_page(
        self,
        repo: RepoHandle,
        status: pb.PullRequestStatus.ValueType,
        after: str,
        amount: int,
        deadline: Deadline,
    ) -> tuple[list[pb.PullRequest], bool, str]:
        """Oldest first; status 0 lists every one. Returns (page, has_more, next_after): filtering
        reads past other statuses' records, at most MAX_LIST_EXAMINED of them per call."""
        wanted = page_size(amount)  # refuses a negative amount before any read
        start = PULLS + (_check_id(after) + b"\x00" if after else b"")
        return filtered_page(
            self._kv,
            repo.partition,
            PULLS,
            start,
            wanted,
            MAX_LIST_EXAMINED,
            deadline,
            "listing pull requests",
            pb.PullRequest.FromString,
            lambda pull: str(pull.id),
            lambda pull: not status or pull.status == status,
        )

    def update(
        self,
        repo: RepoHandle,
        pull_id: str,
        title: str | None,
        description: str | None,
        status: pb.PullRequestStatus.ValueType,
        deadline: Deadline,
    ) -> pb.PullRequest:
        if title is not None and not title.strip():
            raise InvalidArgument("a pull request needs a title")
        _bounded(title or "", MAX_TITLE_BYTES, "title")
        _bounded(description or "", MAX_DESCRIPTION_BYTES, "description")
        if status not in (0, OPEN, CLOSED):
            raise InvalidArgument("a pull request's status changes only to open or closed (merging: MergePullRequest)")

        def change(pull: pb.PullRequest) -> None:
            if title is not None:
                pull.title = title
            if description is not None:
                pull.description = description
            if status and status != pull.status:
                if pull.status == MERGED:
                    raise FailedPrecondition(f"pull request {pull_id!r} is merged; it cannot be reopened or closed")
                _refuse_while_claimed(pull)
                pull.status = status
                if status == CLOSED:
                    pull.closed_date.CopyFrom(now())
                else:  # reopened: reviewed afresh, whatever happened to the branches meanwhile
                    pull.ClearField("closed_date")
                    del pull.reviews[:]

        return self._change(repo, pull_id, change, "update", deadline)

    # --- reviews -------------------------------------------------------------------------

    def review(
        self,
        repo: RepoHandle,
        pull_id: str,
        author: str,
        verdict: pb.ReviewVerdict.ValueType,
        body: str,
        deadline: Deadline,
        submitted_by: str = "",
    ) -> pb.PullRequest:
        if verdict not in (APPROVE, REQUEST_CHANGES):
            raise InvalidArgument("a review's verdict is approve or request_changes")
        _bounded(body, MAX_REVIEW_BYTES, "review body")
        if not author:
            raise InvalidArgument("a review needs an author")

        def change(pull: pb.PullRequest) -> None:
            _require_open(pull)
            _refuse_while_claimed(pull)
            if author == pull.author:
                raise FailedPrecondition(f"{author!r} opened pull request {pull_id!r} and cannot review it")
            # Resolved on every attempt, inside the set_if: the review is of the head it saw.
            head = self._head(repo, pull.source_branch)
            review = pb.PullRequestReview(
                author=author,
                verdict=verdict,
                body=body,
                created=now(),
                commit_id=head,
                submitted_by=submitted_by or author,
            )
            for index, existing in enumerate(pull.reviews):
                if existing.author == author:
                    pull.reviews[index].CopyFrom(review)
                    return
            if len(pull.reviews) >= MAX_REVIEWERS:
                raise FailedPrecondition(f"pull request {pull_id!r} has {MAX_REVIEWERS} reviewers already")
            pull.reviews.append(review)

        return self._change(repo, pull_id, change, "review", deadline)

    # --- comments ------------------------------------------------------------------------

    def comment(
        self, repo: RepoHandle, pull_id: str, author: str, body: str, submitted_by: str = ""
    ) -> pb.PullRequestComment:
        if not body.strip():
            raise InvalidArgument("a comment needs a body")
        _bounded(body, MAX_COMMENT_BYTES, "comment body")
        self._read(repo, pull_id)  # the pull request exists (comments on closed and merged ones are fine)
        prefix = COMMENTS + pull_id.encode() + b"/"
        for _ in range(5):
            comment = pb.PullRequestComment(
                id=new_id(), author=author, body=body, created=now(), submitted_by=submitted_by or author
            )
            try:
                self._kv.set_if(repo.partition, prefix + comment.id.encode(), comment.SerializeToString(), None)
                return comment
            except PredicateFailed:
                continue
        raise AlreadyExists("could not find a free comment id; retry")

    def comments(
        self, repo: RepoHandle, pull_id: str, after: str, amount: int
    ) -> tuple[list[pb.PullRequestComment], bool]:
        page_size(amount)
        self._read(repo, pull_id)
        prefix = COMMENTS + pull_id.encode() + b"/"

        def walk() -> Iterator[pb.PullRequestComment]:
            start = prefix + (_check_id(after) + b"\x00" if after else b"")
            for entry in self._kv.scan(repo.partition, start):
                if not entry.key.startswith(prefix):
                    return
                comment = pb.PullRequestComment()
                comment.ParseFromString(entry.value)
                yield comment

        return take_page(walk(), amount)

    # --- merging -------------------------------------------------------------------------

    def merge(
        self,
        repo: RepoHandle,
        pull_id: str,
        strategy: MergeStrategy,
        message: str,
        metadata: dict[str, str],
        committer: str,
        deadline: Deadline,
        check: KeyCheck | None = None,
        by: EventUser | None = None,
        resolutions: Resolutions | None = None,
    ) -> tuple[pb.PullRequest, MergeOutcome]:
        """Merge source into destination through the merge path, once, if protection allows it
        (and check, the keys it changes: engine/core/key_changes.py)."""
        claim = secrets.token_hex(16)
        remaining = deadline.remaining()
        lease = min(MAX_CLAIM_SECONDS if remaining is None else remaining, MAX_CLAIM_SECONDS) + CLAIM_MARGIN_SECONDS

        heads: list[str] = []  # the source head the winning attempt decided on

        def take(pull: pb.PullRequest) -> None:
            _require_open(pull)
            _refuse_while_claimed(pull)
            head = self._head(repo, pull.source_branch)  # once per attempt: decide and merge on it
            reason = self._standing(repo, pull, head, deadline).blocked_reason
            if reason:
                destination = pull.destination_branch
                rules = self._protection.policy(repo, destination).patterns
                raise ProtectedBranch(reason, branch=destination, rules=rules)
            heads[:] = [head]
            pull.merge_claim = claim
            pull.merge_claim_expires.CopyFrom(_stamp_after(lease))

        claimed = self._change(repo, pull_id, take, "merge", deadline)
        message = message or f"Merge pull request {pull_id}: {claimed.title}"
        record = HookRecord.pre_merge(
            repo.name, heads[0], claimed.destination_branch, claimed.source_branch, message, committer, metadata, by
        )
        try:
            pre_run = self._hooks.pre(repo, record, deadline)
            # The commit id the reviews were counted for, never the branch: a push after the
            # claim is not merged unreviewed.
            outcome = self._branching.merge(
                repo,
                heads[0],
                claimed.destination_branch,
                strategy,
                [],
                False,
                False,
                message,
                metadata,
                committer,
                deadline,
                check,
                resolutions,
            )
        except BaseException:
            self._release(repo, pull_id, claim, deadline)
            raise
        if outcome.commit is None:  # conflicts: the pull request stays open
            return self._release(repo, pull_id, claim, deadline), outcome
        merged_id = outcome.commit.id
        after_commit(self._hooks, repo, record, pre_run, outcome.commit)

        def finish(pull: pb.PullRequest) -> None:
            if pull.status == MERGED:  # a takeover after this claim lapsed merged it too
                return
            pull.status = MERGED
            pull.merged_commit_id = merged_id
            pull.closed_date.CopyFrom(now())
            pull.ClearField("merge_claim")
            pull.ClearField("merge_claim_expires")

        return self._change(repo, pull_id, finish, "recording the merge", deadline), outcome

    def _release(self, repo: RepoHandle, pull_id: str, claim: str, deadline: Deadline) -> pb.PullRequest:
        def release(pull: pb.PullRequest) -> None:
            if pull.merge_claim == claim:
                pull.ClearField("merge_claim")
                pull.ClearField("merge_claim_expires")

        return self._change(repo, pull_id, release, "releasing the merge claim", deadline)

    # --- dump / restore ------------------------------------------------------------------

    def dump(self, repo: RepoHandle) -> Iterator[tuple[bytes, bytes]]:
        """Every pull request and comment record, as (key, value)."""
        for prefix in (PULLS, COMMENTS):
            for entry in scan_prefix(self._kv, repo.partition, prefix):
                yield entry.key, entry.value

    def restore(self, repo: RepoHandle, key: bytes, value: bytes) -> bool:
        """Write one dumped record; True for a pull request, False for a comment."""
        if key.startswith(PULLS):
            pull = pb.PullRequest()
            pull.ParseFromString(value)
            _check_id(pull.id)
            if key != PULLS + pull.id.encode():
                raise InvalidArgument("dump is corrupt: a pull request is stored under another id")
            pull.ClearField("merge_claim")  # a merge in flight at dump time did not finish here
            pull.ClearField("merge_claim_expires")
            # Compare-and-set, as every other write of these keys: never a plain write over them.
            replace(self._kv, repo.partition, key, pull.SerializeToString())
            return True
        if key.startswith(COMMENTS):
            comment = pb.PullRequestComment()
            comment.ParseFromString(value)
            replace(self._kv, repo.partition, key, comment.SerializeToString())
            return False
        raise InvalidArgument(f"dump is corrupt: unexpected pull request key {key[:64]!r}")


def _require_open(pull: pb.PullRequest) -> None:
    if pull.status == MERGED:
        raise FailedPrecondition(f"pull request {pull.id!r} is already merged")
    if pull.status != OPEN:
        raise FailedPrecondition(f"pull request {pull.id!r} is closed")


def _refuse_while_claimed(pull: pb.PullRequest) -> None:
    if pull.merge_claim and pull.merge_claim_expires.ToNanoseconds() > time.time_ns():
        raise FailedPrecondition(f"pull request {pull.id!r} is being merged")
