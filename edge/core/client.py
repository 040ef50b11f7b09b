"""The edge's client of graveler, auth and the object store, one for the S3 gateway and the REST API.

Both front ends on the edge port write an object the same way, in one call: `write_object`
checks that the ref is a branch, writes the body the front end hands over (a CheckedBody,
edge/core/object_writes.py, which raises the front end's own errors) at a fresh physical address
in the repository's storage namespace (inside `new_bytes`, which leaves nothing there if the
write or a check on it fails), then stages the entry with one StageEntry through `staging`
(edge/core/stage_batching.py: concurrent writes to a branch share a call) in `stage_new_bytes`.
That deletes the bytes again only when graveler certainly did not take the entry in any
attempt, judged from the client's own signals (edge/core/write_outcome.py; the uncommitted sweep
of garbage collection removes what a timeout, a lost answer or a crash leaves); bytes nothing
refers to are deleted with `delete_bytes`. A copy is staged in one call too (`copy_entry`).
Each front end keeps its own service user (svc-gateway, svc-api), its own history source and
its own errors: graveler's answers are mapped to S3 codes or lakeFS statuses at each edge, not
here.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import io
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio
from google.protobuf.timestamp_pb2 import Timestamp

from edge.core.filtered_scan import ScanCursors
from edge.core.object_reads import read_whole
from edge.core.object_writes import (
    BodyReader,
    CheckedBody,
    ConditionFailed,
    NoSuchBranch,
    NotABranch,
    ObjectWriteFailed,
    ShortBody,
    WritePhase,
    Written,
)
from edge.core.stage_batching import StageBatcher
from edge.core.write_outcome import Attempts, NotApplied, SentWhenReady, certainly_not_applied, not_applied_error
from engine.reads import ReadWouldWait
from silt.block import BlockAdapter
from silt.block.adapter import PutResult
from silt.block.external import ExternalFiles, ObjectReader, external_prefixes, source_reader
from silt.config import Config
from silt.errors import InvalidArgument, NotFound, SiltError, Unavailable
from silt.errors import NotApplied as CertainlyNotApplied
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2, graveler_pb2_grpc
from silt.graveler.v1.model_pb2 import Entry
from silt.history_events.emitter import EventEmitter
from silt.key_scope import KeyScope
from silt.objects import new_physical_address, split_address
from silt.repository_place import RepositoryPlace
from silt.rpc.authority import AioCachedAuthority, AioRemoteAuthority, Clock, TTLCache
from silt.rpc.errors import error_from_rpc
from silt.rpc.signing import Credentials, service_aio_channels
from silt.telemetry.stores import open_observed_adapter

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

# Answers of a write that say what they say even after an attempt that may have been applied:
# ABORTED (a conditional write raced another across a commit: it may stand) and
# RESOURCE_EXHAUSTED (graveler sheds load).
_RETRYABLE_ANSWERS = frozenset({grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED})


class MaybeApplied(Unavailable):
    """A graveler call that failed in a way that says nothing final: it may have been applied
    (the connection broke after it was sent, a write timed out, or graveler's KV could not settle
    a compare-and-set: OutcomeUnknown). Clients retry it. Not overload: however long the call
    took, only graveler's RESOURCE_EXHAUSTED (ResourceExhausted) asks clients to slow down."""


def call_failure(exc: grpc.aio.AioRpcError, attempts: Attempts, changes: bool) -> SiltError:
    """What a failed call to graveler says, as a silt error: graveler's refusal as its engine
    raised it, or what the edge can tell of an attempt that may have been applied."""
    unavailable = exc.code() == grpc.StatusCode.UNAVAILABLE
    sent = not isinstance(exc, NotApplied)
    error: SiltError
    if (changes and attempts.maybe_applied and exc.code() not in _RETRYABLE_ANSWERS) or (unavailable and sent):
        error = MaybeApplied(f"graveler: the call may have been applied: {exc.details()}")
    else:
        error = error_from_rpc(exc)
    # Whether graveler certainly did not apply the call in any attempt (edge/core/write_outcome.py).
    error.not_applied = attempts.not_applied  # type: ignore[attr-defined]
    return error


class Readable(Protocol):
    """What a block adapter reads an object's bytes from: a binary file, or a body's reader."""

    def read(self, size: int = -1, /) -> bytes: ...


class EntryReads(Protocol):
    """Graveler's StatEntry, ListEntries and GetNeutralEntry answered in the edge process from the KV store and the
    committed ranges (engine/reads.py, composed by edge/app.py): blocking, so they run in the
    client's threads, but for point reads of this machine's disk (EdgeClient.read_entry); errors
    are silt.errors, as graveler's engine raises them."""

    def StatEntry(
        self, request: graveler_pb2.StatEntryRequest, *, timeout: float, wait: bool = True
    ) -> graveler_pb2.EntryInfo:
        """wait=False: ReadWouldWait (engine/reads.py) rather than anything that may take long."""
        ...

    def ListEntries(
        self, request: graveler_pb2.ListEntriesRequest, *, timeout: float
    ) -> graveler_pb2.ListEntriesResponse: ...

    def GetNeutralEntry(
        self, request: graveler_pb2.GetNeutralEntryRequest, *, timeout: float
    ) -> graveler_pb2.EntryInfo: ...

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
        # Point reads on the event loop itself, not in a worker thread (read_entry): only where the
        # KV store and the object store are this machine's disk, whose reads neither wait on a
        # network nor for long, and no import prefix (the blockstore's or graveler's) lets an
        # entry name a file elsewhere (an import's directory may be a network mount). A trip to a
        # thread and back costs two wake-ups, more CPU on a virtual machine than the read itself
        # (docs/benchmarks.md).
        self.inline_reads = (
            reads is not None
            and config.gateways.s3.inline_local_reads
            and config.database.type == "local"
            and config.blockstore.type == "local"
            and not external_prefixes(config.blockstore)
            and not config.graveler.allowed_import_prefixes
        )
        ttl = config.auth.cache_ttl_seconds
        self.authority = AioCachedAuthority(AioRemoteAuthority(self.auth_channel, CALL_TIMEOUT), ttl, clock)
        # Object bytes go straight between the client and the object store; the adapter is
        # blocking, so it runs in threads of its own and a slow disk never stalls the event loop.
        self.adapter: BlockAdapter = open_observed_adapter(config.blockstore)
        # Files of the local blockstore's import prefixes, which imported entries may name.
        self.external_files = ExternalFiles(external_prefixes(config.blockstore))
        # Where a filtered listing stopped, sealed for the caller to hand back (filtered_scan.py).
        self.scan_cursors = ScanCursors.from_secret(credentials.secret_access_key.get_secret_value())
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

    async def graveler_call(
        self,
        method: Any,
        request: Any,
        deadline: float | None = None,
        *,
        changes: bool = False,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> Any:
        """One graveler call within deadline (time.monotonic(); CALL_TIMEOUT from now if None),
        sent only on a READY channel and retried briefly while it was not (never sent: certainly
        not applied, edge/core/write_outcome.py). A call that was sent is never sent again:
        applying a write twice, after another write was acknowledged in between, would undo that
        one; the client retries instead. Its failure is a silt error (call_failure) whose
        `not_applied` says whether graveler certainly did not apply it in any attempt.
        changes: a write, which fails MaybeApplied once any attempt may have been applied: a
        timeout or an internal error then says nothing final, and a refusal may be the earlier
        attempt's own doing. Each front end answers these errors in its own protocol's terms.
        metadata: extra headers of the call (the end user's address, silt/rpc/signing.py)."""
        until = time.monotonic() + CALL_TIMEOUT if deadline is None else deadline
        attempts = Attempts()
        for delay in (*UNAVAILABLE_RETRY_DELAYS, None):
            try:
                await self.gate.ready(max(until - time.monotonic(), 0.0))
                left = until - time.monotonic()
                if left <= 0:
                    raise not_applied_error(
                        grpc.StatusCode.DEADLINE_EXCEEDED, "graveler did not answer within the request's deadline"
                    )
                if metadata:
                    return await method(request, timeout=left, metadata=metadata)
                return await method(request, timeout=left)
            except grpc.aio.AioRpcError as exc:
                attempts.failed(exc)
                unsent_unavailable = isinstance(exc, NotApplied) and exc.code() == grpc.StatusCode.UNAVAILABLE
                if unsent_unavailable and delay is not None and until - time.monotonic() > delay:
                    await asyncio.sleep(delay)
                    continue
                raise call_failure(exc, attempts, changes) from None
        raise AssertionError("unreachable: the last attempt raises")

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

    async def look_up_place(self, repository: str, deadline: float | None = None) -> RepositoryPlace:
        """The storage namespace of a repository with its identity, remembered briefly: new bytes
        written in that namespace are staged naming that identity. NotFound (what="repository")
        if there is none."""
        cached = self.cached_place(repository)
        if cached is None:
            request = graveler_pb2.GetRepositoryRequest(name=repository)
            cached = RepositoryPlace.of(await self.graveler_call(self.graveler.GetRepository, request, deadline))
            self.remember_place(repository, cached)
        return cached

    async def replacement_of(
        self, repository: str, place: RepositoryPlace, deadline: float | None = None
    ) -> RepositoryPlace | None:
        """The repository now named `repository` when it is another than `place` (one deleted and
        another created under the name since); None when the name names none now or the same one.
        The remembered place is forgotten and looked up afresh."""
        self.forget_namespace(repository)
        try:
            current = await self.look_up_place(repository, deadline)
        except NotFound as exc:
            if exc.what == "repository":
                return None
            raise
        return None if current.repository_id == place.repository_id else current

    async def remembered_replaced(self, repository: str, deadline: float | None = None) -> bool:
        """Whether the repository this edge remembers under the name was deleted and another
        created under it since (then the new one is remembered instead)."""
        remembered = self.cached_place(repository)
        return remembered is not None and await self.replacement_of(repository, remembered, deadline) is not None

    def known_branch(self, repository: str, branch: str) -> bool:
        return bool(self._branches.get((repository, branch)))

    def remember_branch(self, repository: str, branch: str) -> None:
        self._branches.put((repository, branch), True)

    async def writable_place(
        self, repository: str, ref: str, deadline: float | None = None, *, by_name: bool = False
    ) -> RepositoryPlace:
        """Where a write to repository/ref puts its bytes, once ref is known to be a branch:
        NotFound (what="repository") without the repository, NoSuchBranch without the branch,
        NotABranch for a tag, a commit or a ref expression. Both lookups are remembered briefly,
        so a write to a known branch costs no graveler call here.
        by_name: the branch looked up by its name (GetBranch), any refusal as graveler gives it,
        as lakeFS answers a write to a name that is no branch; not resolved as a ref."""
        place = await self.look_up_place(repository, deadline)
        if self.known_branch(repository, ref):
            return place
        if by_name:
            named = graveler_pb2.GetBranchRequest(repository=repository, name=ref)
            await self.graveler_call(self.graveler.GetBranch, named, deadline)
            self.remember_branch(repository, ref)
            return place
        if any(mark in ref for mark in "~^@"):
            # An ancestor, or a branch's committed state, names a commit; no branch name has these.
            raise NotABranch(f"{ref!r} is a ref expression, not a branch: only branches can be written")
        request = graveler_pb2.ResolveRefRequest(repository=repository, ref=ref)
        try:
            resolved = await self.graveler_call(self.graveler.ResolveRef, request, deadline)
        except (NotFound, InvalidArgument) as exc:
            if isinstance(exc, NotFound) and exc.what == "repository":
                raise
            raise NoSuchBranch(f"repository {repository} has no branch {ref!r}") from None
        if resolved.type != graveler_pb2.ResolveRefResponse.REF_TYPE_BRANCH:
            raise NotABranch(f"{ref!r} is not a branch of {repository}: only branches can be written")
        self.remember_branch(repository, ref)
        return place

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

    async def receive(
        self, body: CheckedBody, put: Callable[..., PutResult], *args: Any, pool: Executor | None = None
    ) -> Written:
        """Run a block adapter's write (put(*args, stream, size)) fed from body, then the body's
        own checks on the whole of it. A body declared small is read first and written in one
        trip to the I/O threads instead of one per read; a larger one is streamed from pool's
        threads (the I/O threads by default). ShortBody when the body ends before its declared
        size; the body's own error as it raised it."""
        await body.start()
        declared = body.declared
        if declared is not None and declared <= SMALL_BODY:
            data = await _read_up_to(body, declared)
            if len(data) != declared:
                raise ShortBody(f"the body ended after {len(data)} of its {declared} bytes")
            result = await self.run(put, *args, io.BytesIO(data), declared)
            size = declared
        else:
            reader = BodyReader(body, asyncio.get_running_loop(), declared)
            try:
                result = await self.run_in(pool or self.pool, put, *args, reader, declared)
            except Exception as exc:
                if reader.error is not None:
                    raise reader.error from None
                if isinstance(exc, InvalidArgument) and declared is not None and reader.size < declared:
                    raise ShortBody(f"the body ended after {reader.size} of its {declared} bytes") from None
                raise
            finally:
                reader.close()
            size = reader.size
        metadata = await body.finish(result)
        return Written(size, result.etag.strip('"'), metadata)

    async def write_object(
        self,
        request: graveler_pb2.StageEntryRequest,
        body: CheckedBody,
        deadline: float | None = None,
        *,
        pool: Executor | None = None,
        branch_by_name: bool = False,
        absent_first: bool = False,
    ) -> RepositoryPlace:
        """A whole object write: request.branch checked to be a branch (writable_place, by_name
        as branch_by_name says), the body written at a fresh physical address of the repository's
        namespace (nothing is left there if the body or the store fails), request.entry completed
        with what was written (address, size, ETag, the body's content type and metadata, the
        time) and staged as stage_new_bytes stages it.
        absent_first: a write with request.if_absent over an entry that exists is refused
        (ConditionFailed) before the body is started, not only when graveler stages it.
        Returns where the entry was staged; request.entry names what was. A silt error is raised
        as ObjectWriteFailed, which says in which phase; the body's own errors as it raised them."""
        try:
            place = await self.writable_place(request.repository, request.branch, deadline, by_name=branch_by_name)
            if absent_first and request.if_absent and await self._entry_exists(request, deadline):
                raise ConditionFailed(f"{request.key} already exists on {request.branch}")
        except SiltError as exc:
            raise ObjectWriteFailed(WritePhase.TARGET, exc) from exc
        address = new_physical_address()
        try:
            async with self.new_bytes(place.namespace, address):
                written = await self.receive(body, self.adapter.put, place.namespace, address, pool=pool)
        except SiltError as exc:
            raise ObjectWriteFailed(WritePhase.BYTES, exc) from exc
        entry = request.entry
        entry.physical_address = address
        entry.size = written.size
        entry.etag = written.etag
        if body.content_type:
            entry.content_type = body.content_type
        entry.metadata.update(written.metadata)
        entry.last_modified.CopyFrom(_now())
        try:
            return await self.stage_new_bytes(request, place, deadline)
        except SiltError as exc:
            raise ObjectWriteFailed(WritePhase.STAGING, exc) from exc

    async def copy_entry(
        self,
        request: graveler_pb2.StageEntryRequest,
        place: RepositoryPlace,
        source: Entry,
        source_namespace: str = "",
        read_in: str = "",
        deadline: float | None = None,
    ) -> RepositoryPlace:
        """A copy of `source` staged in one call: request.entry (source's copy as the front end
        wants it: its time, its metadata) staged at request.key on request.branch, a branch of the repository at `place`
        (writable_place). Within that repository (no source_namespace) the entry shares the
        source's bytes (objects are immutable; garbage collection keeps bytes any entry names)
        and names `read_in`, the identity of the repository looked up before the source was read
        (graveler refuses the write if it is another by now; "" not checked). From another
        repository's namespace the bytes are first copied to a fresh address of place.namespace
        (with the reader entry_reader gives, so an imported source is read only as imported) and
        staged as stage_new_bytes stages new bytes. Returns where the entry was staged; a silt
        error is raised as ObjectWriteFailed (BYTES: the copy, STAGING: the staging)."""
        if not source_namespace:
            request.repository_id = read_in
            try:
                await self.graveler_call(self.staging.StageEntry, request, deadline, changes=True)
            except SiltError as exc:
                raise ObjectWriteFailed(WritePhase.STAGING, exc) from exc
            return place
        source_ns, source_address = split_address(source_namespace, source.physical_address)
        address = new_physical_address()
        try:
            copy = self.entry_reader(source_namespace, source).copy
            await self.run(copy, source_ns, source_address, place.namespace, address)
        except SiltError as exc:
            raise ObjectWriteFailed(WritePhase.BYTES, exc) from exc
        request.entry.physical_address = address
        try:
            return await self.stage_new_bytes(request, place, deadline)
        except SiltError as exc:
            raise ObjectWriteFailed(WritePhase.STAGING, exc) from exc

    async def _entry_exists(self, request: graveler_pb2.StageEntryRequest, deadline: float | None) -> bool:
        """Whether request.key has an entry on request.branch now: read in this process when the
        edge composed a reader, else by a call. A missing repository or branch is raised."""
        stat = graveler_pb2.StatEntryRequest(repository=request.repository, ref=request.branch, key=request.key)
        try:
            if self.reads is None:
                await self.graveler_call(self.graveler.StatEntry, stat, deadline)
            else:
                left = (time.monotonic() + CALL_TIMEOUT if deadline is None else deadline) - time.monotonic()
                if left <= 0:
                    raise Unavailable("graveler did not answer within the request's deadline")
                await self.read_entries(self.reads.StatEntry, stat, left)
        except NotFound as exc:
            if exc.what not in (None, "object"):
                raise
            return False
        return True

    async def delete_bytes(self, namespace: str, address: str) -> None:
        """Delete bytes no entry refers to; a failure leaves them to garbage collection."""
        with contextlib.suppress(Exception):
            await self.run(self.adapter.delete, namespace, address)

    async def stage_new_bytes(
        self,
        request: graveler_pb2.StageEntryRequest,
        place: RepositoryPlace,
        deadline: float | None = None,
        *,
        follow_replacement: bool = True,
    ) -> RepositoryPlace:
        """Stage the entry of request for bytes this request just wrote in place.namespace, naming
        the identity of the repository looked up with it (graveler refuses the write if the
        repository is another one by now), batched with the branch's other writes. If graveler
        certainly did not take it in any attempt (a refusal, a condition that did not hold, a
        write never sent: edge/core/write_outcome.py), the bytes are deleted rather than left with
        no entry referring to them; once an attempt may have been applied they stay, whatever the
        client is answered (it retries), and the uncommitted sweep of garbage collection removes
        them if no entry came to point at them.

        A repository deleted and created again under its name since place was looked up (the
        edge remembers it briefly) is the one the write names now: with follow_replacement the
        bytes are copied into its namespace and staged there (request.entry then names them).
        Not for a write that belongs to the old repository alone (an upload opened in it).
        Returns where the entry was staged; a failure is a silt error (call_failure)."""
        request.repository_id = place.repository_id
        request.fresh_address = True  # bytes this request wrote, at an address of their own
        address = request.entry.physical_address
        try:
            await self.graveler_call(self.staging.StageEntry, request, deadline, changes=True)
            return place
        except SiltError as refused:
            successor = None
            try:
                if follow_replacement:
                    successor = await self._replacement_refusing(request.repository, place, refused, deadline)
            except SiltError as lookup_failed:
                # The write certainly was not applied; whether another repository took the name
                # (and would take it) is not known: a retry finds out.
                raise CertainlyNotApplied(
                    f"nothing was staged: graveler refused the write ({refused}), and whether another"
                    f" repository was created under the name {request.repository!r} could not be"
                    f" looked up ({lookup_failed}); retry"
                ) from None
            finally:
                if successor is None and certainly_not_applied(refused):
                    await self.delete_bytes(place.namespace, address)
            if successor is None:
                raise
        # Staged in the repository now under the name instead, from a copy of the bytes there.
        # These stay whatever that staging does, unless it certainly failed: an earlier attempt
        # may have staged them here, and garbage collection removes them if nothing refers to them.
        try:
            request.entry.physical_address = new_physical_address()
            await self.run(
                self.adapter.copy, place.namespace, address, successor.namespace, request.entry.physical_address
            )
            return await self.stage_new_bytes(request, successor, deadline, follow_replacement=False)
        except BaseException as exc:
            if certainly_not_applied(exc):
                await self.delete_bytes(place.namespace, address)
            raise

    async def _replacement_refusing(
        self, repository: str, place: RepositoryPlace, refused: SiltError, deadline: float | None
    ) -> RepositoryPlace | None:
        """The repository now named `repository`, when graveler refused a write because the one
        looked up as place is gone (it says the repository is missing, not the branch) and
        another was created under the name since; None otherwise."""
        if not place.repository_id or not isinstance(refused, NotFound) or refused.what != "repository":
            return None
        return await self.replacement_of(repository, place, deadline)

    async def read_entries(self, method: Callable[..., T], request: Any, timeout: float = CALL_TIMEOUT) -> T:
        """One of self.reads' methods, in a worker thread, within a graveler call's time limit."""
        return await self.run(functools.partial(method, request, timeout=timeout))

    def reads_on_loop(self, source: ObjectReader) -> bool:
        """Whether a small read through source (entry_reader's) may run on the event loop: point
        reads run there (inline_reads) and source is the block adapter itself. An imported or
        linked object's reader first checks its source, which for a file with no ETag record
        means hashing the whole file, however large it has grown since."""
        return self.inline_reads and source is self.adapter

    async def read_small(
        self, source: ObjectReader, namespace: str, address: str, byte_range: tuple[int, int] | None
    ) -> bytes:
        """read_whole of at most SMALL_BODY bytes (a small object, or a range of one): on the
        event loop where reads_on_loop (one pread of this machine's disk), else in a worker thread."""
        if self.reads_on_loop(source):
            return read_whole(source, namespace, address, byte_range)
        return await self.run(read_whole, source, namespace, address, byte_range)

    def read_small_here(
        self, source: ObjectReader, namespace: str, address: str, byte_range: tuple[int, int] | None, *, wait: bool
    ) -> bytes:
        """read_whole where the caller runs, as a read_entry method's step: told not to wait (on
        the event loop), ReadWouldWait for a source that is not reads_on_loop."""
        if not wait and not self.reads_on_loop(source):
            raise ReadWouldWait("an imported or linked object's bytes are read in a worker thread")
        return read_whole(source, namespace, address, byte_range)

    async def read_entry(self, method: Callable[..., T], request: Any, timeout: float = CALL_TIMEOUT) -> T:
        """read_entries for a read of one entry, whose method takes `wait` as StatEntry does: run
        on the event loop when self.inline_reads, told not to wait; one that would (ReadWouldWait)
        runs again in a worker thread, where it may."""
        if self.inline_reads:
            try:
                return method(request, timeout=timeout, wait=False)
            except ReadWouldWait:
                pass
        return await self.read_entries(method, request, timeout)

    # --- auth's decisions ----------------------------------------------------------------

    def auth_unavailable(self, exc: Unavailable) -> Exception:
        """The error for auth not deciding (exc): silt's own here, as the core answers everything;
        a front end's client names its protocol's instead."""
        return exc

    async def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        """Whether auth lets user_id do action on resource (cached decisions, self.authority),
        for a request from source_ip (its client's address, silt/source_address.py; "" unknown)."""
        try:
            return await self.authority.allowed(user_id, action, resource, source_ip)
        except Unavailable as exc:
            raise self.auth_unavailable(exc) from None

    async def allowed_many(self, user_id: str, action: str, resources: list[str], source_ip: str = "") -> list[bool]:
        """allowed for each of resources, in order; none asked, auth not called."""
        if not resources:
            return []
        try:
            return await self.authority.allowed_many(user_id, action, resources, source_ip)
        except Unavailable as exc:
            raise self.auth_unavailable(exc) from None

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope:
        """Which keys of repository auth lets user_id do an object action on (cached, like
        decisions): whole for a holder of the repository's action, checked per key otherwise.
        branch: where a write or delete is staged, whose WriteBranch statements count too."""
        try:
            return await self.authority.key_scope(user_id, action, repository, branch, source_ip)
        except Unavailable as exc:
            raise self.auth_unavailable(exc) from None

    async def close(self) -> None:
        await self.history.close()  # its last flush still needs the graveler channel
        await self.auth_channel.close()
        await self.graveler_channel.close()
        self.pool.shutdown(wait=False)
        if self.reads is not None:
            self.reads.close()


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


async def _read_up_to(body: CheckedBody, size: int) -> bytes:
    """size bytes of body, or fewer if it ends first."""
    parts, left = [], size
    while left > 0 and (data := await body.read(left)):
        parts.append(data)
        left -= len(data)
    return b"".join(parts)
