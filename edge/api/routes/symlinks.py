"""lakeFS's createSymlinkFile: Hive-style symlink manifests for a ref's objects.

For each directory under `location` in the ref, one text file lists the full physical address
of every object directly in it, one a line, so that Hive, Presto or Trino (SymlinkTextInputFormat)
read a table's files straight from the object store. lakeFS writes them under `_lakefs/` in the
storage namespace; Silt writes them under `_silt/symlinks/`, where its own files live and garbage
collection never looks (jobs/gc/listing.py), laid out below it as lakeFS lays them out:

    <storage namespace>/_silt/symlinks/<repository>/<ref>/<directory>/symlink.txt

and answers that root as the StorageURI, to which clients append `<repository>/<ref>/<path>`.
"""

from __future__ import annotations

import io
from typing import Annotated

from fastapi import APIRouter, Query, Response
from lakefs_sdk.models import StorageURI

from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request
from edge.api.responses import model_response
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import WRITE_REPO
from silt.objects import full_address

router = APIRouter()

SYMLINKS_PREFIX = "_silt/symlinks"
# What one call does, bounded so that it fits the request's deadline and the API's memory; a
# table beyond a bound is given its symlinks one partition (a narrower location) at a time.
# Objects listed (400 beyond):
MAX_SYMLINK_OBJECTS = 100_000
# Symlink files written, one a directory (400 beyond):
MAX_SYMLINK_FILES = 1_000
# Bytes of all the files written together, held in memory until written (413 beyond):
MAX_SYMLINK_BYTES = 32 * 1024 * 1024
LIST_PAGE = 1000
SYMLINK_FILE = "symlink.txt"
NARROWER = "create symlinks for narrower locations (e.g. one partition at a time)"


class Manifests:
    """The symlink files of one call, by directory, refused as soon as a bound is passed: before
    anything is written, and before the listing is read on."""

    def __init__(self, location: str) -> None:
        self._location = location
        self.directories: dict[str, list[str]] = {}
        self._objects = 0
        self._bytes = 0

    def add(self, key: str, address: str) -> None:
        self._objects += 1
        if self._objects > MAX_SYMLINK_OBJECTS:
            raise bad_request(f"location {self._location!r} holds more than {MAX_SYMLINK_OBJECTS} objects: {NARROWER}")
        directory = key.rpartition("/")[0]
        addresses = self.directories.get(directory)
        if addresses is None:
            if len(self.directories) >= MAX_SYMLINK_FILES:
                raise bad_request(
                    f"location {self._location!r} holds objects in more than {MAX_SYMLINK_FILES} directories,"
                    f" one symlink file each: {NARROWER}"
                )
            addresses = self.directories[directory] = []
        # Each address and the newline after it (one too many per file: a bound, not a count).
        self._bytes += len(address.encode()) + 1
        if self._bytes > MAX_SYMLINK_BYTES:
            raise ApiError(
                413,
                f"the symlink files of location {self._location!r} would exceed {MAX_SYMLINK_BYTES} bytes: {NARROWER}",
            )
        addresses.append(address)


def _symlink_key(repository: str, ref: str, directory: str) -> str:
    """Where a directory's manifest goes, below the namespace; refused (400) if a part of it would
    be empty, `.` or `..` (a key such as `a/../b` must not write outside its ref's folder)."""
    parts = [repository, ref, *(directory.split("/") if directory else [])]
    if any(part in ("", ".", "..") for part in parts):
        raise bad_request(
            f"cannot write a symlink file for directory {directory!r} of ref {ref!r}: a path part is empty, '.' or '..'"
        )
    return "/".join([SYMLINKS_PREFIX, *parts, SYMLINK_FILE])


@router.post("/repositories/{repository}/refs/{branch}/symlink", status_code=201)
async def create_symlink_file(
    ctx: Ctx,
    repository: str,
    branch: str,  # lakeFS's name: any ref is listed, as lakeFS lists it
    location: Annotated[str, Query(max_length=1024)] = "",
) -> Response:
    # lakeFS asks for fs:WriteObject; the files list the ref's objects unfiltered, so reading
    # every key is asked too.
    await ctx.authorize(WRITE_REPO, repository)
    await ctx.authorize_every_key(repository)
    backend = ctx.backend
    namespace = await backend.namespace(repository, ctx.deadline)
    manifests = Manifests(location)
    after = ""
    while True:
        request = api.ListEntriesRequest(
            repository=repository, ref=branch, prefix=location, after=after, amount=LIST_PAGE
        )
        page = await backend.list_entries(request, ctx.deadline)
        for item in page.items:
            if not item.common_prefix:
                manifests.add(item.key, full_address(namespace, item.entry.physical_address))
        if not page.has_more or not page.items:
            break
        after = page.items[-1].key
    # Every key is checked before any file is written: a refusal writes nothing.
    files = [(_symlink_key(repository, branch, d), "\n".join(a).encode()) for d, a in manifests.directories.items()]
    for key, data in files:
        await backend.run(backend.adapter.put, namespace, key, io.BytesIO(data), len(data))
    return model_response(StorageURI(location=namespace.rstrip("/") + "/" + SYMLINKS_PREFIX), 201)
