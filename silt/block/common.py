"""What the cloud block adapters (s3.py, azure.py, gcs.py) do alike: turning their SDK's
exceptions into Silt errors, checking a caller's size, one-line messages, holding a piece of the
caller's stream so that it can be sent, and re-sent on a retry, and cutting a stream into the
pieces of one upload (S3's parts, Azure's blocks) one piece in memory at a time."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import tempfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import IO, Any, BinaryIO

from silt.block.adapter import CHUNK_SIZE
from silt.errors import InvalidArgument, SiltError, Unavailable

# The most a spool keeps in memory before it moves to a temporary file.
SPOOL_MEMORY = 8 * 1024 * 1024

Translate = Callable[[Exception, str], SiltError]


def one_line(text: object, limit: int | None = None) -> str:
    """A message on one line (an SDK's can span many), cut to `limit` characters when given."""
    line = " ".join(str(text).split())
    return line if limit is None or len(line) <= limit else line[: limit - 3] + "..."


class Calls:
    """``with calls(what):`` turns the store's SDK and network exceptions (`errors`) raised inside
    into Silt errors, through the adapter's own `translate`; Silt errors pass unchanged."""

    def __init__(self, errors: tuple[type[BaseException], ...], translate: Translate) -> None:
        self._errors = errors
        self._translate = translate

    @contextlib.contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        try:
            yield
        except SiltError:
            raise
        except self._errors as exc:
            raise self._translate(exc, what) from None  # type: ignore[arg-type]


def check_size(size: int | None, what: str) -> None:
    """A size a caller announces: None (unknown) or a non-negative integer."""
    if size is None:
        return
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidArgument(f"{what}: size must be a non-negative integer, got {size!r}")


class Spool:
    """Up to `limit` bytes of a stream, held so they can be sent (and re-sent on retry): in memory
    up to SPOOL_MEMORY, then in a temporary file. Not a SpooledTemporaryFile: an HTTP client may
    ask a body for its fileno(), which would move every spooled piece to disk.

    `store` names the store in errors (``s3``, ``azure``); `running`, a hash object, is fed the
    bytes too (the MD5 of an object of many pieces)."""

    def __init__(
        self, stream: BinaryIO, limit: int, what: str, store: str, first: bytes = b"", running: Any = None
    ) -> None:
        self.file: IO[bytes] = io.BytesIO()
        self._store = store
        md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0
        try:
            chunk = first
            while True:
                if chunk:
                    md5.update(chunk)
                    if running is not None:
                        running.update(chunk)
                    self._write(chunk, what)
                    self.size += len(chunk)
                if self.size >= limit:
                    break
                # Exceptions of the caller's stream propagate unchanged: they are the caller's.
                chunk = stream.read(min(CHUNK_SIZE, limit - self.size))
                if not chunk:
                    break
            self.file.seek(0)
        except BaseException:
            self.file.close()
            raise
        self.md5 = md5.digest()

    @property
    def content_md5(self) -> str:
        """The MD5 as a Content-MD5 header carries it (base64)."""
        return base64.b64encode(self.md5).decode("ascii")

    def _write(self, chunk: bytes, what: str) -> None:
        try:
            if isinstance(self.file, io.BytesIO) and self.size + len(chunk) > SPOOL_MEMORY:
                spill = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the spool
                spill.write(self.file.getbuffer())
                self.file.close()
                self.file = spill
            self.file.write(chunk)
        except OSError as exc:
            raise Unavailable(f"{self._store} {what}: spooling to a temporary file: {exc.strerror}") from None

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def spool_part(stream: BinaryIO, size: int | None, what: str, store: str, max_size: int, shown: str) -> Spool:
    """One part of a multipart upload, spooled whole: exactly `size` bytes when given (and checked
    first), at most `max_size` (`shown`, as messages say it) either way. The caller closes it."""
    # Read one byte past the limit to notice an oversized part of unknown size.
    spool = Spool(stream, max_size + 1 if size is None else size, what, store)
    try:
        if size is not None and spool.size != size:
            raise InvalidArgument(f"{what}: stream ended after {spool.size} of {size} bytes")
        if spool.size > max_size:
            raise InvalidArgument(f"{what}: a part holds at most {shown}")
    except BaseException:
        spool.file.close()
        raise
    return spool


def check_part_size(size: int | None, what: str, max_size: int, shown: str) -> None:
    """What spool_part checks before it reads a byte: a size a part may have."""
    check_size(size, what)
    if size is not None and size > max_size:
        raise InvalidArgument(f"{what}: a part holds at most {shown}, got {size} bytes")


@dataclass(frozen=True)
class Pieces:
    """How a store's upload cuts a stream into pieces: `base` bytes each (more when a known size
    needs more than `most` of them), doubling every `doubling` pieces when the size is unknown, so
    that `most` pieces reach the store's object size limit while small objects keep small pieces."""

    store: str  # as errors name the store: "s3", "azure"
    label: str  # the limit in words: "S3's limit of 10000 parts"
    base: int
    most: int
    doubling: int

    def size_for(self, size: int | None) -> int:
        """The first piece's size for a stream of `size` bytes (None: unknown)."""
        return self.base if size is None else max(self.base, -(-size // self.most))

    def first(
        self, stream: BinaryIO, size: int | None, piece: int, what: str, running: Any = None
    ) -> tuple[Spool, bytes, bool]:
        """The first piece spooled, the byte read after it (b"" if none), and whether it is the
        whole stream (sent in one request then). The caller closes the spool."""
        first = Spool(stream, piece if size is None else min(size, piece), what, self.store, running=running)
        try:
            if size is not None:
                if first.size < min(size, piece):
                    raise InvalidArgument(f"{what}: stream ended after {first.size} of {size} bytes")
                return first, b"", size <= piece
            # One byte of look-ahead tells a stream of exactly one piece from a longer one.
            carry = stream.read(1) if first.size == piece else b""
        except BaseException:
            first.file.close()
            raise
        return first, carry, not carry

    def all(
        self,
        stream: BinaryIO,
        size: int | None,
        first: Spool,
        carry: bytes,
        piece: int,
        what: str,
        running: Any = None,
    ) -> Generator[Spool]:
        """`first`, then every further piece of the stream, each spooled once the caller is done
        with the one before, which is closed then: one piece in memory at a time. A stream shorter
        than `size`, or one that needs more than `most` pieces, is InvalidArgument."""
        spool, total, number = first, 0, 0
        while True:
            number += 1
            try:
                yield spool
            finally:
                spool.file.close()
            total += spool.size
            if size is not None:
                if total >= size:
                    return
                limit, carry = min(piece, size - total), b""
            else:
                if spool.size < piece:
                    return
                if number > 1:  # the first piece's look-ahead byte was read by first()
                    carry = stream.read(1)
                    if not carry:
                        return
                if number >= self.most:
                    raise InvalidArgument(f"{what}: stream exceeds {self.label}")
                piece = limit = self.base << (number // self.doubling)
            spool = Spool(stream, limit, what, self.store, carry, running)
            if size is not None and spool.size < limit:
                spool.file.close()
                raise InvalidArgument(f"{what}: stream ended after {total + spool.size} of {size} bytes")
