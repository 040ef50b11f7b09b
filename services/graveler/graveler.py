"""Graveler: the versioning engine, with lock-free writer, reader and committer flows.

The flows and why they need no lock: docs/design/lockfree-staging.md.

No lock anywhere. The branch record (commit id, staging token, sealed tokens) is one KV value
changed only with set_if:

* a **writer** writes into the staging token it read, re-reads the branch, and retries if
  the token changed meanwhile (a commit sealed it); rewriting the same entry is idempotent;
* a **reader** combines staging token, sealed tokens and the committed metarange (newest
  first, tombstones hiding older values) and retries if the branch changed while it read;
* a **committer** seals the staging token (set_if), builds a metarange from the sealed
  tokens over the base commit, stores it and the commit, then set_ifs the branch, trimming
  the sealed tokens it committed. When another commit won the race, it rebuilds on top of
  the winner from the tokens still sealed, so every acknowledged commit stays in history.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from services.graveler import refexpr
from services.graveler.addresses import validate_namespace, validate_physical_address
from services.graveler.branching import BranchingMixin
from services.graveler.builder import InProcessBuilder, MetaRangeBuilder
from services.graveler.committed.manager import CommittedManager
from services.graveler.history import LogFilter, ancestors
from services.graveler.iterators import combined, live
from services.graveler.lifecycle import LifecycleMixin
from services.graveler.paging import CommonPrefix, delimiter_bytes, page_amount, paginate
from services.graveler.refs import BranchRecord, RefStore, RepoHandle, set_tokens
from services.graveler.staging import StagingStore, new_token
from services.graveler.validation import (
    validate_entry_size,
    validate_key,
    validate_ref_name,
    validate_repository_name,
)
from services.graveler.values import TOMBSTONE, KeyValue, Value, decode_entry, entry_value
from silt.errors import Aborted, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from silt.kv.store import Predicate

log = logging.getLogger(__name__)
_T = TypeVar("_T")

COMMIT_VERSION = 1
DEFAULT_BRANCH = "main"


@dataclass
class GravelerOptions:
    # How often a flow re-runs after losing a race before it gives up with Aborted.
    max_retries: int = 50
    # The writer/reader flows may start from a cached branch record this young; the re-check
    # after the write or read always reads the KV store (docs/design/lockfree-staging.md).
    branch_cache_seconds: float = 0.05
    # Staged values of committed tokens are deleted in the background after the commit.
    cleanup_workers: int = 1
    # Absolute physical addresses outside a repository's namespace that entries may still name.
    allowed_import_prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resolved:
    """What a ref expression names: a commit, and the branch whose staging is visible, if any."""

    kind: str  # "branch", "tag" or "commit"
    commit_id: str
    branch: BranchRecord | None = None  # set only for a plain branch name


@dataclass
class ListPage:
    items: list[tuple[bytes, pb.Entry | None]] = field(default_factory=list)  # entry None = common prefix
    has_more: bool = False


class _BranchCache:
    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._records: dict[tuple[bytes, str], tuple[float, BranchRecord]] = {}

    def get(self, partition: bytes, name: str) -> BranchRecord | None:
        with self._lock:
            hit = self._records.get((partition, name))
        if hit is None or time.monotonic() - hit[0] > self._ttl:
            return None
        return hit[1]

    def put(self, partition: bytes, name: str, record: BranchRecord) -> None:
        if self._ttl > 0:
            with self._lock:
                self._records[(partition, name)] = (time.monotonic(), record)


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


class Graveler(BranchingMixin, LifecycleMixin):
    def __init__(
        self,
        kv: Store,
        committed: CommittedManager,
        options: GravelerOptions | None = None,
        builder: MetaRangeBuilder | None = None,
    ) -> None:
        self.options = options or GravelerOptions()
        self.refs = RefStore(kv)
        self.staging = StagingStore(kv)
        self.committed = committed
        self.builder = builder or InProcessBuilder(self.staging, committed)
        self._branch_cache = _BranchCache(self.options.branch_cache_seconds)
        self._cleanup = ThreadPoolExecutor(self.options.cleanup_workers, thread_name_prefix="graveler-cleanup")

    def close(self) -> None:
        self._cleanup.shutdown(wait=True)
        self.builder.close()

    # --- repositories --------------------------------------------------------------------

    def create_repository(
        self, name: str, storage_namespace: str, default_branch: str = "", bare: bool = False
    ) -> pb.Repository:
        """Create a repository with an initial empty commit on its default branch (bare: neither)."""
        validate_repository_name(name)
        default_branch = validate_ref_name(default_branch or DEFAULT_BRANCH)
        if not storage_namespace:
            raise InvalidArgument("storage namespace must not be empty")
        try:
            self.refs.get_repository(name)
            raise AlreadyExists(f"repository {name!r} already exists")
        except NotFound:
            pass
        # A bare repository is the target of RestoreRefs, which reads a dump in the namespace
        # it was taken from: only those may share a namespace.
        others = [] if bare else [(r.name, r.storage_namespace) for r in self.refs.list_repositories()]
        validate_namespace(storage_namespace, others)
        record = pb.Repository(
            name=name,
            storage_namespace=storage_namespace,
            default_branch=default_branch,
            creation_date=_now(),
            unique_id=uuid.uuid4().hex,
        )
        repo = RepoHandle(record)
        # Everything the repository needs is written into its fresh partition first; the
        # repository record, written last, is what makes it exist.
        if not bare:
            empty = self.committed.write_metarange(repo.namespace, iter(()))
            first = self._make_commit(repo, "Repository created", {}, "", empty, [], 1)
            self.refs.put_commit(repo, first)
            token = new_token(repo.partition, default_branch)
            self.refs.create_branch(repo, pb.Branch(name=default_branch, commit_id=first.id, staging_token=token))
        self.refs.create_repository(record)
        return record

    def get_repository(self, name: str) -> pb.Repository:
        return self.refs.get_repository(name).record

    def list_repositories(self, after: str, amount: int) -> tuple[list[pb.Repository], bool]:
        return _page(self.refs.list_repositories(after), amount)

    def _repo(self, name: str) -> RepoHandle:
        if not name:
            raise InvalidArgument("repository name must not be empty")
        return self.refs.get_repository(name)

    # --- branches ------------------------------------------------------------------------

    def create_branch(self, repository: str, name: str, source_ref: str) -> pb.Branch:
        repo = self._repo(repository)
        validate_ref_name(name)
        source = self._resolve(repo, source_ref or repo.record.default_branch)
        branch = pb.Branch(name=name, commit_id=source.commit_id, staging_token=new_token(repo.partition, name))
        self.refs.create_branch(repo, branch)
        return branch

    def get_branch(self, repository: str, name: str) -> pb.Branch:
        return self.refs.get_branch(self._repo(repository), name).branch

    def list_branches(self, repository: str, after: str, amount: int) -> tuple[list[pb.Branch], bool]:
        return _page(self.refs.list_branches(self._repo(repository), after), amount)

    def delete_branch(self, repository: str, name: str) -> None:
        repo = self._repo(repository)
        if name == repo.record.default_branch:
            raise FailedPrecondition(f"branch {name!r} is the default branch of {repository!r} and cannot be deleted")
        record = self.refs.get_branch(repo, name).branch
        self.refs.delete_branch(repo, name)
        for token in [record.staging_token, *record.sealed_tokens]:
            self._cleanup.submit(self._drop_token, token)

    # --- tags ----------------------------------------------------------------------------

    def create_tag(self, repository: str, tag_id: str, ref: str) -> pb.Tag:
        repo = self._repo(repository)
        validate_ref_name(tag_id, "tag")
        tag = pb.Tag(id=tag_id, commit_id=self._resolve(repo, ref).commit_id)
        self.refs.create_tag(repo, tag)
        return tag

    def get_tag(self, repository: str, tag_id: str) -> pb.Tag:
        return self.refs.get_tag(self._repo(repository), tag_id)

    def list_tags(self, repository: str, after: str, amount: int) -> tuple[list[pb.Tag], bool]:
        return _page(self.refs.list_tags(self._repo(repository), after), amount)

    def delete_tag(self, repository: str, tag_id: str) -> None:
        repo = self._repo(repository)
        self.refs.get_tag(repo, tag_id)
        self.refs.delete_tag(repo, tag_id)

    # --- refs ----------------------------------------------------------------------------

    def resolve_ref(self, repository: str, ref: str) -> Resolved:
        return self._resolve(self._repo(repository), ref)

    def _resolve(self, repo: RepoHandle, ref: str) -> Resolved:
        expr = refexpr.parse(ref)
        kind, commit_id, branch = self._resolve_base(repo, expr.base)
        if expr.committed_only and kind != "branch":
            raise InvalidArgument(f"invalid ref {ref!r}: '@' applies to branches only")
        for op, count in expr.modifiers:
            commit_id = self._walk(repo, commit_id, op, count, ref)
        if expr.plain and branch is not None:
            return Resolved(kind, commit_id, branch)
        return Resolved(kind, commit_id)

    def _resolve_base(self, repo: RepoHandle, base: str) -> tuple[str, str, BranchRecord | None]:
        try:
            branch = self.refs.get_branch(repo, base)
            return "branch", branch.branch.commit_id, branch
        except NotFound:
            pass
        try:
            return "tag", self.refs.get_tag(repo, base).commit_id, None
        except NotFound:
            pass
        if refexpr.looks_like_commit_prefix(base):
            return "commit", self._commit_by_prefix(repo, base), None
        raise NotFound(f"ref {base!r} not found in repository {repo.name!r}")

    def _commit_by_prefix(self, repo: RepoHandle, prefix: str) -> str:
        found = self.refs.commits_with_prefix(repo, prefix)
        if not found:
            raise NotFound(f"ref {prefix!r} not found in repository {repo.name!r}")
        if len(found) > 1:
            raise InvalidArgument(f"commit id prefix {prefix!r} is ambiguous in repository {repo.name!r}")
        return found[0]

    def _walk(self, repo: RepoHandle, commit_id: str, op: str, count: int, ref: str) -> str:
        if op == "^":
            parents = self.refs.get_commit(repo, commit_id).parents
            if count > len(parents):
                raise NotFound(f"ref {ref!r}: commit {commit_id[:12]} has no parent number {count}")
            return parents[count - 1]
        for _ in range(count):
            parents = self.refs.get_commit(repo, commit_id).parents
            if not parents:
                raise NotFound(f"ref {ref!r}: the history ends before {count} generations back")
            commit_id = parents[0]
        return commit_id

    # --- commits -------------------------------------------------------------------------

    def get_commit(self, repository: str, commit_id: str) -> pb.Commit:
        repo = self._repo(repository)
        if not refexpr.looks_like_commit_prefix(commit_id):
            raise InvalidArgument(f"invalid commit id {commit_id!r}")
        return self.refs.get_commit(repo, self._commit_by_prefix(repo, commit_id))

    def log(
        self,
        repository: str,
        ref: str,
        after: str = "",
        amount: int = 0,
        objects: list[str] | None = None,
        prefixes: list[str] | None = None,
        first_parent: bool = False,
        limit: int = 0,
        since_nanos: int = 0,
        stop_at: str = "",
    ) -> tuple[list[pb.Commit], bool]:
        repo = self._repo(repository)
        head = self._resolve(repo, ref).commit_id
        filters = LogFilter(first_parent=first_parent, since_nanos=since_nanos)
        if stop_at:
            filters.stop_at = self._resolve(repo, stop_at).commit_id
        if objects or prefixes:
            keys = [validate_key(k) for k in objects or []]
            under = [p.encode() for p in prefixes or []]
            filters.touches = lambda commit: self._touches(repo, commit, keys, under)
        commits: Iterator[pb.Commit] = ancestors(lambda cid: self.refs.get_commit(repo, cid), head, filters)
        if limit:
            commits = itertools.islice(commits, limit)
        if after:
            commits = itertools.dropwhile(lambda c: c.id != after, commits)
            next(commits, None)
        return _page(commits, amount)

    def _touches(self, repo: RepoHandle, commit: pb.Commit, keys: list[bytes], prefixes: list[bytes]) -> bool:
        """Whether commit changed any of keys or anything under prefixes, against its first parent."""
        if commit.parents:
            parent_metarange = self.refs.get_commit(repo, commit.parents[0]).metarange_id
        else:
            parent_metarange = self.committed.write_metarange(repo.namespace, iter(()))
        return self.committed.changed_paths(repo.namespace, parent_metarange, commit.metarange_id, keys, prefixes)

    def _make_commit(
        self,
        repo: RepoHandle,
        message: str,
        metadata: dict[str, str],
        committer: str,
        metarange_id: str,
        parents: list[str],
        generation: int,
    ) -> pb.Commit:
        commit = pb.Commit(
            version=COMMIT_VERSION,
            committer=committer,
            message=message,
            metarange_id=metarange_id,
            creation_date=_now(),
            parents=parents,
            metadata=metadata,
            generation=generation,
        )
        # The id is the hash of the content; the creation time in it keeps equal commits apart.
        commit.id = hashlib.sha256(commit.SerializeToString(deterministic=True)).hexdigest()
        return commit

    def commit(
        self,
        repository: str,
        branch_name: str,
        message: str,
        metadata: dict[str, str] | None = None,
        committer: str = "",
        allow_empty: bool = False,
        prefixes: list[str] | None = None,
    ) -> pb.Commit:
        """Commit the staged changes of a branch (only those under prefixes, if given)."""
        repo = self._repo(repository)
        if not message:
            raise InvalidArgument("commit message must not be empty")
        metadata = dict(metadata or {})
        only = [p.encode() for p in prefixes or []] or None
        if only is not None and not all(only):
            raise InvalidArgument("commit prefixes must not be empty")
        # 1. Seal the staging token: from now on writers go to a fresh token.
        sealed = self._seal(repo, branch_name)
        to_commit = list(sealed.branch.sealed_tokens)  # newest first
        base = self.refs.get_commit(repo, sealed.branch.commit_id)
        # 2. Build the new metarange and commit from the sealed tokens over the base.
        result = self.builder.apply_tokens(repo.namespace, base.metarange_id, to_commit, only)
        if not result.changed and not allow_empty:
            if only is None:
                self._unseal(repo, branch_name, to_commit)
            raise FailedPrecondition(f"nothing to commit on branch {branch_name!r}")
        commit = self._make_commit(
            repo, message, metadata, committer, result.metarange_id, [base.id], base.generation + 1
        )
        self.refs.put_commit(repo, commit)
        # 3. Move the branch, trimming the committed tokens; rebuild on a winner's commit.
        for _ in range(self.options.max_retries):
            current = self.refs.get_branch(repo, branch_name)
            still_sealed = [t for t in current.branch.sealed_tokens if t in to_commit]
            if current.branch.commit_id != commit.parents[0]:
                # Another commit won: it holds the tokens it trimmed. Rebuild on top of it
                # from those of ours still sealed (none left: ours becomes an empty commit).
                winner = self.refs.get_commit(repo, current.branch.commit_id)
                result = self.builder.apply_tokens(repo.namespace, winner.metarange_id, still_sealed, only)
                commit = self._make_commit(
                    repo, message, metadata, committer, result.metarange_id, [winner.id], winner.generation + 1
                )
                self.refs.put_commit(repo, commit)
                to_commit = still_sealed
            updated = pb.Branch()
            updated.CopyFrom(current.branch)
            updated.commit_id = commit.id
            if only is None:
                # A partial commit keeps its tokens sealed: they still hold the changes it left out.
                del updated.sealed_tokens[:]
                updated.sealed_tokens.extend(t for t in current.branch.sealed_tokens if t not in to_commit)
            try:
                self.refs.set_branch_if(repo, updated, current.predicate)
            except PredicateFailed:
                continue
            if only is None:
                for token in to_commit:
                    self._cleanup.submit(self._drop_token, token)
            else:
                self._cleanup.submit(self._drop_committed_part, repo, branch_name, to_commit, only)
            return commit
        raise Aborted(f"commit on branch {branch_name!r} lost the race {self.options.max_retries} times; retry")

    def _drop_committed_part(
        self, repo: RepoHandle, branch_name: str, tokens: list[str], prefixes: list[bytes]
    ) -> None:
        """After a partial commit: drop what it committed from the sealed tokens, unseal emptied ones.

        Safe at any time: a dropped value equals the committed one (or a newer token hides it).
        """
        try:
            emptied = []
            for token in tokens:
                for prefix in prefixes:
                    for key in list(self._staged_under(token, prefix)):
                        self.staging.drop_key(token, key)
                if self.staging.is_empty(token):
                    emptied.append(token)
            if emptied:
                self._unseal(repo, branch_name, emptied)
        except Exception:  # best effort: the values left behind are harmless duplicates
            log.warning("could not tidy sealed tokens of %s after a partial commit", branch_name, exc_info=True)

    def _update_branch(
        self, repo: RepoHandle, name: str, change: Callable[[pb.Branch], None], what: str
    ) -> tuple[BranchRecord, pb.Branch]:
        """Apply change to a fresh copy of the branch record and set_if it; re-read and redo on a race.

        Returns the record it replaced and the new branch.
        """
        for _ in range(self.options.max_retries):
            current = self.refs.get_branch(repo, name)
            updated = pb.Branch()
            updated.CopyFrom(current.branch)
            change(updated)
            try:
                self.refs.set_branch_if(repo, updated, current.predicate)
            except PredicateFailed:
                continue
            return current, updated
        raise Aborted(f"{what} of branch {name!r} raced with other changes {self.options.max_retries} times; retry")

    def _seal(self, repo: RepoHandle, branch_name: str) -> BranchRecord:
        def seal(branch: pb.Branch) -> None:
            set_tokens(branch, new_token(repo.partition, branch_name), [branch.staging_token, *branch.sealed_tokens])

        current, updated = self._update_branch(repo, branch_name, seal, "sealing")
        return BranchRecord(updated, current.predicate)

    def _unseal(self, repo: RepoHandle, branch_name: str, tokens: list[str]) -> None:
        """Drop sealed tokens that hold nothing left to commit."""

        def unseal(branch: pb.Branch) -> None:
            set_tokens(branch, branch.staging_token, [t for t in branch.sealed_tokens if t not in tokens])

        self._update_branch(repo, branch_name, unseal, "unsealing")
        for token in tokens:
            self._cleanup.submit(self._drop_token, token)

    def _drop_token(self, token: str) -> None:
        try:
            self.builder.drop_token(token)
        except Exception:  # best effort: leftovers are unreachable and collected later
            log.warning("could not clean staging token %s", token, exc_info=True)

    # --- entries: writer flow ------------------------------------------------------------

    def stage_entry(
        self, repository: str, branch_name: str, key: str, entry: pb.Entry, condition: Condition | None = None
    ) -> None:
        repo = self._repo(repository)
        encoded = validate_key(key)
        validate_entry_size(entry.ByteSize())
        validate_physical_address(entry.physical_address, repo.namespace, self.options.allowed_import_prefixes)
        if condition is None:
            self._write(repo, branch_name, encoded, entry_value(entry))
        else:
            self._write_if(repo, branch_name, encoded, entry_value(entry), condition)

    def delete_entry(self, repository: str, branch_name: str, key: str) -> None:
        encoded = validate_key(key)
        repo = self._repo(repository)
        if self._get(repo, branch_name, encoded) is None:
            raise NotFound(f"key {key!r} not found on branch {branch_name!r}")
        self._write(repo, branch_name, encoded, TOMBSTONE)

    def _write(self, repo: RepoHandle, branch_name: str, key: bytes, value: Value) -> None:
        use_cache = True
        for _ in range(self.options.max_retries):
            branch = self._branch_for_io(repo, branch_name, use_cache)
            self.staging.set(branch.branch.staging_token, key, value)
            # Re-read (never from the cache): if a commit sealed the token meanwhile, the
            # write may have missed it; writing again is idempotent.
            after = self._fresh_branch(repo, branch_name)
            if after.branch.staging_token == branch.branch.staging_token:
                return
            use_cache = False
        raise Aborted(f"write to branch {branch_name!r} raced with commits {self.options.max_retries} times; retry")

    def _write_if(self, repo: RepoHandle, branch_name: str, key: bytes, value: Value, condition: Condition) -> None:
        """Stage value only if condition holds for the key's current value, exactly.

        The current value is read from a consistent view of the branch (staging, sealed
        tokens, commit); the write is a set_if against the staged value that was read, so a
        concurrent writer in between makes it fail, and the condition is checked again against
        what that writer staged. Once the set_if succeeded the write is never reported as
        refused. If a commit sealed the token meanwhile (the commit may have missed
        the write), the value is staged again in the new token if it is still the current
        value; if another writer's value is, the outcome is a conflict (Aborted), never a
        refusal: ours may already be in a commit.
        """
        written: str | None = None  # the staging token our value went into
        for _ in range(self.options.max_retries):
            if written is None:
                token, current, predicate = self._read(
                    repo, branch_name, lambda resolved: self._current_for_write(repo, resolved, key)
                )
                condition.check(current, key)
                try:
                    self.staging.set_if(token, key, value, predicate)
                except PredicateFailed:
                    continue  # another writer staged this key meanwhile: check against its value
                written = token
            else:
                # A commit sealed the token we wrote to: a writer that read the branch after
                # the seal may not have seen our value. If ours is still the current value,
                # nobody wrote after it: stage it again in the new token. Otherwise the order
                # of the two writes cannot be told, and ours may already be in a commit: it is
                # neither acknowledged nor refused (S3's 409 ConditionalRequestConflict).
                token, current, predicate = self._read(
                    repo, branch_name, lambda resolved: self._current_for_write(repo, resolved, key)
                )
                if current != value:
                    raise Aborted(f"conditional write of {key!r} conflicted with a concurrent write; retry")
                try:
                    self.staging.set_if(token, key, value, predicate)
                except PredicateFailed:
                    continue
                written = token
            if self._fresh_branch(repo, branch_name).branch.staging_token == written:
                return
        raise Aborted(f"conditional write to branch {branch_name!r} raced {self.options.max_retries} times; retry")

    def _current_for_write(
        self, repo: RepoHandle, resolved: Resolved, key: bytes
    ) -> tuple[str, Value | None, Predicate | None]:
        """(staging token, current value of key or None, the set_if predicate of its staged value)."""
        if resolved.branch is None or not resolved.branch.branch.staging_token:
            raise FailedPrecondition("conditional writes go to branches only")
        token = resolved.branch.branch.staging_token
        staged, predicate = self.staging.get_with_predicate(token, key)
        if staged is not None:
            return token, (None if staged.tombstone else staged), predicate
        for sealed in resolved.branch.branch.sealed_tokens:
            value = self.staging.get(sealed, key)
            if value is not None:
                return token, (None if value.tombstone else value), None
        commit = self.refs.get_commit(repo, resolved.commit_id)
        record = self.committed.get(repo.namespace, commit.metarange_id, key)
        return token, (None if record is None else Value(record.identity, record.value)), None

    def _branch_for_io(self, repo: RepoHandle, name: str, use_cache: bool) -> BranchRecord:
        if use_cache:
            cached = self._branch_cache.get(repo.partition, name)
            if cached is not None:
                return cached
        return self._fresh_branch(repo, name)

    def _fresh_branch(self, repo: RepoHandle, name: str) -> BranchRecord:
        record = self.refs.get_branch(repo, name)
        self._branch_cache.put(repo.partition, name, record)
        return record

    # --- entries: reader flow ------------------------------------------------------------

    def stat_entry(self, repository: str, ref: str, key: str) -> pb.Entry:
        encoded = validate_key(key)
        repo = self._repo(repository)
        value = self._read(repo, ref, lambda resolved: self._get_resolved(repo, resolved, encoded))
        if value is None:
            raise NotFound(f"key {key!r} not found in {ref!r}")
        return decode_entry(value.data)

    def _get(self, repo: RepoHandle, branch_name: str, key: bytes) -> Value | None:
        return self._read(repo, branch_name, lambda resolved: self._get_resolved(repo, resolved, key))

    def _get_resolved(self, repo: RepoHandle, resolved: Resolved, key: bytes) -> Value | None:
        if resolved.branch is not None:
            branch = resolved.branch.branch
            for token in [branch.staging_token, *branch.sealed_tokens]:
                value = self.staging.get(token, key)
                if value is not None:
                    return None if value.tombstone else value
        commit = self.refs.get_commit(repo, resolved.commit_id)
        record = self.committed.get(repo.namespace, commit.metarange_id, key)
        return None if record is None else Value(record.identity, record.value)

    def list_entries(self, repository: str, ref: str, prefix: str, delimiter: str, after: str, amount: int) -> ListPage:
        separator, size = delimiter_bytes(delimiter), page_amount(amount)
        repo = self._repo(repository)
        return self._read(
            repo,
            ref,
            lambda resolved: self._list(repo, resolved, prefix.encode(), separator, after.encode(), size),
        )

    def _list(
        self, repo: RepoHandle, resolved: Resolved, prefix: bytes, delimiter: bytes, after: bytes, amount: int
    ) -> ListPage:
        page = paginate(
            lambda start: self._iterate(repo, resolved, start),
            _key_of,
            prefix,
            delimiter,
            after,
            amount,
            size_of=_size_of,
        )
        items: list[tuple[bytes, pb.Entry | None]] = [
            (item.key, None) if isinstance(item, CommonPrefix) else (item.key, decode_entry(item.value.data))
            for item in page.items
        ]
        return ListPage(items, page.has_more)

    def _iterate(self, repo: RepoHandle, resolved: Resolved, start: bytes) -> Iterator[KeyValue]:
        sources: list[Iterator[KeyValue]] = []
        if resolved.branch is not None:
            branch = resolved.branch.branch
            sources.extend(self.staging.scan(token, start) for token in [branch.staging_token, *branch.sealed_tokens])
        commit = self.refs.get_commit(repo, resolved.commit_id)
        sources.append(
            KeyValue(r.key, Value(r.identity, r.value))
            for r in self.committed.iterate(repo.namespace, commit.metarange_id, start)
        )
        return live(combined(sources))

    def _read(self, repo: RepoHandle, ref: str, body: Callable[[Resolved], _T]) -> _T:
        """Run body on a consistent view of ref: retry while a branch changes under it."""
        use_cache = True
        for _ in range(self.options.max_retries):
            resolved = self._resolve_cached(repo, ref, use_cache)
            result = body(resolved)
            if resolved.branch is None:
                return result  # tags and commits are immutable
            if self._fresh_branch(repo, resolved.branch.branch.name).predicate == resolved.branch.predicate:
                return result
            use_cache = False
        raise Aborted(f"read of {ref!r} raced with commits {self.options.max_retries} times; retry")

    def _resolve_cached(self, repo: RepoHandle, ref: str, use_cache: bool) -> Resolved:
        if use_cache:
            cached = self._branch_cache.get(repo.partition, ref)
            if cached is not None:
                return Resolved("branch", cached.branch.commit_id, cached)
        return self._resolve(repo, ref)


@dataclass(frozen=True)
class Condition:
    """What a conditional write requires of the key's current value."""

    if_absent: bool = False
    if_match_etag: str = ""  # the current entry's ETag, without quotes; "*": any existing entry

    def check(self, current: Value | None, key: bytes) -> None:
        if self.if_absent and current is not None:
            raise PredicateFailed(f"key {key.decode(errors='replace')!r} exists")
        if self.if_match_etag:
            if current is None:
                raise NotFound(f"key {key.decode(errors='replace')!r} not found")
            wanted = self.if_match_etag.strip('"')
            if wanted != "*" and decode_entry(current.data).etag.strip('"') != wanted:
                raise PredicateFailed(f"key {key.decode(errors='replace')!r} has another ETag")


def _key_of(kv: KeyValue) -> bytes:
    return kv.key


def _size_of(kv: KeyValue) -> int:
    return len(kv.key) + len(kv.value.data)


def _page(items: Iterator[_T], amount: int) -> tuple[list[_T], bool]:
    amount = min(amount or 100, 1000)
    page: list[_T] = []
    for item in items:
        if len(page) == amount:
            return page, True
        page.append(item)
    return page, False
