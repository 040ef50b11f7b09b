"""What the gateway talks to: auth and graveler over grpc.aio, the block adapter and KV in worker threads.

**Trust model.** The gateway authenticates the S3 caller (SigV2/V4: auth checks the signature
with the secret, which never leaves it, and returns SigV4's scoped signing key; identity.py),
asks auth whether that user may do the action on the repository (AuthorizeMany with the
caller's user id), and only then calls graveler with its own service credentials (user
`svc-gateway`). Graveler therefore sees the gateway, not the end
user: the gateway is trusted to have authorized the caller, which is why its service user
holds ReadRepo/WriteRepo and, for CreateBucket/DeleteBucket, CreateRepo/DeleteRepo
(services/auth/setup.py). Scoped signing keys and decisions are cached for
`auth.cache_ttl_seconds` (identity.py, and the cached authority every service shares,
silt/rpc/authority.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc

from services.gateway.errors import S3Error
from services.gateway.identity import S3Identities
from silt.block import BlockAdapter
from silt.config import Config
from silt.errors import (
    PROTECTED_BRANCH,
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SiltError,
    Unauthenticated,
    Unavailable,
)
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2_grpc
from silt.history.emitter import EventEmitter
from silt.kv.store import Store, scan_prefix
from silt.rpc.authority import AioCachedAuthority, AioRemoteAuthority, Clock, TTLCache
from silt.rpc.errors import error_from_rpc
from silt.rpc.signing import Credentials, service_aio_channels
from silt.telemetry.stores import open_observed_adapter, open_observed_store

T = TypeVar("T")
CALL_TIMEOUT = 30.0
UNAVAILABLE_RETRY_DELAYS = (0.1, 0.3)
# An UNAVAILABLE that took this long came from a timeout, not from a restarting graveler.
SLOW_FAILURE_SECONDS = 1.0

# Answers after which graveler certainly did not apply the call: it refused it, or was never reached.
_REFUSED = {
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.OUT_OF_RANGE,
}
_NEVER_REACHED = ("failed to connect", "connection refused", "dns resolution failed")


def not_applied(exc: grpc.aio.AioRpcError) -> bool:
    """True when the failed call certainly changed nothing in graveler. A timeout or a
    dropped connection may have been applied, so bytes it referred to must be kept."""
    if exc.code() in _REFUSED:
        return True
    details = (exc.details() or "").lower()
    return exc.code() == grpc.StatusCode.UNAVAILABLE and any(text in details for text in _NEVER_REACHED)


# The S3 code for a NotFound that says what is missing; other kinds (a branch, a commit) take
# the caller's default, which depends on the operation.
_NOT_FOUND_CODE: dict[str, str] = {"repository": "NoSuchBucket", "object": "NoSuchKey", "upload": "NoSuchUpload"}


def rpc_error(
    exc: grpc.aio.AioRpcError, not_found: str = "NoSuchKey", failed_precondition: str = "InvalidRequest"
) -> S3Error:
    """The S3 error for a failed graveler call. For a NotFound, `error.what` is what graveler
    said is missing (None when it did not say)."""
    error = error_from_rpc(exc)
    details = str(error)
    if isinstance(error, Aborted) and failed_precondition == "PreconditionFailed":
        # A conditional write that raced another writer across a commit: it may have been
        # applied, so neither success nor PreconditionFailed; S3 answers 409 and SDKs retry.
        return S3Error("ConditionalRequestConflict", details)
    if isinstance(error, NotFound):
        s3 = S3Error(_NOT_FOUND_CODE.get(error.what or "", not_found), details)
        s3.what = error.what  # type: ignore[attr-defined]
        return s3
    if isinstance(error, Unavailable | Aborted):
        return S3Error("ServiceUnavailable", f"graveler: {details}")
    if isinstance(error, ResourceExhausted):
        return S3Error("SlowDown", details)
    if isinstance(error, InvalidArgument):
        return S3Error("InvalidArgument", details)
    if isinstance(error, AlreadyExists):
        return S3Error("BucketAlreadyOwnedByYou", details)
    if isinstance(error, FailedPrecondition):
        return S3Error(failed_precondition, details)
    if isinstance(error, PermissionDenied) and PROTECTED_BRANCH in details:
        return S3Error("AccessDenied", details)  # the branch's protection rules refuse the write
    if isinstance(error, PermissionDenied | Unauthenticated):
        # The caller was authorized by auth; graveler refusing the gateway is a deployment problem.
        return S3Error("AccessDenied", f"graveler refused the gateway: {details}")
    return S3Error("InternalError", details)


class Backend:
    def __init__(self, config: Config, clock: Clock = time.monotonic) -> None:
        credentials = Credentials.from_config(config)
        self._auth_channel, self._graveler_channel = service_aio_channels(config, credentials)
        self.graveler = graveler_pb2_grpc.GravelerServiceStub(self._graveler_channel)
        self.adapter: BlockAdapter = open_observed_adapter(config.blockstore)
        self.kv: Store = open_observed_store(config.database)
        # Block adapters and KV are blocking; they get their own threads so that a slow disk
        # never stalls the event loop that serves every other request.
        self.pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="gateway-io")
        ttl = config.auth.cache_ttl_seconds
        self.authority = AioCachedAuthority(AioRemoteAuthority(self._auth_channel, CALL_TIMEOUT), ttl, clock)
        self.identities = S3Identities(self._auth_channel, ttl, clock, CALL_TIMEOUT)
        self._namespaces: TTLCache[str, str] = TTLCache(ttl, clock=clock)
        # Refs known to be branches, so that a write costs no extra ResolveRef. Briefly: a
        # deleted branch is then refused by graveler itself when the entry is staged.
        self._branches: TTLCache[tuple[str, str], bool] = TTLCache(ttl, clock=clock)
        # Reads, writes and deletes served, queued for graveler off the request path (started by
        # the app's lifespan, on its event loop).
        self.history = EventEmitter(ev.S3, self.graveler, enabled=config.graveler.history.enabled)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        # In the request's context: its trace span and request id follow it into the thread.
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self.pool, context.run, fn, *args)

    async def call(
        self, method: Any, request: Any, not_found: str = "NoSuchKey", failed_precondition: str = "InvalidRequest"
    ) -> Any:
        # A restarted graveler is reachable again within moments; a short retry hides that from
        # clients, while an outage still answers ServiceUnavailable quickly.
        # A slow failure is a dependency that timed out (a frozen KV): retrying would only
        # multiply the client's wait, so it is answered SlowDown at once.
        for delay in (*UNAVAILABLE_RETRY_DELAYS, None):
            started = time.monotonic()
            try:
                return await method(request, timeout=CALL_TIMEOUT)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() - started >= SLOW_FAILURE_SECONDS:
                    raise S3Error("SlowDown", f"graveler: {exc.details() or 'unavailable'}") from None
                if exc.code() != grpc.StatusCode.UNAVAILABLE or delay is None:
                    error = rpc_error(exc, not_found, failed_precondition)
                    error.not_applied = not_applied(exc)  # type: ignore[attr-defined]
                    raise error from None
            await asyncio.sleep(delay)

    # --- auth ------------------------------------------------------------------------

    async def allowed(self, user_id: str, action: str, resource: str) -> bool:
        try:
            return await self.authority.allowed(user_id, action, resource)
        except Unavailable as exc:
            raise S3Error("ServiceUnavailable", f"auth: {exc}") from None

    async def allowed_many(self, user_id: str, action: str, resources: list[str]) -> list[bool]:
        if not resources:
            return []
        try:
            return await self.authority.allowed_many(user_id, action, resources)
        except Unavailable as exc:
            raise S3Error("ServiceUnavailable", f"auth: {exc}") from None

    # --- repositories ----------------------------------------------------------------

    async def namespace(self, repository: str) -> str:
        """The storage namespace of a repository (NoSuchBucket if there is none)."""
        from silt.graveler.v1 import graveler_pb2 as api

        cached = self._namespaces.get(repository)
        if cached is None:
            info = await self.call(
                self.graveler.GetRepository, api.GetRepositoryRequest(name=repository), "NoSuchBucket"
            )
            cached = info.storage_namespace
            self._namespaces.put(repository, cached)
        return cached

    def known_branch(self, repository: str, ref: str) -> bool:
        return bool(self._branches.get((repository, ref)))

    def remember_branch(self, repository: str, ref: str) -> None:
        self._branches.put((repository, ref), True)

    def forget_namespace(self, repository: str) -> None:
        self._namespaces.put(repository, None)  # type: ignore[arg-type]

    # --- KV (multipart uploads) --------------------------------------------------------

    def kv_get(self, partition: bytes, key: bytes) -> dict[str, Any] | None:
        try:
            return json.loads(self.kv.get(partition, key).value)
        except NotFound:
            return None

    def kv_put(self, partition: bytes, key: bytes, value: dict[str, Any]) -> None:
        self.kv.set(partition, key, json.dumps(value).encode())

    def kv_delete(self, partition: bytes, key: bytes) -> None:
        with contextlib.suppress(NotFound):
            self.kv.delete(partition, key)

    def kv_scan(self, partition: bytes, prefix: bytes) -> list[tuple[bytes, dict[str, Any]]]:
        return [(e.key, json.loads(e.value)) for e in scan_prefix(self.kv, partition, prefix)]

    async def close(self) -> None:
        await self.history.close()  # its last flush still needs the graveler channel
        await self._auth_channel.close()
        await self._graveler_channel.close()
        self.pool.shutdown(wait=False)
        with contextlib.suppress(SiltError):
            self.kv.close()
