"""Lifecycle: whole repositories — creation, deletion with a to-delete list, dump / restore of refs.

Key schema and the to-delete list: docs/design/kv.md.

Creating: the storage namespace must lie below an allowed root and overlap no other live
repository's (placement.py): checked against a listing of the repositories, then claimed in
KV and checked against the other claims (claims.py), which is what stops two racing
creations. Everything the repository needs (empty metarange, first commit, default branch)
is written into its fresh partition next; the repository record, written last, is what
makes it exist. A creation that fails after its claim removes it.

Deleting: the repository's partition is first recorded in the `graveler` partition under
`to_delete/<partition>`, then the repository record is deleted — from that moment nothing
can reach the repository's partitions — and only then are the partitions cleaned. A failure
at any step leaves nothing reachable, and a recreated repository of the same name gets a new
unique id, hence new partitions. The cleaner finishes whatever a failed deletion left.

Dumping writes every commit, branch and tag, and the repository metadata graveler keeps
beside them (pull requests with their comments and reviews, branch protection rules), to
`_silt/refs/<dump id>/` in the repository's storage namespace; restoring reads them into a
new, bare repository on the same storage (the original deleted, or kept by an administrator: placement.py).
Commit ids are content hashes, checked on restore, so the round trip preserves them.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, TypeVar

# Private helpers of protobuf (absent from its stubs): the length-delimited framing protobuf itself uses.
from google.protobuf.internal.decoder import _DecodeVarint32  # type: ignore[attr-defined]
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]
from google.protobuf.message import DecodeError, Message

from engine.core.claims import NamespaceClaims, record_claim_key
from engine.core.cleanup import Cleaner
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import MetaRangeId
from engine.core.drop_records import PENDING_PREFIX, token_of
from engine.core.placement import Placement, ShareCheck, nobody
from engine.core.refs import GRAVELER_PARTITION, RefManager, RepoHandle, branch_tokens, new_commit
from engine.core.refs.manager import COMMIT_VERSION, COMMITS, now
from engine.core.staging import new_token, purge
from engine.core.validation import validate_ref_name, validate_repository_name
from engine.features.history_events.retention import drop_history
from engine.features.leases import Lease
from engine.features.protection import Protection
from engine.features.pulls import PullRequests
from silt.errors import Aborted, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, SiltError
from silt.graveler.v1 import model_pb2 as pb
from silt.history_events.layout import HOURS_PREFIX
from silt.journal.context import background_context, note_repository_partition
from silt.journal.record import JOURNAL_PREFIX
from silt.journal.ship_deleted import drop_saved_tokens
from silt.journal.store import raw_store
from silt.kv.conditional import delete_current
from silt.multipart_uploads import abort_repository
from silt.namespaces import parse_recorded
from silt.repository_place import RepositoryPlace

log = logging.getLogger(__name__)

TO_DELETE = b"to_delete/"
# Each last-access run's start (last_access.py, which imports it from here: it depends on this
# module, not the reverse).
RUNS_PREFIX = b"last-access-runs/"
# The repository partition's keys written only by plain writes (journal rows: each written once,
# deleted by the shipper after its write time). Every other key there is written by
# compare-and-set, so the cleaner deletes it by one too (docs/design/kv.md, "Consistency on
# Cassandra: statements").
_PLAIN_FAMILIES = (COMMITS, HOURS_PREFIX, RUNS_PREFIX, JOURNAL_PREFIX)
DUMPS_PREFIX = "_silt/refs/"
# The restore lease's key in the repository's partition (restore_lease).
RESTORE_LEASE = b"refs_restore/lease"
# Multipart uploads a repository's deletion aborts before it answers (each one a few KV writes
# and a call to the object store); the cleaner aborts any others right after.
ABORTED_BEFORE_ANSWER = 16
DEFAULT_BRANCH = "main"


def _delimited(messages: Iterable[Message]) -> Iterator[bytes]:
    for message in messages:
        data = message.SerializeToString(deterministic=True)
        yield _VarintBytes(len(data)) + data


_M = TypeVar("_M", bound=Message)


def _read_delimited(data: bytes, kind: type[_M]) -> Iterator[_M]:
    pos = 0
    while pos < len(data):
        size, pos = _DecodeVarint32(data, pos)
        message = kind()
        message.ParseFromString(data[pos : pos + size])
        pos += size
        yield message


def _framed(chunks: Iterable[bytes]) -> bytes:
    return b"".join(_VarintBytes(len(chunk)) + chunk for chunk in chunks)


def _unframed(data: bytes) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):
        size, pos = _DecodeVarint32(data, pos)
        yield data[pos : pos + size]
        pos += size


class Dumped(NamedTuple):
    location: str
    commits: int
    branches: int
    tags: int
    pull_requests: int
    branch_protection: bool


class Restored(NamedTuple):
    commits: int
    branches: int
    tags: int
    pull_requests: int
    branch_protection: bool


def commit_id_of(commit: pb.Commit) -> str:
    """The content hash a commit's id must equal (the id field itself excluded)."""
    copy = pb.Commit()
    copy.CopyFrom(commit)
    copy.id = ""
    return hashlib.sha256(copy.SerializeToString(deterministic=True)).hexdigest()


class Lifecycle:
    def __init__(
        self,
        refs: RefManager,
        committed: CommittedManager,
        cleaner: Cleaner,
        placement: Placement,
        pulls: PullRequests,
        protection: Protection,
    ) -> None:
        self._refs = refs
        self._committed = committed
        self._cleaner = cleaner
        self.placement = placement
        self._pulls = pulls
        self._protection = protection
        self.claims = NamespaceClaims(refs)

    # --- creation -----------------------------------------------------------------------------

    def create_repository(
        self, name: str, storage_namespace: str, default_branch: str, bare: bool, may_share: ShareCheck = nobody
    ) -> pb.Repository:
        """Create a repository with an initial empty commit on its default branch (bare: neither).

        An empty storage_namespace is derived from the first allowed root (engine/core/placement.py).
        may_share answers whether the caller may put a bare repository on exactly the namespace
        of the named one (to restore its dump there).
        """
        validate_repository_name(name)
        default_branch = validate_ref_name(default_branch or DEFAULT_BRANCH)
        try:
            self._refs.get_repository(name)
            raise AlreadyExists(f"repository {name!r} already exists")
        except NotFound:
            pass
        listed = list(self._refs.list_repositories())
        others = [(r.name, parse_recorded(r.storage_namespace)) for r in listed]
        if storage_namespace:
            namespace = self.placement.requested(storage_namespace)
        else:
            namespace = self.placement.derived(name, [other for _, other in others])
        # Bare ones too: a bare repository is collected like any other, and a GC run on it
        # would sweep whatever its namespace holds. The listing finds repositories created
        # before claims existed; the claims find creations racing with this one.
        self.placement.check_new(namespace, others, bare, may_share)
        record = pb.Repository(
            name=name,
            storage_namespace=str(namespace),
            default_branch=default_branch,
            creation_date=now(),
            unique_id=uuid.uuid4().hex,
        )
        # Every record of this creation names the partition it is creating.
        note_repository_partition(name, RepoHandle(record).partition)
        claimed = time.monotonic()
        claim = self.claims.claim(namespace, record)
        try:
            checked = {r.unique_id for r in listed}  # live repositories the listing check passed
            claimants = [
                (c.record.name, c.namespace)
                for c in self.claims.overlapping(namespace, claim)
                if c.record.unique_id not in checked
            ]
            self.placement.check_new(namespace, claimants, bare, may_share)
            repo = RepoHandle(record)
            if not bare:
                empty = self._committed.write_metarange(repo.namespace, iter(()))
                first = new_commit("Repository created", {}, "", empty, [], 1)
                self._refs.put_commit(repo, first)
                token = new_token(repo.partition, default_branch)
                self._refs.create_branch(repo, pb.Branch(name=default_branch, commit_id=first.id, staging_token=token))
            if self.claims.too_late(claimed):
                raise Aborted(f"creating repository {name!r} took too long; retry")
            self._refs.create_repository(record)
        except BaseException:
            # Its partition's keys, if any, are unreachable garbage: no record names them.
            self.claims.release(claim)
            raise
        return record

    def check_collectable(self, repo: RepoHandle) -> None:
        """Refuse garbage collection of a repository whose namespace another live repository shares."""
        others = [r.storage_namespace for r in self._refs.list_repositories() if r.unique_id != repo.record.unique_id]
        self.placement.check_collectable(repo.namespace, others)

    # --- deletion -----------------------------------------------------------------------------

    def delete_repository(self, name: str) -> None:
        repo = self._refs.get_repository(name)
        self._refs.kv.set(GRAVELER_PARTITION, TO_DELETE + repo.partition, repo.record.SerializeToString())
        # The record goes next: from then on nothing can reach the partitions (docs/design/kv.md).
        self._refs.delete_repository_record(name)
        # Then its namespace claim (only its own: a restore next to it keeps its claim). If
        # this fails, the cleaner removes it with the partitions.
        self.claims.release(record_claim_key(repo.record))
        # Its open multipart uploads: a few before the answer, so that the deletion's answer
        # stays within its deadline however many there are; the cleaner aborts the rest (and
        # these, if this fails). None of them can complete meanwhile: their records name this
        # repository's identity (or, older, its namespace), which the gateway and graveler check.
        try:
            self._abort_uploads(repo, ABORTED_BEFORE_ANSWER)
        except Exception:
            log.warning("could not abort the multipart uploads of deleted repository %s", name, exc_info=True)
        self._cleaner.submit(self._clean_deleted, repo)

    def _abort_uploads(self, repo: RepoHandle, limit: int | None = None) -> int:
        # The gateway's records, in its own partition: never journaled, as the gateway writes them.
        deleted = RepositoryPlace(repo.record.storage_namespace, repo.record.unique_id)
        return abort_repository(raw_store(self._refs.kv), self._committed.adapter, repo.name, deleted, limit)

    def clean_deleted_repositories(self) -> int:
        """Finish every deletion recorded in the to-delete list; return how many were finished."""
        finished = 0
        for entry in list(self._refs.kv.scan(GRAVELER_PARTITION, TO_DELETE)):
            if not entry.key.startswith(TO_DELETE):
                break
            record = pb.Repository()
            record.ParseFromString(entry.value)
            try:
                if self._refs.get_repository(record.name).record.unique_id == record.unique_id:
                    # Its deletion wrote this entry and has not removed the record: it died
                    # there, or failed, or is still going. The repository stands, and so does
                    # everything in its partitions; a deletion made again finishes it.
                    continue
            except NotFound:
                pass
            except SiltError as exc:
                log.warning(
                    "repository %r: could not tell whether it still stands (%s); left for the next pass",
                    record.name,
                    exc,
                )
                continue
            if self._clean_deleted(RepoHandle(record)):
                finished += 1
        return finished

    def _clean_deleted(self, repo: RepoHandle) -> bool:
        try:
            # Journal rows go with the rest, unjournaled: the journaled deletion of the
            # repository record makes every record of its partitions moot (docs/design/journal.md).
            raw = raw_store(self._refs.kv)
            self._abort_uploads(repo, ABORTED_BEFORE_ANSWER)
            for branch in list(self._refs.list_branches(repo)):
                for token in branch_tokens(branch):
                    self._cleaner.drop_now(token)
                    # What the drop leaves (journal rows, a stale writer's guard or value).
                    purge(self._refs.kv, token.encode())
                # Each branch goes after its tokens, so a retry still finds the tokens to drop.
                self._refs.delete_branch(repo, branch.name)
            # History partitions are found through index keys in the repository partition: first.
            drop_history(raw, repo.partition)
            for key in [entry.key for entry in raw.scan(repo.partition)]:
                if key.startswith(PENDING_PREFIX):
                    # A drop recorded by a branch update and not done yet: done here, before
                    # its record goes with the rest (nothing else would find it afterwards).
                    token = token_of(key)
                    self._cleaner.drop_now(token)
                    purge(self._refs.kv, token.encode())
                if key.startswith(_PLAIN_FAMILIES):
                    raw.delete(repo.partition, key)
                else:
                    delete_current(raw, repo.partition, key)
            # The shipper's saved token list lies outside the partition: it goes with it.
            drop_saved_tokens(raw, repo.partition)
            with background_context("repository_cleanup", repo.name):
                delete_current(self._refs.kv, GRAVELER_PARTITION, record_claim_key(repo.record))
                self._refs.kv.delete(GRAVELER_PARTITION, TO_DELETE + repo.partition)
            return True
        except Exception:  # left on the to-delete list; the next cleaner run resumes it
            log.warning("could not finish deleting repository partition %s", repo.partition.decode(), exc_info=True)
            return False

    # --- dump / restore -----------------------------------------------------------------------

    def dump_refs(self, repo: RepoHandle) -> Dumped:
        # Branches and tags are read once: the commits dumped are exactly those they reach.
        branches = [pb.Branch(name=b.name, commit_id=b.commit_id) for b in self._refs.list_branches(repo)]
        tags = list(self._refs.list_tags(repo))
        commits = self._reachable_commits(repo, [b.commit_id for b in branches] + [t.commit_id for t in tags])
        location = f"{DUMPS_PREFIX}{uuid.uuid4().hex}/"
        adapter = self._committed.adapter
        for name, messages in (("commits", commits), ("branches", branches), ("tags", tags)):
            adapter.put(repo.namespace, location + name, io.BytesIO(b"".join(_delimited(messages))))
        # Pull requests and comments as (key, value) frames: comments are keyed by their pull request.
        records = list(self._pulls.dump(repo))
        pulls = sum(1 for key, _ in records if key.startswith(b"pulls/"))
        adapter.put(repo.namespace, location + "pulls", io.BytesIO(_framed(c for pair in records for c in pair)))
        protection, _ = self._protection.get(repo)
        adapter.put(repo.namespace, location + "branch_protection", io.BytesIO(protection.SerializeToString()))
        manifest = {
            "repository": repo.name,
            "default_branch": repo.record.default_branch,
            "commits": len(commits),
            "branches": len(branches),
            "tags": len(tags),
            "pull_requests": pulls,
            "branch_protection_rules": len(protection.rules),
        }
        adapter.put(repo.namespace, location + "manifest.json", io.BytesIO(json.dumps(manifest).encode()))
        return Dumped(location + "manifest.json", len(commits), len(branches), len(tags), pulls, bool(protection.rules))

    def _reachable_commits(self, repo: RepoHandle, heads: list[str]) -> list[pb.Commit]:
        seen: set[str] = set()
        found: list[pb.Commit] = []
        stack = list(heads)
        while stack:
            commit_id = stack.pop()
            if commit_id in seen:
                continue
            seen.add(commit_id)
            commit = self._refs.get_commit(repo, commit_id)
            found.append(commit)
            stack.extend(commit.parents)
        # Parents before children, so a restore never holds a commit whose parent is missing.
        return sorted(found, key=lambda c: (c.generation, c.id))

    def create_commit_record(self, repo: RepoHandle, commit: pb.Commit) -> None:
        """Store a commit record as given (lakeFS's CreateCommitRecord), only one that keeps the
        commit graph sound: its id is the hash of its content (Silt's ids are content hashes, so
        a record can only be stored under its own), its parents are in the repository with lower
        generations (log and merge-base walks rely on it), its metarange is in the namespace."""
        if commit.version not in (0, COMMIT_VERSION):
            raise InvalidArgument(f"commit version {commit.version} is not supported")
        if commit_id_of(commit) != commit.id:
            raise InvalidArgument(f"commit id: invalid value: {commit.id!r} is not the hash of the record's content")
        try:
            self._refs.get_commit(repo, commit.id)
        except NotFound:
            pass
        else:
            raise AlreadyExists(f"commit already exists: {commit.id}")
        parents = [self._refs.get_commit(repo, parent) for parent in commit.parents]
        if commit.generation <= max((p.generation for p in parents), default=0):
            raise InvalidArgument(
                f"generation {commit.generation} must be above every parent's (and at least 1 for a first commit)"
            )
        try:
            self._committed.ranges(repo.namespace, MetaRangeId(commit.metarange_id))
        except NotFound:
            raise NotFound(f"metarange {commit.metarange_id!r} not found in repository {repo.name!r}") from None
        self._refs.put_commit(repo, commit)

    def check_restorable(self, repo: RepoHandle, location: str) -> None:
        """InvalidArgument unless location names a dump's manifest; FailedPrecondition unless the
        repository is bare (no branch)."""
        if not location.startswith(DUMPS_PREFIX) or not location.endswith("/manifest.json") or ".." in location:
            raise InvalidArgument(f"invalid dump location {location!r}")
        if next(iter(self._refs.list_branches(repo)), None) is not None:
            raise FailedPrecondition(
                f"repository {repo.name!r} is not bare: restore needs a repository without branches"
            )

    def restore_lease(self, repo: RepoHandle) -> Lease:
        """The repository's restore lease (engine/features/leases.py): one restore into a
        repository at a time, whichever graveler runs it; AlreadyExists while another holds it."""
        return Lease.take(self._refs.kv, repo.partition, RESTORE_LEASE, f"a restore into repository {repo.name!r}")

    def restore_refs(self, repo: RepoHandle, location: str, lease: Lease | None = None) -> Restored:
        """Restore a dump into the bare repository, holding its restore lease: the one given
        (the caller releases it) or one taken here (AlreadyExists while another restore runs)."""
        if lease is not None:
            return self._restore_refs(repo, location, lease)
        with self.restore_lease(repo) as taken:
            return self._restore_refs(repo, location, taken)

    def _restore_refs(self, repo: RepoHandle, location: str, lease: Lease) -> Restored:
        """Every write checks the lease first (Aborted once lost): a restore paused past its
        term, whose repository another restore may have taken, stops rather than write along."""
        self.check_restorable(repo, location)
        folder = location[: -len("manifest.json")]
        adapter = self._committed.adapter

        def read(name: str) -> bytes:
            with adapter.get(repo.namespace, folder + name) as stream:
                return stream.read()

        try:
            json.loads(read("manifest.json"))
            commits = list(_read_delimited(read("commits"), pb.Commit))
            branches = list(_read_delimited(read("branches"), pb.Branch))
            tags = list(_read_delimited(read("tags"), pb.Tag))
        except NotFound:
            raise NotFound(f"no dump at {location!r} in {repo.namespace}", what="object") from None
        pulls_data, protection_data = self._read_optional(read, "pulls"), self._read_optional(read, "branch_protection")
        for commit in commits:
            if commit_id_of(commit) != commit.id:
                raise InvalidArgument(f"dump is corrupt: commit {commit.id[:12]} does not match its content")
            lease.check_held()
            self._refs.put_commit(repo, commit)
        for tag in tags:
            lease.check_held()
            self._refs.create_tag(repo, tag)
        for branch in branches:
            lease.check_held()
            name = branch.name
            self._refs.create_branch(
                repo,
                pb.Branch(name=name, commit_id=branch.commit_id, staging_token=new_token(repo.partition, name)),
            )
        chunks = list(_unframed(pulls_data))
        if len(chunks) % 2:
            raise InvalidArgument("dump is corrupt: the pull request records are truncated")
        protection = pb.BranchProtectionRules()
        try:
            pulls = 0
            for key, value in zip(chunks[::2], chunks[1::2], strict=True):
                lease.check_held()
                pulls += self._pulls.restore(repo, key, value)
            protection.ParseFromString(protection_data)
        except DecodeError:
            raise InvalidArgument("dump is corrupt: a pull request or protection record does not decode") from None
        if protection.rules:
            lease.check_held()
            self._protection.restore(repo, protection)
        return Restored(len(commits), len(branches), len(tags), pulls, bool(protection.rules))

    @staticmethod
    def _read_optional(read: Callable[[str], bytes], name: str) -> bytes:
        """A part of the dump that older dumps lack: empty when absent."""
        try:
            return read(name)
        except NotFound:
            return b""
