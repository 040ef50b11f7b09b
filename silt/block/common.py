"""What the cloud block adapters (s3.py, azure.py, gcs.py) do alike: turning their SDK's
exceptions into Silt errors, checking a caller's size, one-line messages, and holding a piece of
the caller's stream so that it can be sent, and re-sent on a retry."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import tempfile
from collections.abc import Callable, Iterator
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
