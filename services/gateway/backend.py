"""What the gateway talks to: auth and graveler over grpc.aio, the block adapter and KV in worker threads.

**Trust model.** The gateway authenticates the S3 caller itself (SigV2/V4, with the secret
auth returns from GetCredentialSecret), asks auth whether that user may do the action on the
repository (Authorize with the caller's user id), and only then calls graveler with its own
service credentials (user `svc-gateway`). Graveler therefore sees the gateway, not the end
user: the gateway is trusted to have authorized the caller, which is why its service user
holds ReadRepo/WriteRepo and, for CreateBucket/DeleteBucket, CreateRepo/DeleteRepo
(services/auth/setup.py). Secrets and decisions are cached for `auth.cache_ttl_seconds`.
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
from pydantic import SecretStr

from services.gateway.errors import S3Error
from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.block import BlockAdapter, open_adapter
from silt.config import Config
from silt.errors import NotFound, SiltError
from silt.graveler.v1 import graveler_pb2_grpc
from silt.kv import open_store
from silt.kv.store import Store, scan_prefix
from silt.rpc.auth import Credentials, KeyOwner, TTLCache, count_cache_lookup, signed_aio_channel

T = TypeVar("T")
CALL_TIMEOUT = 30.0
UNAVAILABLE_RETRY_DELAYS = (0.1, 0.3)
# An UNAVAILABLE that took this long came from a timeout, not from a restarting graveler.
SLOW_FAILURE_SECONDS = 1.0
_MISS = object()

# gRPC failures that mean "try again later" rather than "you asked for something wrong".
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED}


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


def rpc_error(
    exc: grpc.aio.AioRpcError, not_found: str = "NoSuchKey", failed_precondition: str = "InvalidRequest"
) -> S3Error:
    """The S3 error for a failed graveler call."""
    code = exc.code()
    details = exc.details() or code.name
    if code == grpc.StatusCode.ABORTED and failed_precondition == "PreconditionFailed":
        # A conditional write that raced another writer across a commit: it may have been
        # applied, so neither success nor PreconditionFailed; S3 answers 409 and SDKs retry.
        return S3Error("ConditionalRequestConflict", details)
    if code == grpc.StatusCode.NOT_FOUND:
        return S3Error(not_found, details)
    if code in _RETRYABLE:
        return S3Error("ServiceUnavailable", f"graveler: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return S3Error("SlowDown", details)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return S3Error("InvalidArgument", details)
    if code == grpc.StatusCode.ALREADY_EXISTS:
        return S3Error("BucketAlreadyOwnedByYou", details)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return S3Error(failed_precondition, details)
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        # The caller was authorized by auth; graveler refusing the gateway is a deployment problem.
        return S3Error("AccessDenied", f"graveler refused the gateway: {details}")
    return S3Error("InternalError", details)


class Backend:
    def __init__(self, config: Config) -> None:
        credentials = Credentials.from_config(config)
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            # Reconnect soon after a service restarts instead of backing off for up to two minutes.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        self._auth_channel = signed_aio_channel(config.auth.endpoint, credentials, options)
        self._graveler_channel = signed_aio_channel(config.graveler.dial_address, credentials, options)
        self.auth = auth_pb2_grpc.AuthServiceStub(self._auth_channel)
        self.graveler = graveler_pb2_grpc.GravelerServiceStub(self._graveler_channel)
        self.adapter: BlockAdapter = open_adapter(config.blockstore)
        self.kv: Store = open_store(config.database)
        # Block adapters and KV are blocking; they get their own threads so that a slow disk
        # never stalls the event loop that serves every other request.
        self.pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="gateway-io")
        ttl = config.auth.cache_ttl_seconds
        self._owners: TTLCache[str, Any] = TTLCache(ttl)
        self._decisions: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl)
        self._namespaces: TTLCache[str, str] = TTLCache(ttl)
        # Refs known to be branches, so that a write costs no extra ResolveRef. Briefly: a
        # deleted branch is then refused by graveler itself when the entry is staged.
        self._branches: TTLCache[tuple[str, str], bool] = TTLCache(ttl)

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

    async def key_owner(self, access_key_id: str) -> KeyOwner:
        cached = self._owners.get(access_key_id, _MISS)
        count_cache_lookup("key", cached is not _MISS)
        if cached is _MISS:
            try:
                reply = await self.auth.GetCredentialSecret(
                    auth_pb2.GetCredentialSecretRequest(access_key_id=access_key_id), timeout=CALL_TIMEOUT
                )
                cached = KeyOwner(reply.user_id, SecretStr(reply.secret_access_key))
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                    raise S3Error("ServiceUnavailable", f"auth: {exc.details()}") from None
                cached = None
            self._owners.put(access_key_id, cached)
        if cached is None:
            raise S3Error("InvalidAccessKeyId")
        return cached

    async def allowed(self, user_id: str, action: str, resource: str) -> bool:
        key = (user_id, action, resource)
        decision = self._decisions.get(key)
        count_cache_lookup("decision", decision is not None)
        if decision is None:
            request = auth_pb2.AuthorizeRequest(user_id=user_id, action=action, resource=resource)
            try:
                reply = await self.auth.Authorize(request, timeout=CALL_TIMEOUT)
            except grpc.aio.AioRpcError as exc:
                raise S3Error("ServiceUnavailable", f"auth: {exc.details()}") from None
            decision = reply.allowed
            self._decisions.put(key, decision)
        return decision

    async def allowed_many(self, user_id: str, action: str, resources: list[str]) -> list[bool]:
        if not resources:
            return []
        request = auth_pb2.AuthorizeManyRequest(user_id=user_id, action=action, resources=resources)
        try:
            reply = await self.auth.AuthorizeMany(request, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            raise S3Error("ServiceUnavailable", f"auth: {exc.details()}") from None
        return list(reply.allowed)

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
        await self._auth_channel.close()
        await self._graveler_channel.close()
        self.pool.shutdown(wait=False)
        with contextlib.suppress(SiltError):
            self.kv.close()
