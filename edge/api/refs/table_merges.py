"""Every merge the REST API and the web UI make (a direct merge, a pull request's): graveler's
Merge, and when it conflicts only on Iceberg tables the catalog keeps, the tables combined.

A table both sides committed to conflicts on its pointer (`<table>/_iceberg_table.json`). When
every conflict is such a pointer (or a metadata file of such a table), each table's metadata is
read at the merge base, on the source and on the destination; if both sides only appended
(edge/api/iceberg/table_merge.py), the combined metadata and its new manifest lists are written
at fresh physical addresses of the repository's storage namespace, and the merge is made again
with resolutions: the pointer moves to the combined metadata, the new files are added, and all
of it only while both sides still hold what was read (graveler checks that inside the merge's
plan; a destination that moved meanwhile is a conflict again, and nothing changes). A table
whose changes do not combine stays a conflict, with the table and the reason named.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from edge.api.context import Context
from edge.api.errors import ApiError
from edge.api.iceberg.store import TABLE_POINTER, Where, metadata_location, pointer_to
from edge.api.iceberg.table_merge import Combined, Incompatible, Sides, check, combine, lists_needed
from edge.core.object_reads import read_whole
from silt.errors import NotFound
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT
from silt.objects import new_physical_address, split_address

METADATA_DIR = "metadata/"
# What a merge reads of a table, refused past these sizes before a byte is read: the files are
# written by whoever wrote the branch, so a merge (or the merge check, which readers ask) must
# not be made to hold or parse an arbitrary object. Far above real tables' files.
MAX_POINTER_BYTES = 64 * 1024
MAX_METADATA_BYTES = 32 * 1024 * 1024
MAX_MANIFEST_LIST_BYTES = 8 * 1024 * 1024
# Metadata a writer could make malformed in any of these ways: the table does not combine.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)
METADATA_SUFFIX = ".metadata.json"
JSON = "application/json"
AVRO = "application/octet-stream"

RunMerge = Callable[[list[api.MergeResolution]], Awaitable[api.MergeResponse]]


@dataclass(frozen=True)
class TableConflict:
    """A table whose two sides' changes do not combine, and why."""

    table: str
    reason: str

    def body(self) -> dict[str, str]:
        return {"table": self.table, "reason": self.reason}

    def text(self) -> str:
        return f"table {self.table}: {self.reason}"


@dataclass
class MergeAnswer:
    """Graveler's answer, and the tables that kept it a conflict (none when it committed, or
    when a conflict is not a table's)."""

    reply: api.MergeResponse
    tables: list[TableConflict] = field(default_factory=list)


@dataclass
class _Table:
    prefix: str  # "db/events/"
    pointer: bool = False
    metadata_files: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.prefix.rstrip("/").replace("/", ".")


async def merge(ctx: Context, repository: str, source_ref: str, destination: str, run: RunMerge) -> MergeAnswer:
    """run (graveler's Merge or MergePullRequest, given resolutions) once, and once more with the
    tables combined when only tables conflicted and all of them combine."""
    reply = await run([])
    if reply.HasField("commit") or not reply.conflicts or reply.conflicts_truncated:
        return MergeAnswer(reply)
    tables = _tables_of([conflict.key for conflict in reply.conflicts])
    if tables is None:
        return MergeAnswer(reply)
    try:
        combiner = _Combiner(ctx, repository, destination)
        await combiner.resolve_refs(source_ref)
        resolutions: list[api.MergeResolution] = []
        refused: list[TableConflict] = []
        for table in tables:
            try:
                resolutions += await combiner.table(table)
            except Incompatible as exc:
                refused.append(TableConflict(table.name, str(exc)))
    except ApiError as exc:
        if exc.status == 403:
            # The caller may not read a table's files: the merge stays the plain conflict it was.
            return MergeAnswer(reply)
        raise
    if refused:
        return MergeAnswer(reply, refused)
    return MergeAnswer(await run(resolutions))


async def predict(
    ctx: Context, repository: str, commits: tuple[str, str, str], destination: str, conflicting: list[str]
) -> tuple[list[str], list[TableConflict]] | None:
    """For a merge that would conflict at the keys `conflicting` (source, destination and base
    commits as given): the tables a merge would combine and those it would not (with the
    reason), judged from their metadata; None when a conflict is not a table's (or a table's
    files may not be read by the caller)."""
    tables = _tables_of(conflicting)
    if tables is None:
        return None
    combiner = _Combiner(ctx, repository, destination)
    combiner.source, combiner.dest, combiner.base = commits
    combined: list[str] = []
    refused: list[TableConflict] = []
    try:
        for table in tables:
            try:
                try:
                    check(await combiner.sides(table))
                except MALFORMED as exc:
                    raise Incompatible(f"its metadata is malformed ({type(exc).__name__})") from None
                combined.append(table.name)
            except Incompatible as exc:
                refused.append(TableConflict(table.name, str(exc)))
    except ApiError as exc:
        if exc.status == 403:
            return None
        raise
    return combined, refused


def _tables_of(keys: list[str]) -> list[_Table] | None:
    """The tables the conflicting keys are of, or None if a key is not a table's pointer or a
    metadata file of a table whose pointer conflicts too."""
    tables: dict[str, _Table] = {}
    for key in keys:
        if key.endswith("/" + TABLE_POINTER):
            prefix = key[: -len(TABLE_POINTER)]
            tables.setdefault(prefix, _Table(prefix)).pointer = True
        elif f"/{METADATA_DIR}" in key and key.endswith(METADATA_SUFFIX):
            prefix = key[: key.rindex(f"/{METADATA_DIR}") + 1]
            tables.setdefault(prefix, _Table(prefix)).metadata_files.append(key)
        else:
            return None
    if not all(table.pointer for table in tables.values()):
        return None
    return list(tables.values())


@dataclass
class _Read:
    entry: pb.Entry
    data: bytes


class _Combiner:
    def __init__(self, ctx: Context, repository: str, destination: str) -> None:
        self.ctx = ctx
        self.repository = repository
        self.destination = destination
        self.source = self.dest = self.base = ""

    async def resolve_refs(self, source_ref: str) -> None:
        """The commits the tables are read at: the source's and the destination's now, and their
        merge base."""
        graveler = self.ctx.backend.graveler
        resolve = api.ResolveRefRequest
        self.source = (
            await self.ctx.call(graveler.ResolveRef, resolve(repository=self.repository, ref=source_ref))
        ).commit_id
        self.dest = (
            await self.ctx.call(graveler.ResolveRef, resolve(repository=self.repository, ref=self.destination))
        ).commit_id
        base = api.FindMergeBaseRequest(repository=self.repository, left_ref=self.source, right_ref=self.dest)
        self.base = (await self.ctx.call(graveler.FindMergeBase, base)).commit_id

    async def read(self, commit: str, key: str, max_bytes: int) -> _Read | None:
        """key's entry and bytes at commit (None if absent); Incompatible past max_bytes."""
        await self.ctx.authorize_key(READ_OBJECT, self.repository, key)
        request = api.StatEntryRequest(repository=self.repository, ref=commit, key=key)
        backend = self.ctx.backend
        try:
            info = await backend.stat_entry(request, self.ctx.deadline, typed=True)
        except NotFound as exc:
            if exc.what in (None, "object"):
                return None
            raise
        if info.entry.size > max_bytes:
            raise Incompatible(f"{key} is {info.entry.size} bytes, more than the {max_bytes} a merge reads")
        namespace = await backend.namespace(self.repository, self.ctx.deadline)
        store_namespace, address = split_address(namespace, info.entry.physical_address)
        source = backend.entry_reader(namespace, info.entry)
        return _Read(info.entry, await backend.run(read_whole, source, store_namespace, address, None))

    async def read_json(self, commit: str, key: str, what: str) -> tuple[pb.Entry, dict[str, Any]]:
        read = await self.read(commit, key, MAX_METADATA_BYTES)
        if read is None:
            raise Incompatible(f"{what} {key} is missing")
        try:
            value = await self.ctx.backend.run(json.loads, read.data)
        except ValueError:
            raise Incompatible(f"{what} {key} is not JSON") from None
        if not isinstance(value, dict):
            raise Incompatible(f"{what} {key} is not a JSON object")
        return read.entry, value

    async def sides(self, table: _Table) -> Sides:
        """The table's metadata at the base, on the source and on the destination."""
        return (await self._read_sides(table))[1]

    async def _read_sides(self, table: _Table) -> tuple[dict[str, tuple[pb.Entry, dict[str, Any]]], Sides]:
        pointer_key = table.prefix + TABLE_POINTER
        pointers: dict[str, tuple[pb.Entry, dict[str, Any]]] = {}
        metadata: dict[str, dict[str, Any]] = {}
        for side, commit in (("base", self.base), ("source", self.source), ("destination", self.dest)):
            read = await self.read(commit, pointer_key, MAX_POINTER_BYTES)
            if read is None:
                raise Incompatible(f"the table does not exist on the {side}")
            try:
                pointer = json.loads(read.data)
            except ValueError:
                raise Incompatible(f"its pointer on the {side} is not JSON") from None
            if not isinstance(pointer, dict) or "metadata-key" not in pointer:
                raise Incompatible(f"the table was renamed or dropped on the {side}")
            pointers[side] = (read.entry, pointer)
            metadata_key = str(pointer["metadata-key"])
            if not metadata_key.startswith(table.prefix):
                # A file elsewhere (a table renamed to this name, or registered from another path)
                # would be read with the merger's rights into a file this table's writers read.
                raise Incompatible(f"its metadata file on the {side} is not under {table.prefix}")
            _, metadata[side] = await self.read_json(commit, metadata_key, "the metadata file")
        return pointers, Sides(metadata["base"], metadata["source"], metadata["destination"])

    async def table(self, table: _Table) -> list[api.MergeResolution]:
        """The resolutions that combine one table's two sides; Incompatible if they do not."""
        pointers, sides = await self._read_sides(table)
        try:
            from_source, from_dest = lists_needed(sides)
        except MALFORMED as exc:
            raise Incompatible(f"its metadata is malformed ({type(exc).__name__})") from None
        lists: dict[str, bytes] = {}
        for paths, commit in ((from_source, self.source), (from_dest, self.dest)):
            for path in paths:
                read = await self.read(commit, self._key_of(table, path), MAX_MANIFEST_LIST_BYTES)
                if read is None:
                    raise Incompatible(f"the manifest list {path} is missing")
                lists[path] = read.data
        # The new files are named by their ref-neutral addresses on the destination (and recorded
        # for them before the merge stages them), as the catalog names the files it writes.
        dest = Where(self.repository, self.destination, ())
        dest_root = dest.neutral_location("")
        dest_metadata_key = str(pointers["destination"][1]["metadata-key"])
        try:
            # Parsing and writing Avro is CPU work: off the event loop.
            combined = await self.ctx.backend.run(
                combine,
                sides,
                lists,
                lambda snapshot_id: f"{dest_root}{table.prefix}{METADATA_DIR}snap-{snapshot_id}-1-{uuid.uuid4()}.avro",
                metadata_location(dest, pointers["destination"][1], dest_metadata_key),
            )
        except MALFORMED as exc:
            raise Incompatible(f"its metadata or a manifest list is malformed ({type(exc).__name__})") from None
        return await self._write(table, combined, pointers, dest)

    def _key_of(self, table: _Table, path: str) -> str:
        """The key of an s3:// path in this repository (whichever ref it names), which must be
        one of the table's own files: a merge reads it with the merger's rights and writes what
        it read where the table's writers read it."""
        head = f"s3://{self.repository}/"
        if not path.startswith(head) or "/" not in path[len(head) :]:
            raise Incompatible(f"{path} is not an object of {self.repository}")
        key = path[len(head) :].partition("/")[2]
        if not key.startswith(table.prefix):
            raise Incompatible(f"the manifest list {path} is not under {table.prefix}")
        return key

    async def _write(
        self,
        table: _Table,
        combined: Combined,
        pointers: dict[str, tuple[pb.Entry, dict[str, Any]]],
        dest: Where,
    ) -> list[api.MergeResolution]:
        resolutions = []
        dest_root = dest.neutral_location("")
        for address, data in combined.manifest_lists.items():
            entry = await self._put(data, AVRO)
            resolutions.append(api.MergeResolution(key=address[len(dest_root) :], result=entry))
        version = len(combined.metadata.get("metadata-log", [])) + 1
        metadata_key = f"{table.prefix}{METADATA_DIR}{version:05d}-{uuid.uuid4()}{METADATA_SUFFIX}"
        metadata_entry = await self._put(json.dumps(combined.metadata, separators=(",", ":")).encode(), JSON)
        resolutions.append(api.MergeResolution(key=metadata_key, result=metadata_entry))
        # Recorded before the merge stages them: if the merge does not take them, the records
        # name bytes nothing holds (their names are new), which garbage collection removes.
        await self._record([(r.key, r.result) for r in resolutions])
        pointer_entry = await self._put(
            json.dumps(pointer_to(dest, metadata_key), separators=(",", ":")).encode(), JSON
        )
        resolutions.append(
            api.MergeResolution(
                key=table.prefix + TABLE_POINTER,
                expected_source=pointers["source"][0],
                expected_destination=pointers["destination"][0],
                result=pointer_entry,
            )
        )
        # A metadata file both sides wrote under one name (the catalog names them by a UUID, so
        # hardly ever): the destination's stays; the combined metadata's log names its own.
        for key in table.metadata_files:
            source = await self.read(self.source, key, MAX_METADATA_BYTES)
            on_dest = await self.read(self.dest, key, MAX_METADATA_BYTES)
            resolution = api.MergeResolution(key=key)
            if source is not None:
                resolution.expected_source.CopyFrom(source.entry)
            if on_dest is not None:
                resolution.expected_destination.CopyFrom(on_dest.entry)
                resolution.result.CopyFrom(on_dest.entry)
            resolutions.append(resolution)
        return resolutions

    async def _record(self, entries: list[tuple[str, pb.Entry]]) -> None:
        """Record the merge's new files for their ref-neutral addresses (graveler's index)."""
        backend = self.ctx.backend
        place = await backend.place(self.repository, self.ctx.deadline)
        request = api.RecordNeutralEntriesRequest(
            repository=self.repository,
            repository_id=place.repository_id,
            branch=self.destination,
            entries=[api.EntryInfo(key=key, entry=entry) for key, entry in entries],
        )
        await self.ctx.call(backend.graveler.RecordNeutralEntries, request)

    async def _put(self, data: bytes, content_type: str) -> pb.Entry:
        """data at a fresh physical address of the repository's namespace, not staged: the entry
        that names it. If the merge does not take it, garbage collection removes it."""
        backend = self.ctx.backend
        namespace = await backend.namespace(self.repository, self.ctx.deadline)
        address = new_physical_address()
        written = await backend.write_bytes(namespace, address, io.BytesIO(data), len(data))
        stamp = Timestamp()
        stamp.FromNanoseconds(time.time_ns())
        return pb.Entry(
            physical_address=address,
            size=len(data),
            etag=written.etag.strip('"'),
            content_type=content_type,
            last_modified=stamp,
        )
