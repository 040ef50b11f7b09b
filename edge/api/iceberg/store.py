"""Where the catalog keeps what it knows: small JSON objects on a repository's ref, read and
written through the REST API's backend like any object, so a branch, a diff, a commit and a
merge carry them.

A namespace `a.b` on `<repository>.<ref>` is the object `a/b/_iceberg_namespace.json` (its
properties); a table `a.b.t` lives under `a/b/t/`: its metadata files in `metadata/` (new ones
named `NNNNN-<uuid>.metadata.json` as Iceberg names them) and the table's pointer,
`a/b/t/_iceberg_table.json`, which names the current metadata file. A catalog change is one
conditional staging of the pointer on the branch (If-Match its ETag as read, or absent for a
new table): two writers that read the same pointer cannot both replace it. A view `a.b.v` is
kept the same way under `a/b/v/`, its pointer `a/b/v/_iceberg_view.json` naming its current view
metadata file; a name is a table's or a view's, never both.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from edge.api.context import Context
from edge.api.errors import ApiError
from edge.api.iceberg.errors import IcebergError
from edge.api.objects.write import typed_call
from edge.core.object_reads import read_whole
from edge.core.object_writes import NoSuchBranch, NotABranch, ObjectWriteFailed, SourceBody
from edge.core.write_outcome import certainly_not_applied
from silt.block.adapter import PutResult
from silt.errors import ConditionFailed, FailedPrecondition, InvalidArgument, NotFound, SiltError
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import DELETE_OBJECT, READ_OBJECT, WRITE_OBJECT
from silt.objects import new_physical_address, split_address

NAMESPACE_MARKER = "_iceberg_namespace.json"
TABLE_POINTER = "_iceberg_table.json"
VIEW_POINTER = "_iceberg_view.json"
JSON = "application/json"
# The largest catalog JSON read (a metadata file of thousands of snapshots is a few MiB).
MAX_JSON_BYTES = 32 * 1024 * 1024


class RefGone(Exception):
    """The repository or the ref is not there: what holds the namespace does not exist."""


class Conflict(Exception):
    """A conditional write whose condition did not hold: another writer was first."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key  # the key whose condition failed, when known


class OutcomeUnknown(Exception):
    """A write that failed in a way that says nothing final: it may stand (the client must
    reload to know)."""


@dataclass(frozen=True)
class Replacement:
    """One key of a write of several: its new JSON value, only while its ETag is if_match (or,
    with if_absent, only while there is no such key)."""

    key: str
    value: dict[str, Any]
    if_match: str
    if_absent: bool = False


@dataclass(frozen=True)
class Where:
    """A namespace's place: the repository, the ref, and its levels below them."""

    repository: str
    ref: str
    levels: tuple[str, ...]

    @property
    def key(self) -> str:
        """The namespace's key prefix, ending in "/" ("" for the ref's root)."""
        return "".join(level + "/" for level in self.levels)

    def table_key(self, name: str) -> str:
        return f"{self.key}{name}/"

    def location(self, key: str) -> str:
        """key's address through the ref: what the ref holds there now."""
        return f"s3://{self.repository}/{self.ref}/{key}"

    def neutral_location(self, key: str) -> str:
        """key's ref-neutral address (the ref a branch): the file written there through it, for
        good, whatever becomes of the branch (the S3 gateway's `@<branch>/<key>`)."""
        return f"s3://{self.repository}/@{self.ref}/{key}"


def pointer_to(where: Where, key: str) -> dict[str, Any]:
    """A table pointer naming the metadata file the catalog wrote at key on where's branch
    (recorded for its ref-neutral address): the key, read through the ref, and that address,
    which clients are given."""
    return {"metadata-key": key, "metadata-location": where.neutral_location(key)}


def metadata_location(where: Where, pointer: dict[str, Any], key: str) -> str:
    """The address a table's current metadata file is served at: the ref-neutral one its
    pointer records (a file the catalog wrote), else key through where's ref (a pointer written
    before, registered or renamed: the file is on the ref now)."""
    recorded = pointer.get("metadata-location")
    head = f"s3://{where.repository}/@"
    # Only an address of this key in this repository: a pointer is an object a branch's writers
    # can write, and must not send readers elsewhere.
    if isinstance(recorded, str) and recorded.startswith(head) and recorded[len(head) :].partition("/")[2] == key:
        return recorded
    return where.location(key)


@dataclass(frozen=True)
class Stored:
    value: dict[str, Any]
    etag: str


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int) -> bytes:
        chunk, self._data = self._data[:n], self._data[n:]
        return chunk


class _JsonBody(SourceBody):
    content_type: str | None = JSON

    def __init__(self, data: bytes) -> None:
        super().__init__(_Bytes(data), len(data))

    async def finish(self, written: PutResult) -> dict[str, str]:
        return {}


class Objects:
    """The catalog's reads and writes for one request, each authorized as the object action it is."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._branches: dict[tuple[str, str], bool] = {}

    async def is_branch(self, where: Where) -> bool:
        """Whether where's ref is a branch (a tag, a commit or a ref expression is not; nor a
        ref that does not resolve)."""
        known = self._branches.get((where.repository, where.ref))
        if known is None:
            request = api.ResolveRefRequest(repository=where.repository, ref=where.ref)
            try:
                resolved = await typed_call(self.ctx, self.ctx.backend.graveler.ResolveRef, request)
            except (NotFound, InvalidArgument):
                return False
            known = resolved.type == api.ResolveRefResponse.REF_TYPE_BRANCH
            self._branches[(where.repository, where.ref)] = known
        return known

    async def read_json(self, where: Where, key: str, max_bytes: int = MAX_JSON_BYTES) -> Stored | None:
        """The JSON object at key on where's ref; None if there is no such object. One larger
        than max_bytes is not read: IcebergError 413 (a writer of the branch chooses what is
        there, through S3 too)."""
        await self.ctx.authorize_key(READ_OBJECT, where.repository, key)
        backend = self.ctx.backend
        request = api.StatEntryRequest(repository=where.repository, ref=where.ref, key=key)
        try:
            info = await backend.stat_entry(request, self.ctx.deadline, typed=True)
        except NotFound as exc:
            if exc.what in (None, "object"):
                return None
            raise RefGone(str(exc)) from None
        except ApiError as exc:
            if exc.status == 404:
                raise RefGone(exc.message) from None
            raise
        entry = info.entry
        if entry.size > max_bytes:
            raise IcebergError(413, f"{key} on {where.ref} is larger than {max_bytes} bytes")
        repository_namespace = await backend.namespace(where.repository, self.ctx.deadline)
        namespace, address = split_address(repository_namespace, entry.physical_address)
        source = backend.entry_reader(repository_namespace, entry)
        data = await backend.run(read_whole, source, namespace, address, None)
        try:
            value = await backend.run(json.loads, data)
        except ValueError:
            raise IcebergError(500, f"{key} on {where.ref} is not JSON") from None
        return Stored(value, entry.etag.strip('"'))

    async def write_json(
        self,
        where: Where,
        key: str,
        value: dict[str, Any],
        *,
        if_absent: bool = False,
        if_match: str = "",
        neutral: bool = False,
    ) -> str:
        """Stage value at key on where's ref (a branch); with if_absent or if_match (an ETag) only
        if the key is absent or still has that ETag, checked and staged as one step: Conflict
        otherwise. neutral: the key is also recorded for its ref-neutral address (a metadata file,
        written once under a name of its own). Returns the new ETag."""
        await self.ctx.authorize_key(WRITE_OBJECT, where.repository, key, branch=where.ref)
        data = json.dumps(value, separators=(",", ":")).encode()
        staged = api.StageEntryRequest(
            repository=where.repository,
            branch=where.ref,
            key=key,
            entry=pb.Entry(content_type=JSON),
            if_absent=if_absent,
            if_match_etag=if_match,
            neutral=neutral,
        )
        try:
            await self.ctx.backend.write_object(
                staged, _JsonBody(data), self.ctx.deadline, branch_by_name=True, absent_first=if_absent
            )
        except ObjectWriteFailed as failed:
            error = _write_error(where, failed.error)
            if isinstance(error, RefGone) and await self._readable(where):
                error = _read_only(where)
            raise error from None
        return staged.entry.etag.strip('"')

    async def replace_all_json(self, where: Where, replacements: Sequence[Replacement]) -> None:
        """Stage every replacement on where's ref (a branch) as one compare-and-set: each key
        still has its if_match ETag (or is absent, if_absent) and every value is staged, or none is (Conflict naming the
        first key that changed). The bytes are written first, each at an address of its own;
        those of a write graveler certainly did not take are deleted. OutcomeUnknown when the
        write may stand."""
        for replacement in replacements:
            await self.ctx.authorize_key(WRITE_OBJECT, where.repository, replacement.key, branch=where.ref)
        backend = self.ctx.backend
        try:
            place = await backend.writable_place(where.repository, where.ref, self.ctx.deadline, by_name=True)
        except SiltError as exc:
            error = _write_error(where, exc)
            if isinstance(error, RefGone) and await self._readable(where):
                error = _read_only(where)
            raise error from None
        request = api.StageEntriesIfRequest(
            repository=where.repository, branch=where.ref, repository_id=place.repository_id
        )
        modified = Timestamp()
        modified.FromNanoseconds(time.time_ns())
        written: list[str] = []
        try:
            for replacement in replacements:
                data = json.dumps(replacement.value, separators=(",", ":")).encode()
                address = new_physical_address()
                put = await backend.write_bytes(place.namespace, address, io.BytesIO(data), len(data))
                written.append(address)
                entry = pb.Entry(
                    physical_address=address,
                    size=put.size,
                    etag=put.etag,
                    content_type=JSON,
                    last_modified=modified,
                )
                request.entries.append(
                    api.ConditionalEntry(
                        key=replacement.key,
                        entry=entry,
                        if_match_etag=replacement.if_match,
                        if_absent=replacement.if_absent,
                    )
                )
            await backend.graveler_call(backend.graveler.StageEntriesIf, request, self.ctx.deadline, changes=True)
        except SiltError as exc:
            if not certainly_not_applied(exc) and written and len(written) == len(replacements):
                # Sent, and perhaps applied: the bytes stay (garbage collection removes them if
                # no entry came to name them).
                raise OutcomeUnknown(f"the write may or may not stand: {exc}") from None
            for address in written:
                await backend.delete_bytes(place.namespace, address)
            if isinstance(exc, ConditionFailed):
                raise Conflict(str(exc), exc.key) from None
            raise _write_error(where, exc) from None

    async def _readable(self, where: Where) -> bool:
        """Whether where's ref resolves (a tag or a commit, when it is not a branch)."""
        request = api.ResolveRefRequest(repository=where.repository, ref=where.ref)
        try:
            await typed_call(self.ctx, self.ctx.backend.graveler.ResolveRef, request)
        except NotFound:
            return False
        return True

    async def delete(self, where: Where, key: str) -> None:
        await self.ctx.authorize_key(DELETE_OBJECT, where.repository, key, branch=where.ref)
        request = api.DeleteEntryRequest(repository=where.repository, branch=where.ref, key=key)
        try:
            await typed_call(self.ctx, self.ctx.backend.graveler.DeleteEntry, request)
        except NotFound as exc:
            if exc.what not in (None, "object"):
                if await self._readable(where):
                    raise _read_only(where) from None
                raise RefGone(str(exc)) from None
        except FailedPrecondition as exc:
            raise _write_error(where, exc) from None

    async def children(self, where: Where, prefix: str, after: str = "") -> AsyncIterator[str]:
        """The names of the "directories" right under prefix on where's ref, in order, from the
        one after `after` (a name) on."""
        await self.ctx.read_repo_scope(where.repository)
        after = f"{prefix}{after}/" if after else ""
        while True:
            request = api.ListEntriesRequest(
                repository=where.repository, ref=where.ref, prefix=prefix, delimiter="/", after=after, amount=1000
            )
            try:
                page = await self.ctx.backend.list_entries(request, self.ctx.deadline)
            except ApiError as exc:
                if exc.status == 404:
                    raise RefGone(exc.message) from None
                raise
            for item in page.items:
                if item.common_prefix:
                    yield item.key[len(prefix) :].rstrip("/")
                after = item.key
            if not page.has_more or not page.items:
                return

    async def list_keys(self, where: Where, prefix: str) -> AsyncIterator[str]:
        """Every key under prefix on where's ref."""
        after = ""
        while True:
            request = api.ListEntriesRequest(repository=where.repository, ref=where.ref, prefix=prefix, after=after)
            page = await self.ctx.backend.list_entries(request, self.ctx.deadline)
            for item in page.items:
                yield item.key
                after = item.key
            if not page.has_more or not page.items:
                return


def _read_only(where: Where) -> IcebergError:
    return IcebergError(
        403, f"{where.repository}.{where.ref} is not a branch: tags and commits are read-only", "ForbiddenException"
    )


def _write_error(where: Where, error: SiltError) -> Exception:
    if isinstance(error, NotABranch):
        return _read_only(where)
    if isinstance(error, NoSuchBranch) or (isinstance(error, NotFound) and error.what in ("branch", "repository")):
        return RefGone(str(error))
    if isinstance(error, FailedPrecondition | NotFound):
        return Conflict(str(error))
    return IcebergError(503, f"the write failed: {error}", "ServiceUnavailableException")
