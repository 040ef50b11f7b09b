"""The Google Cloud Storage block adapter, on google-cloud-storage (the JSON API).

Namespaces are ``gs://<bucket>[/<prefix>]``; a key is the object ``<prefix>/<key>``.

ETags. Silt compares GCS objects by S3-form ETags: the hex MD5 of the bytes, or
``<md5 of the part md5s>-<N>`` after a multipart upload. GCS itself keeps the MD5 of every
object written in one piece (``md5Hash``), which is exactly the first form, so plain puts
and copies store nothing extra. A composed object has no ``md5Hash``: ``complete`` writes
its ETag in the object's custom metadata (``silt-etag``) in the same compose request that
creates it. ``stat`` and listings report ``silt-etag`` if set, else ``md5Hash`` in hex, else
(a composite written by someone else) the GCS ETag itself.

Streaming. ``put`` sends an object that ends within the first 4 MiB in one request with its
MD5, which GCS verifies; anything longer goes through a resumable upload, 8 MiB a request,
with the MD5 computed as the bytes go and checked against the one GCS computed. Memory holds
at most about one request's bytes. ``get`` and ``get_range`` download the first 4 MiB range
at once (so a missing object or an unsatisfiable range fails at once, and an object that fits
costs one request), then the rest lazily in ranged requests of 4 MiB, each pinned to the
generation the first one came from; a short range marks the object's end.

Multipart uploads are S3's, built on compose: ``create_multipart_upload`` writes a marker
object ``<prefix>/.silt-uploads/<upload id>`` (which remembers the key), each part is an
object ``<prefix>/.silt-uploads/<upload id>/<part number>``, and ``complete`` checks every
listed part's ETag against its MD5 (nothing is changed if one does not match), composes
the parts in order (at most 32 sources a request, so larger uploads are composed in
stages through intermediate objects), then deletes parts and marker. ``abort`` deletes them.
Names starting with ``.silt-`` are never keys, so parts never collide with objects and are
never listed. A bucket lifecycle rule on ``.silt-uploads/`` is the way to reap uploads
nobody completes or aborts (S3's AbortIncompleteMultipartUpload).

Deviations from S3:

* A ``get`` stream reads the generation current when it was opened; if the object is
  replaced or deleted while it is read, the next ranged request fails (Unavailable) where S3
  would keep streaming the old bytes.
* ``upload_part_copy`` of a byte range streams the range through this process (GCS has no
  ranged server-side copy); a whole object with an MD5 is copied by GCS itself.
* ``upload_part`` checks that the upload exists before it writes the part, but a part
  written while a concurrent ``abort`` runs can outlive the upload (the lifecycle rule
  above removes it).
* Presigned URLs are V4 signed URLs and need a service account key (``credentials_json``
  or ``credentials_file``): they are signed locally with it. Other credentials (application
  default user credentials, a VM's metadata server, the emulator's anonymous ones) cannot
  sign without a request to the IAM API; ``presign`` then returns None, as the local disk
  does, and the REST API hands out Silt's own edge URLs, which read and write through Silt.
* Listing a namespace also reads (and skips) the parts of its uploads in progress.

Errors: missing objects, buckets and uploads become NotFound; requests GCS rejects as
malformed (400, 416) become InvalidArgument; a failed precondition becomes PredicateFailed
(AlreadyExists for ``put_if_absent``); everything else (network errors, timeouts, 401/403,
429, 5xx) becomes Unavailable with a one-line message naming the object. Every request has
a timeout and is retried at most ``max_retries`` times.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO, cast

import google.auth
import google.auth.exceptions
import google.cloud.storage as storage
import google.oauth2.credentials
import requests
import requests.adapters
import urllib3.exceptions
from google.api_core import exceptions as api_exceptions
from google.api_core.retry import Retry
from google.auth.credentials import AnonymousCredentials, Credentials
from google.auth.transport.requests import AuthorizedSession
from google.cloud.storage import exceptions as storage_exceptions
from google.oauth2 import service_account

from silt.block.adapter import (
    CHUNK_SIZE,
    CopySource,
    ListedObject,
    ObjectStat,
    PartInfo,
    PresignedURL,
    PresignMethod,
    PutResult,
    UploadPart,
    list_page_size_of,
)
from silt.block.common import Calls, check_size, one_line
from silt.block.pinned import Pin, PinnedReadAdapter, check_as_imported
from silt.block.rules import (
    MAX_KEY_BYTES,
    MAX_PRESIGN_SECONDS,
    RESERVED_PREFIX,
    WRITE_ONCE_GCS,
    attachment,
    check_range,
    multipart_etag,
    normalize_etag,
    split_key,
    split_namespace,
)
from silt.block.streams import PieceStream, SeekableStream
from silt.config import GSBlockstoreConfig
from silt.errors import (
    AlreadyExists,
    ConfigError,
    InvalidArgument,
    NotFound,
    PredicateFailed,
    SiltError,
    Unavailable,
)

MiB = 1024 * 1024
# Objects up to this size go in one request; longer streams become resumable uploads.
SINGLE_REQUEST_SIZE = 4 * MiB
# Bytes per request of a resumable upload (GCS wants a multiple of 256 KiB).
UPLOAD_CHUNK_SIZE = 8 * MiB
# Bytes per ranged request of a download.
DOWNLOAD_CHUNK_SIZE = 4 * MiB
MAX_COMPOSE_SOURCES = 32
MAX_POOL_CONNECTIONS = 64
SCOPES = ["https://www.googleapis.com/auth/devstorage.full_control"]
DEFAULT_ENDPOINT = "https://storage.googleapis.com"

ETAG_METADATA = "silt-etag"
UPLOAD_KEY_METADATA = "silt-key"
UPLOADS_DIR = RESERVED_PREFIX + "uploads"
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")

# Errors of a request that never got an answer, or of reading one.
_TRANSPORT_ERRORS = (
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    google.auth.exceptions.GoogleAuthError,
    OSError,
)


def _one_line(text: object) -> str:
    return one_line(text, 300)


def _status_of(exc: BaseException) -> int | None:
    if isinstance(exc, api_exceptions.GoogleAPICallError):
        return int(exc.code) if exc.code is not None else None
    if isinstance(exc, storage_exceptions.InvalidResponse):
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        return int(status) if status is not None else None
    return None


def _message_of(exc: BaseException) -> str:
    if isinstance(exc, api_exceptions.GoogleAPICallError):
        return _one_line(exc.message or exc)
    return _one_line(exc)


def _translate(exc: BaseException, what: str) -> SiltError:
    status = _status_of(exc)
    message = _message_of(exc)
    if status == 404:
        return NotFound(f"{what}: not found")
    if status in (400, 411, 416):
        return InvalidArgument(f"{what}: {message}")
    if status == 412:
        return PredicateFailed(f"{what}: precondition failed")
    if isinstance(exc, storage_exceptions.DataCorruption):
        return Unavailable(f"gs {what}: the bytes stored differ from the bytes sent (checksum mismatch)")
    if isinstance(exc, api_exceptions.RetryError):
        return Unavailable(f"gs {what}: gave up retrying: {_one_line(exc.cause or exc)}")
    return Unavailable(f"gs {what}: {message}")


_TRANSIENT_STATUSES = {408, 429, 500, 502, 503, 504}


def _transient(exc: Exception) -> bool:
    """Whether a failed request is worth repeating: throttling, 5xx, a lost connection."""
    if _status_of(exc) in _TRANSIENT_STATUSES:
        return True
    return isinstance(
        exc,
        (
            requests.exceptions.ConnectionError,
            requests.exceptions.Timeout,
            requests.exceptions.ChunkedEncodingError,
            urllib3.exceptions.ProtocolError,
            google.auth.exceptions.TransportError,
            ConnectionError,
        ),
    )


_SDK_ERRORS = (
    api_exceptions.GoogleAPIError,
    storage_exceptions.InvalidResponse,
    storage_exceptions.DataCorruption,
    *_TRANSPORT_ERRORS,
)


# Turns SDK, auth and network exceptions into Silt errors.
_calls = Calls(_SDK_ERRORS, _translate)


def _hex_md5(b64: str | None) -> str | None:
    if not b64:
        return None
    try:
        return base64.b64decode(b64, validate=True).hex()
    except (binascii.Error, ValueError):
        return None


def _etag_of(blob: storage.Blob) -> str:
    metadata = blob.metadata or {}
    if metadata.get(ETAG_METADATA):
        return normalize_etag(str(metadata[ETAG_METADATA]))
    return _content_etag_of(blob)


def _content_etag_of(blob: storage.Blob) -> str:
    """The ETag of the blob's bytes as GCS itself computed them (its MD5, else its own ETag):
    never Silt's metadata, which anyone who may write the object may set."""
    return _hex_md5(blob.md5_hash) or normalize_etag(str(blob.etag or ""))


def _version_of(blob: storage.Blob) -> str:
    return str(blob.generation) if blob.generation is not None else ""


def _mtime_of(blob: storage.Blob) -> datetime:
    updated = blob.updated or blob.time_created
    return updated.astimezone(UTC) if updated is not None else datetime.now(UTC)


# --- credentials and client ------------------------------------------------------------


def _key_credentials(text: str, where: str) -> tuple[Credentials, str | None]:
    """Service account (or gcloud user) credentials from their JSON text. Only these two kinds
    are read: a credentials file can make the library run commands or fetch URLs of its
    choosing (external accounts), which a key is not expected to do."""
    try:
        info = json.loads(text)
    except ValueError:
        raise ConfigError(f"{where} is not valid JSON") from None
    kind = info.get("type") if isinstance(info, dict) else None
    try:
        if kind == "service_account":
            creds = service_account.Credentials.from_service_account_info(info, scopes=SCOPES)
            return creds, info.get("project_id")
        if kind == "authorized_user":
            user = google.oauth2.credentials.Credentials.from_authorized_user_info(info, scopes=SCOPES)
            return user, info.get("quota_project_id")
    except (ValueError, KeyError, TypeError):
        # The library's messages can quote the key; name only what is wrong.
        raise ConfigError(f"{where}: the {kind} credentials are incomplete or their key cannot be read") from None
    raise ConfigError(f"{where}: expected a service account key (type service_account or authorized_user)")


def load_credentials(config: GSBlockstoreConfig) -> tuple[Credentials, str | None]:
    """The credentials the configuration names and the project they belong to: credentials_json,
    else credentials_file, else anonymous ones for an emulator (endpoint_url), else application
    default credentials. Errors never quote the credentials."""
    if config.credentials_json is not None:
        return _key_credentials(config.credentials_json.get_secret_value(), "blockstore.gs.credentials_json")
    if config.credentials_file:
        path = os.path.expanduser(config.credentials_file)
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"blockstore.gs.credentials_file {path}: cannot read it: {_one_line(exc)}") from None
        return _key_credentials(text, f"blockstore.gs.credentials_file {path}")
    if config.endpoint_url:
        return AnonymousCredentials(), None
    try:
        creds, project = google.auth.default(scopes=SCOPES)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        # The library's messages name files and environment variables, never key material.
        raise ConfigError(f"blockstore.gs: no credentials configured and none found: {_one_line(exc)}") from None
    return creds, project


def build_client(config: GSBlockstoreConfig, credentials: Credentials, project: str | None) -> storage.Client:
    """A storage client for the blockstore.gs configuration section with these credentials."""
    session = AuthorizedSession(credentials)
    # A gateway serves many requests at once; requests' default pool of 10 would queue them.
    adapter = requests.adapters.HTTPAdapter(pool_connections=8, pool_maxsize=MAX_POOL_CONNECTIONS)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    options = {"api_endpoint": config.endpoint_url} if config.endpoint_url else None
    return storage.Client(
        project=config.project or project, credentials=credentials, _http=session, client_options=options
    )


# --- streams ---------------------------------------------------------------------------


class _Source(SeekableStream):
    """The caller's stream as the upload reads it: reads fill the requested count (the SDK
    takes a short read for the end), tell() counts bytes, the last read can be re-read (the
    SDK seeks back when GCS kept only part of a request), and a stream shorter than its
    announced size is InvalidArgument.

    Reads return one bytearray, refilled in place for each read: the SDK only hashes a read,
    takes its length and hands it to requests, which sends any buffer, before it reads again.
    Bytes objects would cost a copy of every 8 MiB request, and fresh buffers a second one (the
    SDK keeps the previous request, body included, alive while it reads the next)."""

    def __init__(self, stream: BinaryIO, size: int | None, what: str, first: bytearray | None = None) -> None:
        super().__init__()
        self._stream = stream
        self._size = size
        self._what = what
        self._pending = first
        self._position = 0
        # One buffer, refilled for every request: the SDK keeps the previous request (and so
        # its body) alive while it reads the next one, so fresh buffers would double the memory.
        self._buffer: bytearray | None = None
        self._last: bytearray | None = None  # what the last read gave out, for seeking back
        self._last_start = 0
        self._replay = 0  # bytes at the end of _last to give out again

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        last_end = self._last_start + len(self._last or b"")
        if whence not in (io.SEEK_SET, io.SEEK_CUR) or not self._last_start <= offset <= last_end:
            raise OSError("an upload stream can only seek back within the last chunk it gave out")
        self._replay = last_end - offset
        self._position = offset
        return offset

    def _read_new(self, count: int) -> bytearray:
        if self._size is not None:
            count = min(count, self._size - self._position)
        pending, self._pending = self._pending, None
        if pending is not None and len(pending) == count:
            self._buffer = pending
            return pending
        buffer = self._buffer
        if buffer is None or len(buffer) < count:
            self._buffer = buffer = self._last = None  # let go of the old buffer first
            buffer = bytearray(count)
        elif len(buffer) > count:
            del buffer[count:]
        got = 0
        with memoryview(buffer) as view:
            if pending:
                got = min(len(pending), count)
                view[:got] = memoryview(pending)[:got]
                if got < len(pending):
                    self._pending = pending[got:]
                del pending
            while got < count:
                # Exceptions of the caller's stream propagate unchanged: they are the caller's.
                piece = self._stream.read(min(CHUNK_SIZE, count - got))
                if not piece:
                    break
                view[got : got + len(piece)] = piece
                got += len(piece)
        if got < count:
            if self._size is not None:
                raise InvalidArgument(f"{self._what}: stream ended after {self._position + got} of {self._size} bytes")
            try:
                del buffer[got:]
            except BufferError:  # someone still holds a view of it: give out a copy instead
                buffer = buffer[:got]
        self._buffer = buffer
        return buffer

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = (self._size - self._position) if self._size is not None else UPLOAD_CHUNK_SIZE
        if self._replay and self._last is not None:
            offset = len(self._last) - self._replay
            replayed = self._last[offset : offset + size]
            self._replay -= len(replayed)
            self._position += len(replayed)
            return cast(bytes, replayed)
        data = self._read_new(size)
        self._position += len(data)
        if self._size is not None and self._size <= SINGLE_REQUEST_SIZE:
            # One request: the SDK wants bytes there, and never seeks back.
            self._buffer = None
            return bytes(data)
        self._last, self._last_start = data, self._position - len(data)
        return cast(bytes, data)

    def readall(self) -> bytes:
        return self.read(-1)


class _Buffer:
    """A write target that appends into one preallocated bytearray (a download's chunk)."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.length = 0

    def write(self, data: bytes) -> int:
        end = self.length + len(data)
        if end > len(self.data):
            raise Unavailable("gs download returned more bytes than asked for")
        self.data[self.length : end] = data
        self.length = end
        return len(data)


class _RangeReader(PieceStream):
    """Bytes first..last of one generation of an object, downloaded a chunk at a time as read.

    `last` None reads to the object's end, which a short chunk (or, after a chunk that ended
    exactly there, a refused range) tells: no request asks for the object's size first. The
    first chunk is fetched by `open_first`, so a missing object or a range outside it fails at
    once; the generation that chunk came from is pinned for every later one. With `generation`,
    every chunk, the first too, is read from that generation: PredicateFailed if it is no longer
    there when the read starts (the object was replaced or deleted since that generation was
    seen); a store keeping old generations still serves it, the very bytes that were seen."""

    def __init__(
        self,
        bucket: storage.Bucket,
        name: str,
        first: int,
        last: int | None,
        what: str,
        fetch: Callable[[storage.Blob, Any, int, int], None],
        generation: int | None = None,
    ) -> None:
        super().__init__()
        self._bucket = bucket
        # A generation asked for is read from the first chunk on.
        self._blob = bucket.blob(name, generation=generation)
        self._asked = generation is not None
        self._pinned = self._asked
        self._start = self._next = first
        self._last = last
        self._done = False
        self._what = what
        self._fetch = fetch
        self._buffer: _Buffer | None = None

    def open_first(self) -> None:
        """Fetch the first chunk: NotFound if there is no object, InvalidArgument if the range
        starts past its end; an empty object read whole gives no bytes."""
        start = self._next
        try:
            self._piece = self._fill()
        except api_exceptions.RequestRangeNotSatisfiable:
            if start == 0 and self._last is None:
                self._done = True  # an empty object: every range of it is refused
                return
            raise InvalidArgument(f"{self._what}: range {start}-{self._last} starts beyond the object's end") from None

    def _fill(self) -> memoryview:
        end = self._next + DOWNLOAD_CHUNK_SIZE - 1
        if self._last is not None:
            end = min(end, self._last)
        count = end - self._next + 1
        if self._buffer is None or len(self._buffer.data) < count:
            self._buffer = _Buffer(count)
        self._buffer.length = 0
        try:
            self._fetch(self._blob, self._buffer, self._next, end)
        except api_exceptions.RequestRangeNotSatisfiable:
            raise  # the callers tell an empty object or the end from a range outside it
        except _SDK_ERRORS as exc:
            error = _translate(exc, f"reading {self._what}")
            if isinstance(error, NotFound) and self._asked and self._next == self._start:
                raise PredicateFailed(f"{self._what}: generation {self._blob.generation} is no longer there") from None
            if isinstance(error, NotFound) and self._pinned:
                raise Unavailable(
                    f"gs reading {self._what}: the object was replaced or deleted while it was read"
                ) from None
            raise error from None
        if not self._pinned:
            # Every later chunk from the generation this one came from.
            self._blob = self._bucket.blob(self._blob.name, generation=self._blob.generation)
            self._pinned = True
        got = self._buffer.length
        # A short chunk: the object ends here (like HTTP, a range past the end is cut at the end).
        if got < count or self._next + got - 1 == self._last:
            self._done = True
        self._next += got
        return memoryview(self._buffer.data)[:got]

    def _next_piece(self) -> memoryview | None:
        if self._done:
            return None
        try:
            return self._fill()
        except api_exceptions.RequestRangeNotSatisfiable:
            # The previous chunk ended exactly at the object's end (its generation is pinned).
            self._done = True
            return None

    def close(self) -> None:
        self._buffer = None
        super().close()


class _EmptyReader(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return 0


# --- the adapter -----------------------------------------------------------------------


class GCSAdapter(PinnedReadAdapter):
    scheme = "gs"
    # The store's presigned PUT URLs can write the object again until they expire (unless
    # pre_signed_put_write_once): reads of a linked upload are pinned (silt/block/external.py).
    presigned_puts_replace = True

    def __init__(self, config: GSBlockstoreConfig, *, connect_timeout: float = 5.0, read_timeout: float = 60.0) -> None:
        self._config = config
        self._timeout = (connect_timeout, read_timeout)
        self._credentials, project = load_credentials(config)
        self._client = build_client(config, self._credentials, project)

    @property
    def client(self) -> storage.Client:
        return self._client

    def _retry(self) -> Retry | None:
        """A retry policy for one call: transient errors only, at most max_retries times."""
        limit = self._config.max_retries
        if limit <= 0:
            return None
        attempts = [0]

        def counted(exc: Exception) -> None:
            attempts[0] += 1
            if attempts[0] > limit:
                raise exc

        return Retry(predicate=_transient, initial=0.2, maximum=5.0, multiplier=2.0, timeout=120.0, on_error=counted)

    def _locate(self, namespace: str, key: str) -> tuple[storage.Bucket, str, str]:
        """(bucket, full object name, how error messages name it)."""
        bucket, prefix = split_namespace(namespace, self.scheme)
        name = "/".join([*prefix, *split_key(key)])
        if len(name.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidArgument(f"gs://{bucket}/{name[:80]}...: prefix and key exceed {MAX_KEY_BYTES} bytes")
        return self._client.bucket(bucket), name, f"gs://{bucket}/{name}"

    def _reload(self, bucket: storage.Bucket, name: str, what: str) -> storage.Blob:
        blob = bucket.blob(name)
        with _calls(what):
            blob.reload(timeout=self._timeout, retry=self._retry())
        return blob

    # --- objects ---------------------------------------------------------------------

    def _upload(
        self,
        blob: storage.Blob,
        stream: BinaryIO,
        size: int | None,
        what: str,
        *,
        if_generation_match: int | None = None,
    ) -> PutResult:
        """Write the stream as `blob` (its metadata set beforehand goes along); the MD5 GCS
        computed, which matches the one computed here on the way."""
        check_size(size, what)
        first = None
        if size is None:
            # A stream that ends within SINGLE_REQUEST_SIZE is sent in one request; the bytes
            # read to find out make the first request of a longer one.
            first = _Source(stream, None, what)._read_new(UPLOAD_CHUNK_SIZE)
            if len(first) <= SINGLE_REQUEST_SIZE:
                size = len(first)
        source = _Source(stream, size, what, first)
        del first
        blob.chunk_size = UPLOAD_CHUNK_SIZE
        with _calls(what):
            try:
                blob.upload_from_file(
                    source,
                    size=size if size is not None and size <= SINGLE_REQUEST_SIZE else None,
                    content_type="application/octet-stream",
                    if_generation_match=if_generation_match,
                    checksum="md5",
                    timeout=self._timeout,
                    retry=self._retry(),
                )
            except ValueError as exc:
                # The SDK's own complaint about a stream shorter than its size, or a stream
                # that does not behave like a file.
                raise InvalidArgument(f"{what}: {_one_line(exc)}") from None
        written = source.tell()
        if size is not None and written < size:
            raise InvalidArgument(f"{what}: stream ended after {written} of {size} bytes")
        etag = _hex_md5(blob.md5_hash)
        if etag is None:
            raise Unavailable(f"gs {what}: the store reported no MD5 for the object written")
        return PutResult(size=int(blob.size if blob.size is not None else written), etag=etag)

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        bucket, name, what = self._locate(namespace, key)
        return self._upload(bucket.blob(name), stream, size, what)

    def put_if_absent(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        bucket, name, what = self._locate(namespace, key)
        try:
            return self._upload(bucket.blob(name), stream, size, what, if_generation_match=0)
        except PredicateFailed:
            raise AlreadyExists(f"{what}: the object already exists") from None

    def _fetch(self, blob: storage.Blob, target: Any, start: int, end: int) -> None:
        blob.download_to_file(
            target,
            start=start,
            end=end,
            raw_download=True,
            checksum=None,
            timeout=self._timeout,
            retry=self._retry(),
        )

    def _open(
        self, bucket: storage.Bucket, name: str, what: str, start: int, end: int | None, generation: int | None = None
    ) -> BinaryIO:
        # One request for a small object: the first chunk's response says what the object is.
        reader = _RangeReader(bucket, name, start, end, what, self._fetch, generation)
        reader.open_first()
        return io.BufferedReader(reader, 64 * 1024)

    def get(self, namespace: str, key: str) -> BinaryIO:
        bucket, name, what = self._locate(namespace, key)
        return self._open(bucket, name, what, 0, None)

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        check_range(start, end)
        bucket, name, what = self._locate(namespace, key)
        return self._open(bucket, name, what, start, end)

    def _read_pinned(self, namespace: str, key: str, pin: Pin, byte_range: tuple[int, int] | None) -> BinaryIO:
        """get_if_match of an imported object: for sources Silt does not own, so nothing a writer
        of the object can set is trusted.

        With the pin's version (the generation GCS gave the object when it was imported), that generation
        is read, every chunk of it: the very bytes imported, or PredicateFailed once it is gone
        (replaced in a bucket that keeps no old generations). Without (an entry imported before
        generations were recorded), the object's metadata is read and its size and the ETag GCS
        computed of its bytes (MD5; GCS's own ETag for a composite object) compared with the
        pin's, never Silt's ETag metadata; the read then takes the generation that
        metadata described, so a replacement in between fails it. PredicateFailed when the
        object is not the one imported, NotFound when there is none."""
        bucket, name, what = self._locate(namespace, key)
        start, end = (0, None) if byte_range is None else byte_range
        if pin.version:
            try:
                generation = int(pin.version)
            except ValueError:
                raise PredicateFailed(f"{what}: the recorded generation {pin.version!r} is not one") from None
            return self._open(bucket, name, what, start, end, generation)
        blob = self._reload(bucket, name, what)
        check_as_imported(what, pin, int(blob.size or 0), _content_etag_of(blob))
        if blob.generation is None:
            raise Unavailable(f"gs {what}: the store reported no generation for the object")
        return self._open(bucket, name, what, start, end, int(blob.generation))

    def stat(self, namespace: str, key: str) -> ObjectStat:
        bucket, name, what = self._locate(namespace, key)
        blob = self._reload(bucket, name, what)
        return ObjectStat(
            size=int(blob.size or 0),
            etag=_etag_of(blob),
            mtime=_mtime_of(blob),
            version=_version_of(blob),
            storage_class=blob.storage_class or None,
        )

    def delete(self, namespace: str, key: str) -> None:
        bucket, name, what = self._locate(namespace, key)
        self._delete(bucket, name, what)

    def _delete(self, bucket: storage.Bucket, name: str, what: str) -> None:
        # Like a missing object, a missing bucket leaves nothing to delete.
        with contextlib.suppress(NotFound), _calls(what):
            bucket.blob(name).delete(timeout=self._timeout, retry=self._retry())

    def _rewrite(self, source: storage.Blob, destination: storage.Blob, what: str) -> storage.Blob:
        """Copy `source` (its generation pinned) to `destination` inside GCS, keeping the source's
        custom metadata (the ETag of a composed object). Large copies take several calls."""
        destination.metadata = source.metadata or None
        destination.content_type = source.content_type
        pinned = source.bucket.blob(source.name, generation=source.generation)
        token: str | None = None
        with _calls(what):
            while True:
                token, _, _ = destination.rewrite(pinned, token=token, timeout=self._timeout, retry=self._retry())
                if token is None:
                    return destination

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        src_bucket, src_name, src_what = self._locate(src_namespace, src_key)
        dst_bucket, dst_name, dst_what = self._locate(dst_namespace, dst_key)
        source = self._reload(src_bucket, src_name, src_what)
        copied = self._rewrite(source, dst_bucket.blob(dst_name), f"copying {src_what} to {dst_what}")
        return PutResult(size=int(copied.size if copied.size is not None else source.size or 0), etag=_etag_of(copied))

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        bucket, parts = split_namespace(namespace, self.scheme)
        base = "/".join(parts) + "/" if parts else ""
        what = f"listing gs://{bucket}/{base}{prefix}"
        arguments: dict[str, Any] = {"prefix": base + prefix, "timeout": self._timeout, "retry": self._retry()}
        page_size = list_page_size_of(self)
        if page_size is not None:
            arguments["page_size"] = page_size
        if after:
            # startOffset is inclusive; the key equal to `after` is dropped below.
            arguments["start_offset"] = base + after
        with _calls(what):
            for blob in self._client.list_blobs(bucket, **arguments):
                key = str(blob.name)[len(base) :]
                if key == after or not key:
                    continue
                if any(part.startswith(RESERVED_PREFIX) for part in key.split("/")):
                    continue
                yield ListedObject(key, int(blob.size or 0), _etag_of(blob), _mtime_of(blob), _version_of(blob))

    # --- presigned URLs ---------------------------------------------------------------

    def presign(
        self, namespace: str, key: str, method: PresignMethod, expires_in: int, filename: str | None = None
    ) -> PresignedURL | None:
        bucket, name, what = self._locate(namespace, key)
        if (
            isinstance(expires_in, bool)
            or not isinstance(expires_in, int)
            or not 1 <= expires_in <= MAX_PRESIGN_SECONDS
        ):
            raise InvalidArgument(f"{what}: a presigned URL lives 1 to {MAX_PRESIGN_SECONDS} seconds, not {expires_in}")
        if method not in ("GET", "PUT"):
            raise InvalidArgument(f"{what}: presigned URLs are for GET or PUT, not {method!r}")
        credentials = self._credentials
        if not isinstance(credentials, service_account.Credentials):
            # No key to sign with here: the edge's own URLs serve instead (see the module's notes).
            return None
        endpoint = self._config.pre_signed_endpoint or self._config.endpoint_url or DEFAULT_ENDPOINT
        expires = int(time.time()) + expires_in
        with _calls(f"presigning {what}"):
            url: str = bucket.blob(name).generate_signed_url(
                version="v4",
                expiration=timedelta(seconds=expires_in),
                method=method,
                # Signed, so the upload must send it: the URL creates the object once, never replaces it.
                headers=dict([WRITE_ONCE_GCS]) if method == "PUT" and self._config.pre_signed_put_write_once else None,
                response_disposition=attachment(filename) if method == "GET" and filename else None,
                credentials=credentials,
                api_access_endpoint=endpoint.rstrip("/"),
            )
        return PresignedURL(url, expires)

    # --- multipart uploads -----------------------------------------------------------

    def _upload_names(self, namespace: str, key: str, upload_id: str) -> tuple[storage.Bucket, str, str, str]:
        """(bucket, the object's name, its marker's name, how messages name the upload)."""
        bucket, name, what = self._locate(namespace, key)
        _, prefix = split_namespace(namespace, self.scheme)
        if not isinstance(upload_id, str) or not _UPLOAD_ID.match(upload_id):
            raise NotFound(f"{what}: no multipart upload {str(upload_id)[:80]!r}")
        marker = "/".join([*prefix, UPLOADS_DIR, upload_id])
        return bucket, name, marker, f"{what} (upload {upload_id})"

    def _check_upload(self, bucket: storage.Bucket, name: str, marker: str, what: str) -> None:
        try:
            blob = self._reload(bucket, marker, what)
        except NotFound:
            raise NotFound(f"{what}: no such multipart upload") from None
        if (blob.metadata or {}).get(UPLOAD_KEY_METADATA) != name:
            raise NotFound(f"{what}: no such multipart upload for this key")

    def _parts(self, bucket: storage.Bucket, marker: str, what: str) -> list[storage.Blob]:
        with _calls(what):
            return list(
                self._client.list_blobs(bucket, prefix=marker + "/", timeout=self._timeout, retry=self._retry())
            )

    def create_multipart_upload(self, namespace: str, key: str) -> str:
        bucket, name, _ = self._locate(namespace, key)
        upload_id = uuid.uuid4().hex
        _, _, marker, what = self._upload_names(namespace, key, upload_id)
        blob = bucket.blob(marker)
        blob.metadata = {UPLOAD_KEY_METADATA: name}
        with _calls(what):
            blob.upload_from_string(
                b"", content_type="application/octet-stream", timeout=self._timeout, retry=self._retry()
            )
        return upload_id

    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        bucket, name, marker, what = self._upload_names(part.namespace, part.key, part.upload_id)
        check_size(size, what)
        self._check_upload(bucket, name, marker, what)
        result = self._upload(bucket.blob(f"{marker}/{part.number:05d}"), stream, size, f"{what} part {part.number}")
        return PartInfo(part_number=part.number, etag=result.etag)

    def _copy_part(self, part: UploadPart, source: CopySource) -> PartInfo:
        bucket, name, marker, what = self._upload_names(part.namespace, part.key, part.upload_id)
        self._check_upload(bucket, name, marker, what)
        if source.byte_range is not None:
            return super()._copy_part(part, source)
        src_bucket, src_name, src_what = self._locate(source.namespace, source.key)
        original = self._reload(src_bucket, src_name, src_what)
        md5 = _hex_md5(original.md5_hash)
        if md5 is None:
            # A composed object has no MD5 of its bytes: the part's ETag needs one, so read it.
            return super()._copy_part(part, source)
        target = bucket.blob(f"{marker}/{part.number:05d}")
        self._rewrite(original, target, f"copying {src_what} into {what} part {part.number}")
        return PartInfo(part_number=part.number, etag=md5)

    def _compose(self, destination: storage.Blob, sources: list[storage.Blob], what: str) -> storage.Blob:
        with _calls(what):
            destination.compose(sources, timeout=self._timeout, retry=self._retry())
        return destination

    def _complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        bucket, name, marker, what = self._upload_names(namespace, key, upload_id)
        self._check_upload(bucket, name, marker, what)
        stored = {blob.name: blob for blob in self._parts(bucket, marker, what)}
        sources: list[storage.Blob] = []
        digests: list[bytes] = []
        for part in parts:
            blob = stored.get(f"{marker}/{part.part_number:05d}")
            if blob is None:
                raise InvalidArgument(f"{what}: part {part.part_number} was never uploaded")
            md5 = _hex_md5(blob.md5_hash)
            if md5 is None or normalize_etag(part.etag) != md5:
                raise InvalidArgument(f"{what}: part {part.part_number}'s ETag {part.etag} does not match the part")
            sources.append(blob)
            digests.append(bytes.fromhex(md5))
        etag = multipart_etag(digests)
        # Compose takes at most 32 sources: join groups of 32 into intermediate objects
        # (under the upload, so they go with it) until one request can make the object.
        level = 0
        intermediates: list[str] = []
        try:
            while len(sources) > MAX_COMPOSE_SOURCES:
                joined = []
                for index in range(0, len(sources), MAX_COMPOSE_SOURCES):
                    group = sources[index : index + MAX_COMPOSE_SOURCES]
                    if len(group) == 1:
                        joined.append(group[0])
                        continue
                    stage = bucket.blob(f"{marker}/{RESERVED_PREFIX}compose-{level}-{index // MAX_COMPOSE_SOURCES}")
                    stage.content_type = "application/octet-stream"
                    intermediates.append(stage.name)
                    joined.append(self._compose(stage, group, what))
                sources, level = joined, level + 1
            target = bucket.blob(name)
            target.content_type = "application/octet-stream"
            target.metadata = {ETAG_METADATA: etag}
            self._compose(target, sources, what)
        finally:
            for stage_name in intermediates:
                with contextlib.suppress(SiltError):
                    self._delete(bucket, stage_name, what)
        self._discard(bucket, marker, what)
        return PutResult(size=int(target.size or 0), etag=etag)

    def _discard(self, bucket: storage.Bucket, marker: str, what: str) -> None:
        """Delete an upload's parts, then its marker, then any part written meanwhile."""
        for blob in self._parts(bucket, marker, what):
            self._delete(bucket, blob.name, what)
        self._delete(bucket, marker, what)
        for blob in self._parts(bucket, marker, what):
            self._delete(bucket, blob.name, what)

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        bucket, name, marker, what = self._upload_names(namespace, key, upload_id)
        self._check_upload(bucket, name, marker, what)
        self._discard(bucket, marker, what)
