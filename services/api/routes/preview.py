"""Silt's own object preview for the web UI: a Parquet object's schema and first rows
(parquet_preview.py), so the browser never downloads a whole file to show it. The decoding runs
in a bounded child process (preview_sandbox.py), never in this one."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

from fastapi import APIRouter
from fastapi.responses import Response

from services.api import parquet_preview
from services.api.context import Ctx
from services.api.errors import ApiError
from services.api.objects_write import checked_path
from services.api.preview_sandbox import Refused, Sandbox
from services.api.routes.objects import REF_OBJECTS, ObjectPath
from silt.actions import READ_REPO
from silt.graveler.v1 import graveler_pb2 as api
from silt.objects import split_address

router = APIRouter()

# Previews at once in this process: each holds a worker thread (that also serves object reads)
# waiting on its child, which may read 16 MiB and use MEMORY_BYTES. Beyond this many, 503.
MAX_PREVIEWS = 4


class PreviewGate:
    """At most `limit` previews at once; a preview beyond them is refused, never queued."""

    def __init__(self, limit: int = MAX_PREVIEWS) -> None:
        self._slots = threading.BoundedSemaphore(limit)

    @contextlib.contextmanager
    def enter(self) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            raise ApiError(503, f"{MAX_PREVIEWS} previews, diffs or queries are running on this server: retry shortly")
        try:
            yield
        finally:
            self._slots.release()


gate = PreviewGate()
sandbox = Sandbox()


def _answer(key: str, read_range: Any, size: int) -> bytes:
    """The preview as the response's JSON, built in the worker thread as well: an answer of
    megabytes serialized on the event loop would stall it."""
    try:
        answer = sandbox.preview(read_range, size, parquet_preview.MAX_ROWS, parquet_preview.MAX_BYTES_READ)
    except Refused as refused:
        raise ApiError(refused.status, refused.message) from None
    return json.dumps({"path": key, **answer}, ensure_ascii=False, separators=(",", ":")).encode()


@router.get(REF_OBJECTS + "/preview")
async def preview_object(ctx: Ctx, repository: str, ref: str, path: ObjectPath = None) -> Response:
    await ctx.authorize(READ_REPO, repository)
    key = checked_path(path)
    info = await ctx.call(ctx.backend.graveler.StatEntry, api.StatEntryRequest(repository=repository, ref=ref, key=key))
    entry = info.entry
    backend = ctx.backend
    repository_namespace = await backend.namespace(repository, ctx.deadline)
    namespace, address = split_address(repository_namespace, entry.physical_address)
    source = backend.entry_reader(repository_namespace, entry)

    def read_range(start: int, end: int) -> BinaryIO:
        return source.get_range(namespace, address, start, end)

    with gate.enter():
        body = await backend.run(_answer, key, read_range, int(entry.size))
    return Response(body, media_type="application/json")
