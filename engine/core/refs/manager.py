"""RefManager: repositories, branches, tags and commits on the KV store, and what a ref names.

Key schema (docs/design/kv.md):

* partition ``graveler``: ``repos/<name>`` -> Repository
* partition ``<name>-<unique id>``: ``branches/<name>``, ``commits/<id>``, ``tags/<id>``

Every repository-scoped access first reads the repository record: its existence is what
makes the repository exist, and its unique id names the partition, so a deleted and
recreated repository never sees the old one's leftovers.

Resolving a ref expression (engine/core/refs/expr.py) lives here too, next to the
records it reads: a branch name first, then a tag, then a commit id or unique prefix.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.committed.model import MetaRangeId
from engine.core.deadline import NO_DEADLINE, Clock, Deadline
from engine.core.drop_records import apply_recording
from engine.core.model import CommitId, RefKind, StagingToken
from engine.core.refs import expr as refexpr
from silt.errors import AlreadyExists, InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import note_repository_partition
from silt.kv import Predicate, Store
from silt.kv.conditional import delete_current
from silt.kv.store import scan_prefix

GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
BRANCHES = b"branches/"
COMMITS = b"commits/"
TAGS = b"tags/"
COMMIT_VERSION = 1


@dataclass(frozen=True)
class RepoHandle:
    """A repository record plus the partition that holds its refs."""

    record: pb.Repository

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def partition(self) -> bytes:
        return f"{self.record.name}-{self.record.unique_id}".encode()

    @property
    def namespace(self) -> str:
        return self.record.storage_namespace


@dataclass(frozen=True)
class BranchRecord:
    branch: pb.Branch
    predicate: Predicate

    @property
    def commit_id(self) -> CommitId:
        return CommitId(self.branch.commit_id)

    @property
    def sealed_tokens(self) -> list[StagingToken]:
        """Sealed staging tokens, newest first."""
        return [StagingToken(t) for t in self.branch.sealed_tokens]

    @property
    def tokens(self) -> list[StagingToken]:
        return branch_tokens(self.branch)


def branch_tokens(branch: pb.Branch) -> list[StagingToken]:
    """Every staging token of a branch, newest first: the one writers use, then the sealed ones."""
    return [StagingToken(branch.staging_token), *(StagingToken(t) for t in branch.sealed_tokens)]


@dataclass(frozen=True)
class Resolved:
    """What a ref expression names: a commit, and the branch whose staging is visible, if any."""

    kind: RefKind
    commit_id: CommitId
    branch: BranchRecord | None = None  # set only for a plain branch name


def set_tokens(branch: pb.Branch, staging_token: str, sealed_tokens: Sequence[str]) -> None:
    """Give a branch record a staging token and sealed tokens (newest first)."""
    branch.staging_token = staging_token
    del branch.sealed_tokens[:]
    branch.sealed_tokens.extend(sealed_tokens)


def now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


def new_commit(
    message: str,
    metadata: dict[str, str],
    committer: str,
    metarange_id: MetaRangeId,
    parents: list[CommitId],
    generation: int,
    creation_date: Timestamp | None = None,
) -> pb.Commit:
    """A commit record; its id is the hash of its content, the creation time keeping equal commits apart.
    creation_date: now, unless the commit is one recorded as made elsewhere earlier."""
    commit = pb.Commit(
        version=COMMIT_VERSION,
        committer=committer,
        message=message,
        metarange_id=metarange_id,
        creation_date=creation_date if creation_date is not None else now(),
        parents=parents,
        metadata=metadata,
        generation=generation,
    )
    commit.id = hashlib.sha256(commit.SerializeToString(deterministic=True)).hexdigest()
    return commit


_M = TypeVar("_M", pb.Repository, pb.Branch, pb.Tag, pb.Commit)


def _decode(message: _M, data: bytes, what: str) -> _M:
    try:
        message.ParseFromString(data)
    except DecodeError:
        raise InvalidArgument(f"corrupt {what} record") from None
    return message


class _BranchCache:
    """Branch records young enough for the writer and reader flows to start from (docs/design/lockfree-staging.md)."""

    def __init__(self, ttl: float, clock: Clock) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[tuple[bytes, str], tuple[float, BranchRecord]] = {}

    def get(self, partition: bytes, name: str) -> BranchRecord | None:
        with self._lock:
            hit = self._records.get((partition, name))
        if hit is None or self._clock() - hit[0] > self._ttl:
            return None
        return hit[1]

    def put(self, partition: bytes, name: str, record: BranchRecord) -> None:
        if self._ttl > 0:
            with self._lock:
                self._records[(partition, name)] = (self._clock(), record)


class RefManager:
    def __init__(self, kv: Store, branch_cache_seconds: float = 0.0, clock: Clock = time.monotonic) -> None:
        self.kv = kv
        self._branch_cache = _BranchCache(branch_cache_seconds, clock)

    # --- repositories --------------------------------------------------------------------

    def repository(self, name: str, deadline: Deadline = NO_DEADLINE) -> RepoHandle:
        """The repository a call names, while its caller still waits (an empty name is the caller's
        mistake, not a missing repository)."""
        deadline.check(f"call on repository {name!r}")
        if not name:
            raise InvalidArgument("repository name must not be empty")
        return self.get_repository(name)

    def create_repository(self, record: pb.Repository) -> RepoHandle:
        handle = RepoHandle(record)
        note_repository_partition(record.name, handle.partition)
        try:
            self.kv.set_if(GRAVELER_PARTITION, REPOS + record.name.encode(), record.SerializeToString(), None)
        except PredicateFailed:
            raise AlreadyExists(f"repository {record.name!r} already exists") from None
        return handle

    def get_repository(self, name: str) -> RepoHandle:
        try:
            data = self.kv.get(GRAVELER_PARTITION, REPOS + name.encode()).value
        except NotFound:
            raise NotFound(f"repository {name!r} not found", what="repository") from None
        handle = RepoHandle(_decode(pb.Repository(), data, "repository"))
        note_repository_partition(name, handle.partition)
        return handle

    def list_repositories(self, after: str = "") -> Iterator[pb.Repository]:
        start = REPOS + after.encode() + (b"\x00" if after else b"")
        for entry in self.kv.scan(GRAVELER_PARTITION, start):
            if not entry.key.startswith(REPOS):
                return
            yield _decode(pb.Repository(), entry.value, "repository")

    def delete_repository_record(self, name: str) -> None:
        # The record is written by compare-and-set (creation, metadata labels), so it is deleted
        # by one: a plain delete could lose to a labels update in flight and bring it back.
        delete_current(self.kv, GRAVELER_PARTITION, REPOS + name.encode())

    # --- branches ------------------------------------------------------------------------

    def get_branch(self, repo: RepoHandle, name: str) -> BranchRecord:
        try:
            got = self.kv.get(repo.partition, BRANCHES + name.encode())
        except NotFound:
            raise NotFound(f"branch {name!r} not found in repository {repo.name!r}", what="branch") from None
        return BranchRecord(_decode(pb.Branch(), got.value, "branch"), got.predicate)

    def fresh_branch(self, repo: RepoHandle, name: str) -> BranchRecord:
        """The branch record read from the KV store (and remembered for branch_for_io)."""
        record = self.get_branch(repo, name)
        self._branch_cache.put(repo.partition, name, record)
        return record

    def branch_for_io(self, repo: RepoHandle, name: str, use_cache: bool) -> BranchRecord:
        """A branch record to start a write from: a recently read one will do, the re-check reads fresh."""
        if use_cache:
            cached = self._branch_cache.get(repo.partition, name)
            if cached is not None:
                return cached
        return self.fresh_branch(repo, name)

    def create_branch(self, repo: RepoHandle, branch: pb.Branch) -> None:
        try:
            self.kv.set_if(repo.partition, BRANCHES + branch.name.encode(), branch.SerializeToString(), None)
        except PredicateFailed:
            raise AlreadyExists(f"branch {branch.name!r} already exists in repository {repo.name!r}") from None

    def set_branch_if(
        self, repo: RepoHandle, branch: pb.Branch, predicate: Predicate, dropping: Sequence[StagingToken] = ()
    ) -> None:
        """Replace the branch record only if it is still the one read (raises PredicateFailed);
        with the drop records of dropping (the tokens this update leaves unreachable) in the
        same batch, so that they exist exactly when the update applied (drop_records.py).

        Callers go through BranchUpdater, which owns the retry loop around this.
        """
        key = BRANCHES + branch.name.encode()
        if not dropping:
            self.kv.set_if(repo.partition, key, branch.SerializeToString(), predicate)
            return
        apply_recording(self.kv, repo.partition, [(key, branch.SerializeToString())], [], (key, predicate), dropping)

    def delete_branch(self, repo: RepoHandle, name: str) -> None:
        # Whatever the record is now, as a compare-and-set like every other write of it.
        delete_current(self.kv, repo.partition, BRANCHES + name.encode())

    def delete_branch_if(self, repo: RepoHandle, current: BranchRecord) -> None:
        """Delete the branch only if its record is still current (raises PredicateFailed), with
        the drop records of its tokens in the same batch (drop_records.py)."""
        key = BRANCHES + current.branch.name.encode()
        apply_recording(self.kv, repo.partition, [], [key], (key, current.predicate), current.tokens)

    def list_branches(self, repo: RepoHandle, after: str = "") -> Iterator[pb.Branch]:
        start = BRANCHES + after.encode() + (b"\x00" if after else b"")
        for entry in self.kv.scan(repo.partition, start):
            if not entry.key.startswith(BRANCHES):
                return
            yield _decode(pb.Branch(), entry.value, "branch")

    # --- tags ----------------------------------------------------------------------------

    def create_tag(self, repo: RepoHandle, tag: pb.Tag) -> None:
        try:
            self.kv.set_if(repo.partition, TAGS + tag.id.encode(), tag.SerializeToString(), None)
        except PredicateFailed:
            raise AlreadyExists(f"tag {tag.id!r} already exists in repository {repo.name!r}") from None

    def get_tag(self, repo: RepoHandle, tag_id: str) -> pb.Tag:
        try:
            data = self.kv.get(repo.partition, TAGS + tag_id.encode()).value
        except NotFound:
            raise NotFound(f"tag {tag_id!r} not found in repository {repo.name!r}", what="tag") from None
        return _decode(pb.Tag(), data, "tag")

    def delete_tag(self, repo: RepoHandle, tag_id: str) -> None:
        delete_current(self.kv, repo.partition, TAGS + tag_id.encode())

    def list_tags(self, repo: RepoHandle, after: str = "") -> Iterator[pb.Tag]:
        start = TAGS + after.encode() + (b"\x00" if after else b"")
        for entry in self.kv.scan(repo.partition, start):
            if not entry.key.startswith(TAGS):
                return
            yield _decode(pb.Tag(), entry.value, "tag")

    # --- commits -------------------------------------------------------------------------

    def put_commit(self, repo: RepoHandle, commit: pb.Commit) -> None:
        # Commits are content-addressed and immutable: rewriting one writes the same bytes.
        self.kv.set(repo.partition, COMMITS + commit.id.encode(), commit.SerializeToString())

    def get_commit(self, repo: RepoHandle, commit_id: str) -> pb.Commit:
        try:
            data = self.kv.get(repo.partition, COMMITS + commit_id.encode()).value
        except NotFound:
            raise NotFound(f"commit {commit_id!r} not found in repository {repo.name!r}", what="commit") from None
        return _decode(pb.Commit(), data, "commit")

    def list_commits(self, repo: RepoHandle) -> Iterator[pb.Commit]:
        """Every commit of the repository, reachable or not, in id order."""
        for entry in scan_prefix(self.kv, repo.partition, COMMITS):
            yield _decode(pb.Commit(), entry.value, "commit")

    def commits_with_prefix(self, repo: RepoHandle, prefix: str, limit: int = 2) -> list[CommitId]:
        found = []
        for entry in scan_prefix(self.kv, repo.partition, COMMITS + prefix.encode()):
            found.append(CommitId(entry.key[len(COMMITS) :].decode()))
            if len(found) >= limit:
                break
        return found

    def commit_by_prefix(self, repo: RepoHandle, prefix: str) -> CommitId:
        found = self.commits_with_prefix(repo, prefix)
        if not found:
            raise NotFound(f"ref {prefix!r} not found in repository {repo.name!r}", what="ref")
        if len(found) > 1:
            raise InvalidArgument(f"commit id prefix {prefix!r} is ambiguous in repository {repo.name!r}")
        return found[0]

    # --- ref expressions -----------------------------------------------------------------

    def resolve(self, repo: RepoHandle, ref: str) -> Resolved:
        expr = refexpr.parse(ref)
        kind, commit_id, branch = self._resolve_base(repo, expr.base)
        if expr.committed_only and kind != "branch":
            raise InvalidArgument(f"invalid ref {ref!r}: '@' applies to branches only")
        for op, count in expr.modifiers:
            commit_id = self._walk(repo, commit_id, op, count, ref)
        if expr.plain and branch is not None:
            return Resolved(kind, commit_id, branch)
        return Resolved(kind, commit_id)

    def resolve_cached(self, repo: RepoHandle, ref: str, use_cache: bool) -> Resolved:
        """resolve, but a plain branch name may come from a recently read record (the reader re-checks)."""
        if use_cache:
            cached = self._branch_cache.get(repo.partition, ref)
            if cached is not None:
                return Resolved("branch", cached.commit_id, cached)
        return self.resolve(repo, ref)

    def _resolve_base(self, repo: RepoHandle, base: str) -> tuple[RefKind, CommitId, BranchRecord | None]:
        try:
            branch = self.get_branch(repo, base)
            return "branch", branch.commit_id, branch
        except NotFound:
            pass
        try:
            return "tag", CommitId(self.get_tag(repo, base).commit_id), None
        except NotFound:
            pass
        if refexpr.looks_like_commit_prefix(base):
            return "commit", self.commit_by_prefix(repo, base), None
        raise NotFound(f"ref {base!r} not found in repository {repo.name!r}", what="ref")

    def _walk(self, repo: RepoHandle, commit_id: CommitId, op: str, count: int, ref: str) -> CommitId:
        if op == "^":
            parents = self.get_commit(repo, commit_id).parents
            if count > len(parents):
                raise NotFound(f"ref {ref!r}: commit {commit_id[:12]} has no parent number {count}", what="ref")
            return CommitId(parents[count - 1])
        for _ in range(count):
            parents = self.get_commit(repo, commit_id).parents
            if not parents:
                raise NotFound(f"ref {ref!r}: the history ends before {count} generations back", what="ref")
            commit_id = CommitId(parents[0])
        return commit_id
