"""What hooks read of their repository: action files, and the `lakefs` calls of Lua hooks.

Lua hooks call lakeFS's API through the `lakefs` module; here those calls are answered by the
engine itself, in lakeFS's response shapes, and only for the repository the hook runs for (a
hook of one repository never reads another's, whatever its script names). Answers are
(HTTP status, body) as lakeFS's Lua client returns them; an error is its status and
`{"message": ...}`, never an exception into the script.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine.core.branching import Branching
from engine.core.committed.diff import Difference
from engine.core.deadline import Deadline
from engine.core.entries import Entries
from engine.core.paging import CommonPrefix, Page
from engine.core.refs import BranchRecord, RefManager, RepoHandle
from engine.core.values import decode_entry
from silt.block.adapter import BlockAdapter
from silt.block.external import ExternalFiles, source_reader
from silt.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SiltError,
)
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import split_address
from silt.paging import MAX_PAGE

# A Lua hook reads whole objects into memory: bounded like its own memory.
MAX_READ_BYTES = 16 * 1024 * 1024


class RepositoryReads:
    """Reads of one repository's objects for the actions of that repository."""

    def __init__(
        self,
        refs: RefManager,
        entries: Entries,
        branching: Branching,
        adapter: BlockAdapter,
        external: ExternalFiles,
    ) -> None:
        self.refs = refs
        self.entries = entries
        self.branching = branching
        self.adapter = adapter
        self.external = external

    def files_under(
        self, repo: RepoHandle, ref: str, prefix: str, limit: int, deadline: Deadline
    ) -> list[tuple[str, pb.Entry]]:
        """The objects directly under prefix at ref (no sub-folders), at most limit + 1 of them."""
        page = self.entries.list(repo, ref, prefix, "/", "", limit + 1, deadline)
        return [(key.decode(), entry) for key, entry in page.items if entry is not None]

    def files_at(self, repo: RepoHandle, branch: BranchRecord, prefix: str, limit: int) -> list[tuple[str, pb.Entry]]:
        """As files_under, on the branch as this record of it shows it (a commit's, just sealed)."""
        page = self.entries.list_at(repo, branch, prefix, "/", limit + 1)
        return [(key.decode(), entry) for key, entry in page.items if entry is not None]

    def read(self, repo: RepoHandle, entry: pb.Entry, limit: int) -> bytes:
        if entry.size > limit:
            raise InvalidArgument(f"object is larger than {limit} bytes")
        namespace, address = split_address(repo.namespace, entry.physical_address)
        reader = source_reader(self.adapter, self.external, repo.namespace, entry)
        with reader.get(namespace, address) as stream:
            return bytes(stream.read(limit + 1))[:limit]


def _stats(path: str, entry: pb.Entry, user_metadata: bool = True) -> dict[str, Any]:
    shown = {
        "path": path,
        "path_type": "object",
        "physical_address": entry.physical_address,
        "checksum": entry.etag,
        "size_bytes": entry.size,
        "mtime": entry.last_modified.seconds,
        "metadata": dict(entry.metadata),
        "content_type": entry.content_type,
    }
    if not user_metadata:
        del shown["metadata"]
    return shown


def _pagination(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "has_more": has_more,
        "next_offset": items[-1]["path"] if has_more and items else "",
        "results": len(items),
        "max_per_page": MAX_PAGE,
    }


def _error(exc: SiltError) -> tuple[int, dict[str, Any]]:
    # lakeFS's statuses: a refusing hook (a tag's pre-create-tag run) is 412, no run slot 429.
    statuses: tuple[tuple[type[SiltError], int], ...] = (
        (NotFound, 404),
        (AlreadyExists, 409),
        (InvalidArgument, 400),
        (PermissionDenied, 403),
        (FailedPrecondition, 412),
        (ResourceExhausted, 429),
    )
    for kind, status in statuses:
        if isinstance(exc, kind):
            return status, {"message": str(exc)}
    return 500, {"message": str(exc) or type(exc).__name__}


class ScopedCalls:
    """lakeFS's Lua `lakefs` client, answering for one repository only."""

    def __init__(
        self,
        reads: RepositoryReads,
        repo: RepoHandle,
        deadline: Deadline,
        create_tag: Callable[[str, str], None],
    ) -> None:
        self._reads = reads
        self._repo = repo
        self._deadline = deadline
        self._create_tag = create_tag

    def _scoped(self, repository: str) -> None:
        if repository != self._repo.name:
            raise PermissionDenied(f"a hook of repository {self._repo.name!r} cannot reach repository {repository!r}")

    def _answer(self, call: Callable[[], tuple[int, Any]]) -> tuple[int, Any]:
        try:
            self._deadline.check("a Lua hook's call")
            return call()
        except SiltError as exc:
            return _error(exc)

    def stat_object(self, repository: str, ref: str, path: str, user_metadata: bool = True) -> tuple[int, Any]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            return 200, _stats(path, self._reads.entries.stat(self._repo, ref, path, self._deadline), user_metadata)

        return self._answer(call)

    def get_object(self, repository: str, ref: str, path: str) -> tuple[int, bytes]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            entry = self._reads.entries.stat(self._repo, ref, path, self._deadline)
            return 200, self._reads.read(self._repo, entry, MAX_READ_BYTES)

        status, body = self._answer(call)
        if status != 200:  # the error's body, as bytes, as lakeFS's client returns it
            return status, json.dumps(body).encode()
        return status, body

    def list_objects(
        self,
        repository: str,
        ref: str,
        after: str,
        prefix: str,
        delimiter: str,
        amount: int = 0,
        user_metadata: bool = True,
    ) -> tuple[int, Any]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            page = self._reads.entries.list(self._repo, ref, prefix, delimiter, after, amount, self._deadline)
            results = [
                {"path": key.decode(), "path_type": "common_prefix"}
                if entry is None
                else _stats(key.decode(), entry, user_metadata)
                for key, entry in page.items
            ]
            return 200, {"pagination": _pagination(results, page.has_more), "results": results}

        return self._answer(call)

    def diff_branch(
        self, repository: str, branch: str, after: str, amount: int, prefix: str, delimiter: str
    ) -> tuple[int, Any]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            page = self._reads.branching.diff_branch(
                self._repo, branch, prefix, delimiter, after, amount, self._deadline
            )
            return 200, _diff_list(page)

        return self._answer(call)

    def diff_refs(
        self,
        repository: str,
        left_ref: str,
        right_ref: str,
        after: str = "",
        prefix: str = "",
        delimiter: str = "",
        amount: int = 0,
    ) -> tuple[int, dict[str, Any]]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            page = self._reads.branching.diff(self._repo, left_ref, right_ref, True, prefix, delimiter, after, amount)
            return 200, _diff_list(page)

        return self._answer(call)

    def create_tag(self, repository: str, ref: str, tag: str) -> tuple[int, dict[str, Any]]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            self._create_tag(tag, ref)
            commit_id = self._reads.refs.resolve(self._repo, tag).commit_id
            return 201, {"id": tag, "commit_id": commit_id}

        return self._answer(call)


def _diff_list(page: Page[Difference]) -> dict[str, Any]:
    """lakeFS's DiffList."""
    results: list[dict[str, Any]] = []
    for item in page.items:
        if isinstance(item, CommonPrefix):
            results.append({"type": "prefix_changed", "path": item.key.decode(), "path_type": "common_prefix"})
            continue
        record = item.right if item.right is not None else item.left
        size = decode_entry(record.value).size if record is not None else 0
        results.append({"type": item.kind, "path": item.key.decode(), "path_type": "object", "size_bytes": size})
    return {"pagination": _pagination(results, page.has_more), "results": results}
