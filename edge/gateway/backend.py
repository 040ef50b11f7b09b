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

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from edge.core.client import CALL_TIMEOUT, EdgeClient, EntryReads, MaybeApplied
from edge.core.sigv4_identity import S3Identities
from edge.gateway.errors import S3Error
from silt.config import Config
from silt.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ProtectedBranch,
    ResourceExhausted,
    SiltError,
    Unauthenticated,
    Unavailable,
)
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.store import Store, scan_prefix
from silt.repository_place import RepositoryPlace
from silt.rpc.authority import Clock
from silt.rpc.signing import Credentials
from silt.telemetry.stores import open_observed_store

T = TypeVar("T")


# The S3 code for a NotFound that says what is missing; other kinds (a branch, a commit) take
# the caller's default, which depends on the operation.
_NOT_FOUND_CODE: dict[str, str] = {"repository": "NoSuchBucket", "object": "NoSuchKey", "upload": "NoSuchUpload"}


def store_error(exc: SiltError) -> S3Error:
    """Errors raised by the block adapter or KV, as S3 errors."""
    if isinstance(exc, Unavailable):
        return S3Error("ServiceUnavailable", str(exc))
    if isinstance(exc, NotFound):
        return S3Error("NoSuchKey", str(exc))
    if isinstance(exc, InvalidArgument):
        return S3Error("InvalidArgument", str(exc))
    return S3Error("InternalError", str(exc))


def s3_error(error: SiltError, not_found: str = "NoSuchKey", failed_precondition: str = "InvalidRequest") -> S3Error:
    """The S3 error for what graveler's engine raised, by a call or in this process, or for what
    the edge's core tells of a call that may have been applied; it keeps `not_applied`."""
    s3 = _s3_error(error, not_found, failed_precondition)
    s3.not_applied = getattr(error, "not_applied", False)  # type: ignore[attr-defined]
    return s3


def _s3_error(error: SiltError, not_found: str, failed_precondition: str) -> S3Error:
    details = str(error)
    # By type alone, never by how long the call took: SlowDown ("reduce your request rate") only
    # for graveler shedding load (ResourceExhausted, below); a dependency that timed out or
    # refused (a frozen KV, a lost Cassandra quorum) and an outcome left unknown are 503
    # ServiceUnavailable, which S3 clients retry just the same.
    if isinstance(error, MaybeApplied):
        return S3Error("ServiceUnavailable", details)
    if isinstance(error, Aborted) and failed_precondition == "PreconditionFailed":
        # A conditional write that raced another writer across a commit: it may have been
        # applied, so neither success nor PreconditionFailed, nor S3's 409
        # ConditionalRequestConflict, which says the write did not happen: 503, retryable.
        return S3Error("ServiceUnavailable", f"the conditional write may have been applied, retry: {details}")
    if isinstance(error, NotFound):
        s3 = S3Error(_NOT_FOUND_CODE.get(error.what or "", not_found), details)
        s3.what = error.what
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
    if isinstance(error, ProtectedBranch):
        return S3Error("AccessDenied", details)  # the branch's protection rules refuse the write
    if isinstance(error, PermissionDenied | Unauthenticated):
        # The caller was authorized by auth; graveler refusing the gateway is a deployment problem.
        return S3Error("AccessDenied", f"graveler refused the gateway: {details}")
    return S3Error("InternalError", details)


class Backend(EdgeClient):
    """The edge client (edge/core/client.py) signed as svc-gateway, with S3's errors, SigV2/V4
    identities and the KV that keeps multipart uploads."""

    def __init__(self, config: Config, clock: Clock = time.monotonic, reads: EntryReads | None = None) -> None:
        super().__init__(config, Credentials.from_config(config), ev.S3, "gateway-io", clock, reads)
        self.kv: Store = open_observed_store(config.database)
        self.identities = S3Identities(self.auth_channel, config.auth.cache_ttl_seconds, clock, CALL_TIMEOUT)

    async def call(
        self,
        method: Any,
        request: Any,
        not_found: str = "NoSuchKey",
        failed_precondition: str = "InvalidRequest",
        *,
        changes: bool = False,
    ) -> Any:
        """One graveler call as the edge's core makes it (EdgeClient.call), its failure as an
        S3Error that keeps `not_applied`: whether graveler certainly did not apply it."""
        try:
            return await self.graveler_call(method, request, changes=changes)
        except SiltError as exc:
            raise s3_error(exc, not_found, failed_precondition) from None

    async def stat_entry(self, request: api.StatEntryRequest, not_found: str = "NoSuchKey") -> api.EntryInfo:
        """StatEntry, read in this process when the edge composed a reader, else by a call."""
        info: api.EntryInfo = await self._read("StatEntry", request, not_found)
        return info

    async def stat_entry_then(
        self, request: api.StatEntryRequest, then: Callable[[pb.Entry, bool], T]
    ) -> tuple[pb.Entry, T]:
        """StatEntry, then then(entry, wait), a blocking step (a small object's bytes), in the
        same worker-thread trip when the entry is read in this process, a GET's one trip, not
        two; or with no trip, on the event loop, where that is this machine's disk (read_entry).
        then is told wait=False on the loop, where it raises ReadWouldWait rather than do what
        may take long, and both steps run again in a thread."""
        if self.reads is None:
            entry = (await self.call(self.graveler.StatEntry, request)).entry
            return entry, await self.run(then, entry, True)
        stat = self.reads.StatEntry

        def both(request: api.StatEntryRequest, *, timeout: float, wait: bool = True) -> tuple[pb.Entry, T]:
            try:
                entry = stat(request, timeout=timeout, wait=wait).entry
            except SiltError as exc:  # the entry's refusal; then's own errors pass as they are
                raise s3_error(exc) from None
            return entry, then(entry, wait)

        return await self.read_entry(both, request)

    async def list_entries(
        self, request: api.ListEntriesRequest, not_found: str = "NoSuchKey"
    ) -> api.ListEntriesResponse:
        """ListEntries, read in this process when the edge composed a reader, else by a call."""
        page: api.ListEntriesResponse = await self._read("ListEntries", request, not_found)
        return page

    async def neutral_entry(self, request: api.GetNeutralEntryRequest) -> api.EntryInfo:
        """GetNeutralEntry, read in this process when the edge composed a reader, else by a call."""
        info: api.EntryInfo = await self._read("GetNeutralEntry", request, "NoSuchKey")
        return info

    async def _read(
        self, method: Literal["StatEntry", "ListEntries", "GetNeutralEntry"], request: Any, not_found: str
    ) -> Any:
        if self.reads is None:
            return await self.call(getattr(self.graveler, method), request, not_found)
        try:
            if method == "StatEntry":
                return await self.read_entry(self.reads.StatEntry, request)
            return await self.read_entries(getattr(self.reads, method), request)
        except SiltError as exc:
            raise s3_error(exc, not_found) from None

    # --- auth ------------------------------------------------------------------------

    def auth_unavailable(self, exc: Unavailable) -> Exception:
        return S3Error("ServiceUnavailable", f"auth: {exc}")

    # --- repositories ----------------------------------------------------------------

    async def namespace(self, repository: str) -> str:
        """The storage namespace of a repository (NoSuchBucket if there is none)."""
        return (await self.place(repository)).namespace

    async def place(self, repository: str) -> RepositoryPlace:
        """The storage namespace of a repository with its identity (NoSuchBucket if there is
        none), as the edge's core looks it up and remembers it (EdgeClient.look_up_place)."""
        try:
            return await self.look_up_place(repository)
        except SiltError as exc:
            raise s3_error(exc, "NoSuchBucket") from None

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
        await super().close()
        with contextlib.suppress(SiltError):
            self.kv.close()
