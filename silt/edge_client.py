"""The edge's client of graveler, auth and the object store, one for the S3 gateway and the REST API.

Both front ends on the edge port write objects the same way: new bytes at a fresh physical
address in the repository's storage namespace (`write_bytes` inside `new_bytes`, which leaves
nothing there if the write or a check on it fails), then one StageEntry through `staging`
(silt/stage_batching.py: concurrent writes to a branch share a call) in `stage_new_bytes`,
which deletes the bytes again only when graveler certainly did not take the entry in any
attempt, judged from the client's own signals (silt/write_outcome.py; the uncommitted sweep of
garbage collection removes what a timeout, a lost answer or a crash leaves); bytes nothing refers to
are deleted with `delete_bytes`. Each front end keeps its own service user (svc-gateway,
svc-api), its own history source and its own errors: graveler's answers are mapped to S3 codes
or lakeFS statuses at each edge, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from silt.block import BlockAdapter
from silt.block.adapter import PutResult
from silt.block.external import ExternalFiles, ObjectReader, external_prefixes, source_reader
from silt.config import Config
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2, graveler_pb2_grpc
from silt.history_events.emitter import EventEmitter
from silt.repository_place import RepositoryPlace
from silt.rpc.authority import AioCachedAuthority, AioRemoteAuthority, Clock, TTLCache
from silt.rpc.signing import Credentials, service_aio_channels
from silt.stage_batching import StageBatcher
from silt.telemetry.stores import open_observed_adapter
from silt.write_outcome import SentWhenReady, certainly_not_applied

T = TypeVar("T")
# One graveler or auth call's time limit, and the pauses before retrying a graveler call that
# was never sent because its channel was not READY (a restarting graveler is reachable again
# within moments). A call that was sent is never retried by the edge: it may have been applied,
# and applying it again after a later write was acknowledged would undo that write.
CALL_TIMEOUT = 30.0
UNAVAILABLE_RETRY_DELAYS = (0.1, 0.3)
# Threads for the blocking block adapter (reads, deletes, a small body's one write).
IO_THREADS = 32
# Bodies declared this small are taken whole, and objects this small are read in one piece: one
# trip to a worker thread instead of one per read.
SMALL_BODY = 256 * 1024


class Readable(Protocol):
    """What a block adapter reads an object's bytes from: a binary file, or a body's reader."""

    def read(self, size: int = -1, /) -> bytes: ...


class EntryReads(Protocol):
    """Graveler's StatEntry and ListEntries answered in the edge process from the KV store and the
    committed ranges (engine/reads.py, composed by edge/app.py): blocking, so they run
    in the client's threads; errors are silt.errors, as graveler's engine raises them."""

    def StatEntry(self, request: graveler_pb2.StatEntryRequest, *, timeout: float) -> graveler_pb2.EntryInfo: ...

    def ListEntries(
        self, request: graveler_pb2.ListEntriesRequest, *, timeout: float
    ) -> graveler_pb2.ListEntriesResponse: ...

    def close(self) -> None: ...


class EdgeClient:
    """Graveler, auth's decisions and the object store, as one front end of the edge reaches them."""

    def __init__(
        self,
        config: Config,
        credentials: Credentials,
        source: ev.HistoryEventSource.ValueType,
        thread_name_prefix: str,
        clock: Clock = time.monotonic,
        reads: EntryReads | None = None,
    ) -> None:
        self.auth_channel, self.graveler_channel = service_aio_channels(config, credentials)
        self.graveler = graveler_pb2_grpc.GravelerServiceStub(self.graveler_channel)
        # Graveler's channel, gated: a call is sent only once it is READY, so that one never sent
        # is known not applied (the one failure a front end retries by itself).
        self.gate = SentWhenReady(self.graveler, self.graveler_channel)
        # StageEntry for writes of new bytes: concurrent ones to a branch share a call, each gated.
        self.staging = StageBatcher(self.gate)
        # Entries read without a call to graveler, when the edge composed a reader (None: by calls).
        self.reads = reads
        ttl = config.auth.cache_ttl_seconds
        self.authority = AioCachedAuthority(AioRemoteAuthority(self.auth_channel, CALL_TIMEOUT), ttl, clock)
        # Object bytes go straight between the client and the object store; the adapter is
        # blocking, so it runs in threads of its own and a slow disk never stalls the event loop.
        self.adapter: BlockAdapter = open_observed_adapter(config.blockstore)
        # Files of the local blockstore's import prefixes, which imported entries may name.
        self.external_files = ExternalFiles(external_prefixes(config.blockstore))
        self.pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix=thread_name_prefix)
        # A repository's namespace with its identity: what a write's bytes went under is what
        # its StageEntry names (silt/repository_place.py).
        self._places: TTLCache[str, RepositoryPlace] = TTLCache(ttl, clock=clock)
        # Refs known to be branches, so that a write costs no extra call. Briefly: a deleted
        # branch is then refused by graveler itself when the entry is staged.
        self._branches: TTLCache[tuple[str, str], bool] = TTLCache(ttl, clock=clock)
        # Object reads, writes and deletes served, queued for graveler off the request path
        # (started by the app's lifespan, on its event loop).
        self.history = EventEmitter(source, self.graveler, enabled=config.graveler.history.enabled)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """A blocking call (the block adapter, KV) in a worker thread, in the request's context
        (its trace span and request id follow it)."""
        return await self.run_in(self.pool, fn, *args)

    @staticmethod
    async def run_in(pool: Executor, fn: Callable[..., T], *args: Any) -> T:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(pool, context.run, fn, *args)

    # --- what is cached ---------------------------------------------------------------------

    def cached_place(self, repository: str) -> RepositoryPlace | None:
        return self._places.get(repository)

    def remember_place(self, repository: str, place: RepositoryPlace) -> None:
        self._places.put(repository, place)

    def forget_namespace(self, repository: str) -> None:
        self._places.put(repository, None)  # type: ignore[arg-type]

    async def replacement_of(
        self, repository: str, place: RepositoryPlace, look_up: Callable[[str], Awaitable[RepositoryPlace | None]]
    ) -> RepositoryPlace | None:
        """The repository now named `repository` when it is another than `place` (one deleted and
        another created under the name since); None when the name names none now or the same one.
        The remembered place is forgotten and looked up afresh with `look_up`, the front end's own
        lookup, which answers None for a missing repository in its own terms."""
        self.forget_namespace(repository)
        current = await look_up(repository)
        if current is None or current.repository_id == place.repository_id:
            return None
        return current

    async def remembered_replaced(
        self, repository: str, look_up: Callable[[str], Awaitable[RepositoryPlace | None]]
    ) -> bool:
        """Whether the repository this edge remembers under the name was deleted and another
        created under it since (then the new one is remembered instead)."""
        remembered = self.cached_place(repository)
        return remembered is not None and await self.replacement_of(repository, remembered, look_up) is not None

    def known_branch(self, repository: str, branch: str) -> bool:
        return bool(self._branches.get((repository, branch)))

    def remember_branch(self, repository: str, branch: str) -> None:
        self._branches.put((repository, branch), True)

    def entry_reader(self, namespace: str, entry: Any) -> ObjectReader:
        """What reads an entry's bytes (get, get_range, stat, or as a copy's source): the block
        adapter, or for an imported object one that reads its source only while it is as imported
        and answers SourceChanged otherwise (silt/block/external.py)."""
        return source_reader(self.adapter, self.external_files, namespace, entry)

    # --- objects: write bytes, stage them, delete them -------------------------------------

    @contextlib.asynccontextmanager
    async def new_bytes(self, namespace: str, address: str) -> AsyncIterator[None]:
        """Bytes written at `address` inside this block, with every check on them: nothing is
        left there if the block fails, whatever the failure (the body's own error included)."""
        try:
            yield
        except BaseException:
            await self.delete_bytes(namespace, address)
            raise

    async def write_bytes(
        self, namespace: str, address: str, stream: Readable, size: int | None, pool: Executor | None = None
    ) -> PutResult:
        """Write an object's bytes at `address`, in `pool` (the I/O threads by default)."""
        return await self.run_in(pool or self.pool, self.adapter.put, namespace, address, stream, size)

    async def delete_bytes(self, namespace: str, address: str) -> None:
        """Delete bytes no entry refers to; a failure leaves them to garbage collection."""
        with contextlib.suppress(Exception):
            await self.run(self.adapter.delete, namespace, address)

    async def stage_new_bytes(self, stage: Callable[[], Awaitable[object]], namespace: str, address: str) -> None:
        """Stage an entry for bytes this request just wrote at `address`, by the edge's own
        StageEntry call(s); if graveler certainly did not take it in any attempt (a refusal, a
        condition that did not hold, a write never sent: silt/write_outcome.py), delete the bytes
        rather than leave an object no entry refers to. Otherwise they stay, even when the client
        is answered an error: an entry may point at them."""
        try:
            await stage()
        except BaseException as exc:
            if certainly_not_applied(exc):
                await self.delete_bytes(namespace, address)
            raise

    async def read_entries(self, method: Callable[..., T], request: Any, timeout: float = CALL_TIMEOUT) -> T:
        """One of self.reads' methods, in a worker thread, within a graveler call's time limit."""
        return await self.run(functools.partial(method, request, timeout=timeout))

    async def close(self) -> None:
        await self.history.close()  # its last flush still needs the graveler channel
        await self.auth_channel.close()
        await self.graveler_channel.close()
        self.pool.shutdown(wait=False)
        if self.reads is not None:
            self.reads.close()
