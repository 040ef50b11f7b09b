"""The source: any server speaking lakeFS's REST API, read through lakeFS's own client.

Only reads: the repository, its branches, tags and every commit reachable from them, the
differences between a commit and its first parent, and object stats (their physical
addresses, which the migrated entries keep). Nothing is written to the source or its storage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from silt.client_base import EXIT_FAILURE, EXIT_UNAVAILABLE, ClientError

PAGE = 1000
# A commit changing more keys than this is read by listing the commit whole rather than one
# stat per key: a listing page carries a thousand stats for the price of one call.
STAT_ONE_BY_ONE = 100

_T = TypeVar("_T")


@dataclass(frozen=True)
class SourceCommit:
    id: str
    parents: tuple[str, ...]
    committer: str
    message: str
    creation_date: int  # seconds since the epoch, as lakeFS gives it
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceObject:
    path: str
    physical_address: str
    size: int
    checksum: str
    mtime: int
    content_type: str
    metadata: dict[str, str]


@dataclass(frozen=True)
class Changes:
    """What a commit changed against its first parent: new or changed objects, removed paths."""

    written: list[SourceObject]
    removed: list[str]


class LakeFSSource:
    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str, repository: str) -> None:
        import lakefs_sdk  # large: imported by the one command that needs it

        host = endpoint.rstrip("/")
        if not host.endswith("/api/v1"):
            host += "/api/v1"
        configuration = lakefs_sdk.Configuration(host=host, username=access_key_id, password=secret_access_key)
        self.endpoint = endpoint
        self.repository = repository
        self.api_client = lakefs_sdk.ApiClient(configuration)
        self._repositories = lakefs_sdk.RepositoriesApi(self.api_client)
        self._branches = lakefs_sdk.BranchesApi(self.api_client)
        self._tags = lakefs_sdk.TagsApi(self.api_client)
        self._refs = lakefs_sdk.RefsApi(self.api_client)
        self._commits = lakefs_sdk.CommitsApi(self.api_client)
        self._objects = lakefs_sdk.ObjectsApi(self.api_client)

    def call(self, what: str, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """fn(*args, **kwargs), with lakeFS's errors as one-line CLI errors naming the source."""
        from lakefs_sdk.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body or exc.reason
            raise ClientError(f"source {self.endpoint}: {what}: {exc.status} {body}", EXIT_FAILURE) from None
        except (OSError, HTTPError) as exc:
            raise ClientError(f"source {self.endpoint} unavailable: {exc}", EXIT_UNAVAILABLE) from None

    def close(self) -> None:
        self.api_client.close()

    # --- refs ---------------------------------------------------------------------------

    def repository_info(self) -> Any:
        return self.call(f"repository {self.repository!r}", self._repositories.get_repository, self.repository)

    def branches(self) -> dict[str, str]:
        """Branch name -> head commit id."""
        return {ref.id: ref.commit_id for ref in self._paged("branches", self._branches.list_branches)}

    def tags(self) -> dict[str, str]:
        """Tag name -> commit id."""
        return {ref.id: ref.commit_id for ref in self._paged("tags", self._tags.list_tags)}

    def _paged(self, what: str, list_page: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
        """Every result of a paged lakeFS listing of the repository, page after page."""
        after = ""
        while True:
            page = self.call(what, list_page, self.repository, *args, after=after, amount=PAGE, **kwargs)
            yield from page.results
            if not page.pagination.has_more:
                return
            after = page.pagination.next_offset

    def commit(self, commit_id: str) -> SourceCommit:
        found = self.call(f"commit {commit_id}", self._commits.get_commit, self.repository, commit_id)
        return _commit(found)

    def history(self, heads: list[str]) -> dict[str, SourceCommit]:
        """Every commit reachable from heads, by id. A head already reached is not walked again:
        each walk reads the whole history under its head, so that head's ancestors are in."""
        commits: dict[str, SourceCommit] = {}
        for head in heads:
            if head not in commits:
                for found in self._paged(f"log of {head}", self._refs.log_commits, head):
                    commits.setdefault(found.id, _commit(found))
        return commits

    # --- contents -----------------------------------------------------------------------

    def changes(self, base: str | None, commit: str) -> Changes:
        """What commit holds that base does not (every object, without base)."""
        if base is None:
            return Changes(list(self.objects(commit)), [])
        what = f"diff {base[:12]}..{commit[:12]}"
        return self._changes(commit, self._paged(what, self._refs.diff_refs, base, commit, type="two_dot"))

    def uncommitted(self, branch: str) -> Changes:
        """A branch's staged changes, as lakeFS's diff of the branch lists them."""
        what = f"uncommitted changes of {branch!r}"
        return self._changes(branch, self._paged(what, self._branches.diff_branch, branch))

    def _changes(self, ref: str, differences: Iterable[Any]) -> Changes:
        written: list[str] = []
        removed: list[str] = []
        for difference in differences:
            if difference.path_type == "object":
                (removed if difference.type == "removed" else written).append(difference.path)
        return Changes(self.stats(ref, written), removed)

    def stats(self, ref: str, paths: list[str]) -> list[SourceObject]:
        if len(paths) <= STAT_ONE_BY_ONE:
            stat = self._objects.stat_object
            return [
                _object(self.call(f"stat {path!r} at {ref[:12]}", stat, self.repository, ref, path, user_metadata=True))
                for path in paths
            ]
        wanted = set(paths)
        found = [entry for entry in self.objects(ref) if entry.path in wanted]
        if len(found) != len(wanted):
            missing = sorted(wanted - {entry.path for entry in found})[:5]
            raise ClientError(f"source {self.endpoint}: {ref[:12]} lists no {missing}", EXIT_FAILURE)
        return found

    def objects(self, ref: str, prefix: str = "") -> Iterator[SourceObject]:
        listing = self._objects.list_objects
        for item in self._paged(
            f"objects at {ref[:12]}", listing, ref, prefix=prefix, user_metadata=True, presign=False
        ):
            if item.path_type == "object":
                yield _object(item)


def _commit(found: Any) -> SourceCommit:
    return SourceCommit(
        id=found.id,
        parents=tuple(found.parents or ()),
        committer=found.committer or "",
        message=found.message or "",
        creation_date=int(found.creation_date or 0),
        metadata=dict(found.metadata or {}),
    )


def _object(stats: Any) -> SourceObject:
    return SourceObject(
        path=stats.path,
        physical_address=stats.physical_address,
        size=int(stats.size_bytes or 0),
        checksum=stats.checksum or "",
        mtime=int(stats.mtime or 0),
        content_type=stats.content_type or "",
        metadata=dict(stats.metadata or {}),
    )
