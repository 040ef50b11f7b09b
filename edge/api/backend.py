"""What the REST API talks to: graveler and auth over grpc.aio, signed as its own service user.

**Trust model** (as the gateway's, edge/gateway/backend.py). The API never reads a
secret: auth checks Basic credentials (VerifySecret) and session tokens (VerifySession) and
names the user; the API asks auth whether that user may do the action (AuthorizeMany, the
same RBAC as S3 and gRPC) and only then calls graveler as `svc-api`. Answers of auth are
cached for `auth.cache_ttl_seconds` (silt/rpc/authority.py): a credential is remembered by a
keyed digest of the secret, never the secret itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio

from edge.api.diff.summary import SummaryCache
from edge.api.errors import (
    TYPED_REFUSALS,
    ApiError,
    from_graveler,
    from_rpc,
    from_silt,
    time_left,
    typed_graveler_call,
    unauthorized,
)
from edge.api.live_feed import FeedAccess, FeedSlots
from edge.core.client import CALL_TIMEOUT, EdgeClient, EntryReads
from edge.core.sigv4_identity import S3Identities
from silt.access_keys import is_access_key_id
from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.config import Config
from silt.errors import InvalidArgument, NotFound, SiltError, Unavailable
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.kv.store import Store
from silt.repository_place import RepositoryPlace
from silt.rpc.authority import (
    Clock,
    KeyCache,
    TTLCache,
    retry_unavailable,
)
from silt.rpc.errors import error_from_rpc
from silt.rpc.signing import Credentials
from silt.telemetry.stores import open_observed_store

T = TypeVar("T")
MAX_SECRET_LENGTH = 128
MAX_TOKEN_LENGTH = 1024
MAX_SESSIONS = 100_000


@dataclass(frozen=True)
class UploadLimits:
    """How many uploads a process takes at once and how fast their bodies must arrive.

    A streamed upload holds a worker thread while its body arrives; uploads therefore have a
    pool of their own, `in_flight` threads, and past that are refused (503, Retry-After) rather
    than queued: slow or many uploads can never take the threads reads need. A slot is held
    only while the body moves, so a trickle is ended too: by `idle_seconds` without a byte, or
    once the average rate since `grace_seconds` after the start falls under `min_bytes_per_second`.
    """

    # Enough for many parallel writers (Spark tasks, lakectl fs upload -r) on one process;
    # well under the edge client's IO_THREADS, so a process keeps most of its threads for everything else.
    in_flight: int = 16
    # What a client is told to wait before it retries a refused upload.
    retry_after_seconds: int = 5
    # Silence between two chunks of a body: shorter than any client's own timeout, long enough
    # for a congested link or a paused producer.
    idle_seconds: float = 15.0
    # 8 KiB/s is a 64 kbit/s link, far below any real client; a body dripping slower than
    # that is holding a slot, not uploading. The grace covers TCP slow start and TLS.
    min_bytes_per_second: float = 8 * 1024
    grace_seconds: float = 10.0


@dataclass(frozen=True)
class Caller:
    """Who sent a request, as auth named them."""

    user_id: str
    creation_date: int  # Unix seconds, for GET /user
    access_key_id: str = ""


def service_credentials(config: Config) -> Credentials:
    """api.credentials (svc-api) when set, else the process's own `credentials`."""
    own = config.api.credentials
    if own.access_key_id and own.secret_access_key is not None:
        return Credentials(own.access_key_id, own.secret_access_key)
    return Credentials.from_config(config)


def _caller(user: Any, access_key_id: str) -> Caller:
    return Caller(user.id, int(user.creation_date.seconds), access_key_id)


class Backend(EdgeClient):
    """The edge client (edge/core/client.py) signed as svc-api, with lakeFS's errors, Basic and
    session credentials, the uploads' own threads and the live feeds."""

    def __init__(self, config: Config, clock: Clock = time.monotonic, reads: EntryReads | None = None) -> None:
        super().__init__(config, service_credentials(config), ev.API, "api-io", clock, reads)
        self.auth = auth_pb2_grpc.AuthServiceStub(self.auth_channel)
        ttl = config.auth.cache_ttl_seconds
        # SigV4-signed Iceberg catalog requests (edge/api/iceberg/signed.py): checked as the
        # gateway checks S3's, with scope keys cached the same way, in the gateway's region.
        self.signers = S3Identities(self.auth_channel, ttl, clock, CALL_TIMEOUT)
        self.region = config.gateways.s3.region
        # (access key id, keyed digest of the secret) -> Caller; unknown ids in a room of their own.
        self._secrets: KeyCache[bytes, Caller] = KeyCache(ttl, clock)
        self._digest_key = os.urandom(32)
        self._sessions: TTLCache[bytes, Caller] = TTLCache(ttl, MAX_SESSIONS, clock)
        self._own_user_id = ""
        self.upload_limits = UploadLimits()
        self.upload_pool = ThreadPoolExecutor(max_workers=self.upload_limits.in_flight, thread_name_prefix="api-up")
        self._uploads = 0
        # The live feeds open in this process (routes/events.py).
        self.feeds = FeedSlots(
            config.api.max_live_feeds, config.api.max_live_feeds_per_user, config.api.live_feed_admin_reserve
        )
        self.feed_access = FeedAccess(self.authority.inner, config.api.live_feed_reauthorize_seconds, clock)
        # Trees of commit-to-commit diffs (routes/diff_summary.py).
        self.diff_summaries = SummaryCache()
        self._database = config.database
        self._kv: Store | None = None
        self._kv_lock = threading.Lock()

    @property
    def kv(self) -> Store:
        """The shared KV, opened on first use: the API keeps only its presigned multipart uploads
        there, in the gateway's records (silt/multipart_uploads.py). Blocking: call in a thread."""
        with self._kv_lock:
            if self._kv is None:
                self._kv = open_observed_store(self._database)
            return self._kv

    @contextlib.contextmanager
    def upload_slot(self) -> Iterator[Callable[[], None]]:
        """One of the process's upload slots for the block, or 503 when all are taken; what it
        yields gives the slot back early, once the body has been received. Only the event loop
        counts, so no lock is needed."""
        if self._uploads >= self.upload_limits.in_flight:
            raise ApiError(503, f"too many uploads in progress (at most {self.upload_limits.in_flight}); retry later")
        self._uploads += 1
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self._uploads -= 1

        try:
            yield release
        finally:
            release()

    async def namespace(self, repository: str, deadline: float | None = None) -> str:
        """The storage namespace of a repository (404 if there is none); remembered briefly."""
        return (await self.place(repository, deadline)).namespace

    async def place(self, repository: str, deadline: float | None = None) -> RepositoryPlace:
        """The storage namespace of a repository with its identity (404 if there is none), as the
        edge's core looks it up and remembers it (EdgeClient.look_up_place)."""
        try:
            return await self.look_up_place(repository, deadline)
        except SiltError as exc:
            raise from_graveler(exc, "graveler") from None

    async def call(
        self, method: Any, request: Any, deadline: float | None = None, metadata: tuple[tuple[str, str], ...] = ()
    ) -> Any:
        """One graveler call within the request's deadline (time.monotonic()), as the edge's core
        makes it (EdgeClient.call: sent only on a READY channel, a call never sent retried
        briefly, a sent one never again); its failure answered in lakeFS's terms.
        metadata: extra headers of the call (the end user's address, silt/rpc/signing.py)."""
        try:
            return await self.graveler_call(method, request, deadline, metadata=metadata)
        except SiltError as exc:
            raise from_graveler(exc, "graveler") from None

    async def stat_entry(self, request: api.StatEntryRequest, deadline: float, typed: bool = False) -> api.EntryInfo:
        """StatEntry, read in this process when the edge composed a reader, else by a call.
        typed: refusals stay silt errors (NotFound says what is missing), as typed_call has them."""
        if self.reads is None:
            if typed:
                return await typed_graveler_call(self.graveler.StatEntry, request, deadline)
            return await self.call(self.graveler.StatEntry, request, deadline)
        return await self._read(self.reads.StatEntry, request, deadline, typed, point=True)

    async def list_entries(self, request: api.ListEntriesRequest, deadline: float) -> api.ListEntriesResponse:
        """ListEntries, read in this process when the edge composed a reader, else by a call."""
        if self.reads is None:
            return await self.call(self.graveler.ListEntries, request, deadline)
        return await self._read(self.reads.ListEntries, request, deadline, False)

    async def _read(
        self, method: Callable[..., T], request: Any, deadline: float, typed: bool, *, point: bool = False
    ) -> T:
        """method of the edge's reader within deadline; point: a read of one entry, which may run
        on the event loop (read_entry), where a listing always runs in a worker thread."""
        remaining = time_left(deadline)
        read = self.read_entry if point else self.read_entries
        try:
            return await read(method, request, remaining)
        except SiltError as exc:
            if typed and isinstance(exc, TYPED_REFUSALS):
                raise
            raise from_silt(exc) from None

    async def own_user_id(self) -> str:
        """The API's own service user (svc-api), as auth knows it; asked once."""
        if not self._own_user_id:
            reply = await self._ask_auth(self.auth.WhoAmI, auth_pb2.WhoAmIRequest(), None)
            self._own_user_id = reply.user.id
        return self._own_user_id

    # --- who is calling -------------------------------------------------------------------

    def _digest(self, secret: str) -> bytes:
        return hmac.new(self._digest_key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()

    async def verify_secret(self, access_key_id: str, secret: str) -> Caller:
        if not is_access_key_id(access_key_id) or not secret or len(secret) > MAX_SECRET_LENGTH:
            raise unauthorized()
        digest = self._digest(secret)
        try:
            cached = self._secrets.get(access_key_id, digest)
        except NotFound:
            raise unauthorized() from None
        if cached is not None:
            return cached
        request = auth_pb2.VerifySecretRequest(access_key_id=access_key_id, secret_access_key=secret)
        reply = await self._ask_auth(self.auth.VerifySecret, request, access_key_id)
        if not reply.valid:
            raise unauthorized()
        caller = _caller(reply.user, access_key_id)
        self._secrets.put(access_key_id, digest, caller)
        return caller

    async def create_session(self, access_key_id: str, secret: str) -> tuple[Caller, str, int]:
        """(caller, token, expiry in Unix seconds) for a login."""
        if not is_access_key_id(access_key_id) or not secret or len(secret) > MAX_SECRET_LENGTH:
            raise unauthorized()
        request = auth_pb2.CreateSessionRequest(access_key_id=access_key_id, secret_access_key=secret)
        reply = await self._ask_auth(self.auth.CreateSession, request, access_key_id)
        if not reply.valid:
            raise unauthorized()
        return _caller(reply.user, access_key_id), reply.token, int(reply.expires.seconds)

    async def verify_session(self, token: str) -> Caller:
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise unauthorized()
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        cached: Caller | None = self._sessions.get(digest)
        if cached is not None:
            return cached
        reply = await self._ask_auth(self.auth.VerifySession, auth_pb2.VerifySessionRequest(token=token), None)
        if not reply.valid:
            raise unauthorized()
        caller = _caller(reply.user, reply.access_key_id)
        # Cached at most until the token expires.
        if reply.expires.seconds - time.time() > self._sessions.ttl:
            self._sessions.put(digest, caller)
        return caller

    def forget_sessions(self) -> None:
        """After a revocation here: every session is verified with auth again. Other API
        processes notice within their cache's lifetime (auth.cache_ttl_seconds)."""
        self._sessions.clear()

    async def _ask_auth(self, method: Any, request: Any, access_key_id: str | None) -> Any:
        try:
            # Through an auth restart, as the gateway does (silt/rpc/authority.py).
            return await retry_unavailable(lambda: method(request, timeout=CALL_TIMEOUT))
        except grpc.aio.AioRpcError as exc:
            error = error_from_rpc(exc)
            if isinstance(error, NotFound) and access_key_id is not None:
                self._secrets.put_unknown(access_key_id, str(error))
                raise unauthorized() from None
            if isinstance(error, InvalidArgument):
                raise unauthorized() from None
            raise from_rpc(exc, "auth") from None

    async def setup_initialized(self) -> bool:
        """Whether first-run setup has created the admin (once true, it stays true)."""
        reply = await self._ask_auth(self.auth.GetSetupState, auth_pb2.GetSetupStateRequest(), None)
        return bool(reply.initialized)

    async def setup_admin(self, user_id: str) -> auth_pb2.SetupAdminResponse:
        """The first admin and its key, once. Never retried: a second try after an answer that was
        lost would find setup done and the key gone, so an unknown outcome is answered 503."""
        try:
            reply: auth_pb2.SetupAdminResponse = await self.auth.SetupAdmin(
                auth_pb2.SetupAdminRequest(user_id=user_id), timeout=CALL_TIMEOUT
            )
        except grpc.aio.AioRpcError as exc:
            raise from_rpc(exc, "auth") from None
        return reply

    def auth_unavailable(self, exc: Unavailable) -> Exception:
        return ApiError(503, f"auth: {exc}")

    async def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        try:
            return await super().allowed(user_id, action, resource, source_ip)
        except InvalidArgument as exc:
            raise ApiError(400, str(exc)) from None

    async def close(self) -> None:
        await super().close()
        self.upload_pool.shutdown(wait=False)
        if self._kv is not None:
            self._kv.close()
