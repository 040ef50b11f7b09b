"""Repositories, branches, tags and commits on the KV store (key schema: docs/design/kv.md).

* partition ``graveler``: ``repos/<name>`` -> Repository
* partition ``<name>-<unique id>``: ``branches/<name>``, ``commits/<id>``, ``tags/<id>``

Every repository-scoped access first reads the repository record: its existence is what
makes the repository exist, and its unique id names the partition, so a deleted and
recreated repository never sees the old one's leftovers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError

from silt.errors import AlreadyExists, InvalidArgument, NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Predicate, Store
from silt.kv.store import scan_prefix

GRAVELER_PARTITION = b"graveler"
REPOS = b"repos/"
BRANCHES = b"branches/"
COMMITS = b"commits/"
TAGS = b"tags/"


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


def set_tokens(branch: pb.Branch, staging_token: str, sealed_tokens: list[str]) -> None:
    """Give a branch record a staging token and sealed tokens (newest first)."""
    branch.staging_token = staging_token
    del branch.sealed_tokens[:]
    branch.sealed_tokens.extend(sealed_tokens)


_M = TypeVar("_M", pb.Repository, pb.Branch, pb.Tag, pb.Commit)


def _decode(message: _M, data: bytes, what: str) -> _M:
    try:
        message.ParseFromString(data)
    except DecodeError:
        raise InvalidArgument(f"corrupt {what} record") from None
    return message


class RefStore:
    def __init__(self, kv: Store) -> None:
        self.kv = kv

    # --- repositories --------------------------------------------------------------------

    def create_repository(self, record: pb.Repository) -> RepoHandle:
        try:
            self.kv.set_if(GRAVELER_PARTITION, REPOS + record.name.encode(), record.SerializeToString(), None)
        except PredicateFailed:
            raise AlreadyExists(f"repository {record.name!r} already exists") from None
        return RepoHandle(record)

    def get_repository(self, name: str) -> RepoHandle:
        try:
            data = self.kv.get(GRAVELER_PARTITION, REPOS + name.encode()).value
        except NotFound:
            raise NotFound(f"repository {name!r} not found") from None
        return RepoHandle(_decode(pb.Repository(), data, "repository"))

    def list_repositories(self, after: str = "") -> Iterator[pb.Repository]:
        start = REPOS + after.encode() + (b"\x00" if after else b"")
        for entry in self.kv.scan(GRAVELER_PARTITION, start):
            if not entry.key.startswith(REPOS):
                return
            yield _decode(pb.Repository(), entry.value, "repository")

    def delete_repository_record(self, name: str) -> None:
        self.kv.delete(GRAVELER_PARTITION, REPOS + name.encode())

    # --- branches ------------------------------------------------------------------------

    def get_branch(self, repo: RepoHandle, name: str) -> BranchRecord:
        try:
            got = self.kv.get(repo.partition, BRANCHES + name.encode())
        except NotFound:
            raise NotFound(f"branch {name!r} not found in repository {repo.name!r}") from None
        return BranchRecord(_decode(pb.Branch(), got.value, "branch"), got.predicate)

    def create_branch(self, repo: RepoHandle, branch: pb.Branch) -> None:
        try:
            self.kv.set_if(repo.partition, BRANCHES + branch.name.encode(), branch.SerializeToString(), None)
        except PredicateFailed:
            raise AlreadyExists(f"branch {branch.name!r} already exists in repository {repo.name!r}") from None

    def set_branch_if(self, repo: RepoHandle, branch: pb.Branch, predicate: Predicate) -> None:
        """Replace the branch record only if it is still the one read (raises PredicateFailed)."""
        self.kv.set_if(repo.partition, BRANCHES + branch.name.encode(), branch.SerializeToString(), predicate)

    def delete_branch(self, repo: RepoHandle, name: str) -> None:
        self.kv.delete(repo.partition, BRANCHES + name.encode())

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
            raise NotFound(f"tag {tag_id!r} not found in repository {repo.name!r}") from None
        return _decode(pb.Tag(), data, "tag")

    def delete_tag(self, repo: RepoHandle, tag_id: str) -> None:
        self.kv.delete(repo.partition, TAGS + tag_id.encode())

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
            raise NotFound(f"commit {commit_id!r} not found in repository {repo.name!r}") from None
        return _decode(pb.Commit(), data, "commit")

    def commits_with_prefix(self, repo: RepoHandle, prefix: str, limit: int = 2) -> list[str]:
        found = []
        for entry in scan_prefix(self.kv, repo.partition, COMMITS + prefix.encode()):
            found.append(entry.key[len(COMMITS) :].decode())
            if len(found) >= limit:
                break
        return found

    def scan_partition(self, repo: RepoHandle) -> Iterator[bytes]:
        """Every key of the repository partition (for deletion)."""
        for entry in self.kv.scan(repo.partition):
            yield entry.key
