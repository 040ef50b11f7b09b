"""Silt's own object preview for the web UI: a Parquet object's schema and first rows
(preview/parquet.py), so the browser never downloads a whole file to show it. The decoding runs
in a bounded child process (preview/sandbox.py), never in this one."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

from fastapi import APIRouter
from fastapi.responses import Response

from edge.api.context import Ctx
from edge.api.errors import ApiError
from edge.api.objects.write import checked_path
from edge.api.preview import parquet
from edge.api.preview.sandbox import Refused, Sandbox
from edge.api.routes.objects import REF_OBJECTS, ObjectPath
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import READ_OBJECT
from silt.objects import split_address

router = APIRouter()

# Previews at once in this process: each holds a worker thread (that also serves object reads)
# waiting on its child, which may read 16 MiB and use MEMORY_BYTES. Beyond this many, 503.
MAX_PREVIEWS = 4
# Of them, at once for one user: one user's slow queries leave the others slots.
MAX_PREVIEWS_PER_USER = 2


class PreviewGate:
    """At most `limit` previews at once, `per_user` of them one user's; a preview beyond them is
    refused, never queued."""

    def __init__(self, limit: int = MAX_PREVIEWS, per_user: int = MAX_PREVIEWS_PER_USER) -> None:
        self._limit = limit
        self._per_user = per_user
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}

    @contextlib.contextmanager
    def enter(self, user: str) -> Iterator[None]:
        with self._lock:
            if sum(self._running.values()) >= self._limit:
                raise ApiError(
                    503, f"{self._limit} previews, diffs or queries are running on this server: retry shortly"
                )
            if self._running.get(user, 0) >= self._per_user:
                raise ApiError(
                    503,
                    f"{self._per_user} of your previews, diffs or queries are running: retry shortly, when one is done",
                )
            self._running[user] = self._running.get(user, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._running[user] -= 1
                if not self._running[user]:
                    del self._running[user]


gate = PreviewGate()
sandbox = Sandbox()


def _answer(key: str, read_range: Any, size: int) -> bytes:
    """The preview as the response's JSON, built in the worker thread as well: an answer of
    megabytes serialized on the event loop would stall it."""
    try:
        answer = sandbox.preview(read_range, size, parquet.MAX_ROWS, parquet.MAX_BYTES_READ)
    except Refused as refused:
        raise ApiError(refused.status, refused.message) from None
    return json.dumps({"path": key, **answer}, ensure_ascii=False, separators=(",", ":")).encode()


@router.get(REF_OBJECTS + "/preview")
async def preview_object(ctx: Ctx, repository: str, ref: str, path: ObjectPath = None) -> Response:
    key = checked_path(path)
    await ctx.authorize_key(READ_OBJECT, repository, key)
    info = await ctx.backend.stat_entry(api.StatEntryRequest(repository=repository, ref=ref, key=key), ctx.deadline)
    entry = info.entry
    backend = ctx.backend
    repository_namespace = await backend.namespace(repository, ctx.deadline)
    namespace, address = split_address(repository_namespace, entry.physical_address)
    source = backend.entry_reader(repository_namespace, entry)

    def read_range(start: int, end: int) -> BinaryIO:
        return source.get_range(namespace, address, start, end)

    with gate.enter(ctx.caller.user_id):
        body = await backend.run(_answer, key, read_range, int(entry.size))
    return Response(body, media_type="application/json")
