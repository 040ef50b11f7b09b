"""Object writes from a request body: the bytes into the store, then the entry staged.

A front end hands the core a body it checks itself as it is read (a CheckedBody: the S3
gateway's signed chunks and checksums, the REST API's form and limits) and the StageEntry it
wants, and gets back what was written: one call into the core, one answer back, and the
core's own typed errors (silt's, plus the two below) for the front end to put in its
protocol's terms. The body raises the front end's own errors, which pass through unchanged.
"""

from __future__ import annotations

import abc
import asyncio
import enum
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from silt.block.adapter import PutResult
from silt.errors import FailedPrecondition, InvalidArgument, NotFound, SiltError

# A body's stall_seconds unless it says otherwise.
BODY_STALL_SECONDS = 300.0


class NotABranch(FailedPrecondition):
    """A write names a ref that is not a branch (a tag, a commit, a ref expression): commits are
    immutable, only branches take writes."""


class NoSuchBranch(NotFound):
    """A write names a branch the repository does not have."""

    def __init__(self, message: str) -> None:
        super().__init__(message, what="branch")


class ConditionFailed(FailedPrecondition):
    """A conditional write whose condition certainly does not hold, found before any byte of the
    body was read (If-None-Match: * over an entry that exists); graveler checks it again as it
    stages, for the writes that race."""


class ShortBody(InvalidArgument):
    """The body ended before the size its request declared."""


class WritePhase(enum.Enum):
    TARGET = "target"  # the repository and branch looked up: nothing written
    BYTES = "bytes"  # writing the body to the store: nothing left there
    STAGING = "staging"  # staging the entry of the bytes written (stage_new_bytes)


class ObjectWriteFailed(Exception):
    """A write of the edge's core failed in `phase`, with `error` (a silt error) as it was raised:
    each phase is answered in its own terms (a staging error may leave the entry standing). The
    body's own errors are never wrapped."""

    def __init__(self, phase: WritePhase, error: SiltError) -> None:
        super().__init__(f"{phase.value}: {error}")
        self.phase = phase
        self.error = error


class CheckedBody(Protocol):
    """An object's bytes as the front end that received them checks them."""

    # How long a worker thread waits for the next piece before it gives the write up: a
    # request that the event loop no longer serves must not pin a thread forever.
    stall_seconds: float

    # The object's content type as the body itself says it (a form part's own), known once
    # started; None or "": the entry's own stands.
    content_type: str | None

    async def start(self) -> None:
        """The checks made before any byte is read (the headers that describe the body), once
        the write's target is known to take it."""
        ...

    @property
    def declared(self) -> int | None:
        """The object's size as the request declares it; None when it does not say."""
        ...

    async def read(self, n: int) -> bytes:
        """At most n bytes; b"" at the end. Raises the front end's error for a bad body."""
        ...

    async def finish(self, written: PutResult) -> dict[str, str]:
        """The checks that need the whole body, once the store took it (raise to refuse it: the
        bytes are deleted and nothing is staged); the metadata to keep with the entry."""
        ...


class Readable(Protocol):
    async def read(self, n: int) -> bytes: ...


class SourceBody(abc.ABC):
    """A CheckedBody over a front end's own decoded source, whose checks a subclass's finish
    adds to: the size its request declares, and the reads as the source answers them."""

    stall_seconds = BODY_STALL_SECONDS
    content_type: str | None = None

    def __init__(self, source: Readable, declared: int | None) -> None:
        self._source = source
        self._declared = declared

    async def start(self) -> None:
        return None

    @property
    def declared(self) -> int | None:
        return self._declared

    async def read(self, n: int) -> bytes:
        return await self._source.read(n)

    async def ended(self) -> bool:
        """Whether the source has nothing past what the store took: reading on to its end runs
        the source's own checks that need all of it (signatures, a cut short body)."""
        return not await self._source.read(1)

    @abc.abstractmethod
    async def finish(self, written: PutResult) -> dict[str, str]:
        """As CheckedBody.finish: what the front end checks of the whole body."""


@dataclass(frozen=True)
class Written:
    size: int
    etag: str  # hex MD5, as the block adapter computed it while writing (S3's ETag)
    metadata: dict[str, str] = field(default_factory=dict)  # from the body's finish, kept with the entry


class BodyReader:
    """A blocking file-like view of a body, for a block adapter running in a worker thread.

    The adapter computes the MD5 (the ETag) as it writes; this only counts the bytes. With the
    body's declared size it reads one piece ahead: the event loop receives the next piece while
    the worker thread hashes and writes this one, instead of each waiting for the other. The
    read-ahead never passes the declared size, so the bytes after it stay in the body for the
    check that it is not longer than declared. The body's own error is kept in `error`, for the
    request to raise: an adapter may wrap what its stream raises.
    """

    def __init__(self, body: CheckedBody, loop: asyncio.AbstractEventLoop, declared: int | None = None) -> None:
        self._body = body
        self._stall_seconds = body.stall_seconds
        self._loop = loop
        self._declared = declared
        self._requested = 0  # bytes asked of the body so far, the read-ahead included
        self._ahead: Future[bytes] | None = None
        self._leftover = b""
        self.size = 0
        self.error: BaseException | None = None

    def _fetch(self, n: int) -> Future[bytes]:
        self._requested += n
        return asyncio.run_coroutine_threadsafe(self._body.read(n), self._loop)

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = 1024 * 1024
        if self._leftover:
            data, self._leftover = self._leftover[:n], self._leftover[n:]
            self.size += len(data)
            return data
        future, self._ahead = self._ahead or self._fetch(n), None
        try:
            data = future.result(timeout=self._stall_seconds)
        except BaseException as exc:
            future.cancel()
            self.error = exc
            raise
        if len(data) > n:  # the read-ahead was for a larger piece than this read asks
            data, self._leftover = data[:n], data[n:]
        if data and self._declared is not None and self._requested < self._declared:
            self._ahead = self._fetch(min(n, self._declared - self._requested))
        self.size += len(data)
        return data

    def close(self) -> None:
        """Stop a read-ahead still under way (the write failed; nobody will take its bytes)."""
        if self._ahead is not None:
            self._ahead.cancel()
            self._ahead = None

    def readable(self) -> bool:
        return True
