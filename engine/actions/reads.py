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

from engine.actions.read_access import ReadAccess
from engine.actions.visible_pages import HookCursors, scan_visible
from engine.core.branching import Branching
from engine.core.committed.diff import Difference
from engine.core.deadline import Deadline
from engine.core.entries import Entries
from engine.core.paging import CommonPrefix, Page, page_amount
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
    Unavailable,
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


def _pagination(items: list[dict[str, Any]], has_more: bool, next_offset: str | None = None) -> dict[str, Any]:
    if next_offset is None:
        next_offset = items[-1]["path"] if has_more and items else ""
    return {
        "has_more": has_more,
        "next_offset": next_offset,
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
        (Unavailable, 503),
    )
    for kind, status in statuses:
        if isinstance(exc, kind):
            return status, {"message": str(exc)}
    return 500, {"message": str(exc) or type(exc).__name__}


class ScopedCalls:
    """lakeFS's Lua `lakefs` client, answering for one repository only, and of it only what the
    user who fired the event may read (read_access.py)."""

    def __init__(
        self,
        reads: RepositoryReads,
        repo: RepoHandle,
        deadline: Deadline,
        create_tag: Callable[[str, str], None],
        access: ReadAccess | None = None,
    ) -> None:
        self._reads = reads
        self._repo = repo
        self._deadline = deadline
        self._create_tag = create_tag
        self._access = access or ReadAccess(None, None, repo.name)
        self._cursors = HookCursors()

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
            self._access.check_key(path)
            return 200, _stats(path, self._reads.entries.stat(self._repo, ref, path, self._deadline), user_metadata)

        return self._answer(call)

    def get_object(self, repository: str, ref: str, path: str) -> tuple[int, bytes]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            self._access.check_key(path)
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
            scope = self._access.listing_scope()
            listing = ("objects", ref, prefix, delimiter)
            start = self._cursors.resume_after(scope, after, delimiter, listing)

            def read(position: str, count: int) -> tuple[list[tuple[bytes, pb.Entry | None]], bool]:
                page = self._reads.entries.list(self._repo, ref, prefix, delimiter, position, count, self._deadline)
                return list(page.items), page.has_more

            def shown(item: tuple[bytes, pb.Entry | None]) -> bool:
                key = item[0].decode()
                return scope.may_allow_under(key) if item[1] is None else scope.allows(key)

            offset: str | None = None
            if scope.whole:
                items, has_more = read(start, amount)
            else:
                scanned = scan_visible(read, shown, _item_key, start, page_amount(amount), self._deadline)
                items, has_more = scanned.items, scanned.has_more
                offset = self._cursors.next_offset(scanned, listing, _item_key(items[-1]) if items else "")
            results = [
                {"path": key.decode(), "path_type": "common_prefix"}
                if entry is None
                else _stats(key.decode(), entry, user_metadata)
                for key, entry in items
            ]
            return 200, {"pagination": _pagination(results, has_more, offset), "results": results}

        return self._answer(call)

    def _visible_diff(
        self, read: Callable[[str, int], Page[Difference]], after: str, amount: int, listing: tuple[str, ...]
    ) -> dict[str, Any]:
        """A diff's page with the changes to keys the user may not read left out."""
        scope = self._access.diff_scope()
        if scope.whole:
            return _diff_list(read(after, amount))
        delimiter = listing[-1]
        start = self._cursors.resume_after(scope, after, delimiter, listing)

        def items(position: str, count: int) -> tuple[list[Difference | CommonPrefix], bool]:
            page = read(position, count)
            return list(page.items), page.has_more

        def shown(item: Difference | CommonPrefix) -> bool:
            key = item.key.decode()
            return scope.may_allow_under(key) if isinstance(item, CommonPrefix) else scope.allows(key)

        def key_of(item: Difference | CommonPrefix) -> str:
            return item.key.decode()

        scanned = scan_visible(items, shown, key_of, start, page_amount(amount), self._deadline)
        offset = self._cursors.next_offset(scanned, listing, key_of(scanned.items[-1]) if scanned.items else "")
        return _diff_list(Page(scanned.items, scanned.has_more), offset)

    def diff_branch(
        self, repository: str, branch: str, after: str, amount: int, prefix: str, delimiter: str
    ) -> tuple[int, Any]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)

            def read(position: str, count: int) -> Page[Difference]:
                return self._reads.branching.diff_branch(
                    self._repo, branch, prefix, delimiter, position, count, self._deadline
                )

            return 200, self._visible_diff(read, after, amount, ("diff_branch", branch, prefix, delimiter))

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

            def read(position: str, count: int) -> Page[Difference]:
                return self._reads.branching.diff(
                    self._repo, left_ref, right_ref, True, prefix, delimiter, position, count
                )

            return 200, self._visible_diff(read, after, amount, ("diff_refs", left_ref, right_ref, prefix, delimiter))

        return self._answer(call)

    def create_tag(self, repository: str, ref: str, tag: str) -> tuple[int, dict[str, Any]]:
        def call() -> tuple[int, Any]:
            self._scoped(repository)
            self._access.check_write_repo()
            self._create_tag(tag, ref)
            commit_id = self._reads.refs.resolve(self._repo, tag).commit_id
            return 201, {"id": tag, "commit_id": commit_id}

        return self._answer(call)


def _item_key(item: tuple[bytes, pb.Entry | None]) -> str:
    return item[0].decode()


def _diff_list(page: Page[Difference], next_offset: str | None = None) -> dict[str, Any]:
    """lakeFS's DiffList."""
    results: list[dict[str, Any]] = []
    for item in page.items:
        if isinstance(item, CommonPrefix):
            results.append({"type": "prefix_changed", "path": item.key.decode(), "path_type": "common_prefix"})
            continue
        record = item.right if item.right is not None else item.left
        size = decode_entry(record.value).size if record is not None else 0
        results.append({"type": item.kind, "path": item.key.decode(), "path_type": "object", "size_bytes": size})
    return {"pagination": _pagination(results, page.has_more, next_offset), "results": results}
