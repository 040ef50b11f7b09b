"""The Azure Blob Storage block adapter, on azure-storage-blob: block blobs in a container.

Namespaces. ``https://<account>.<domain>/<container>[/<prefix>]`` (the domain is
``blockstore.azure.domain``, ``blob.core.windows.net`` by default); when
``blockstore.azure.test_endpoint_url`` names an emulator, namespaces are path-style instead:
``<test_endpoint_url>/<account>/<container>[/<prefix>]`` (Azurite:
``http://127.0.0.1:10000/devstoreaccount1/container/prefix``), and only those. The prefix
follows the key rules of silt/block/rules.py; one trailing slash is accepted. Credentials, the
first that is configured: a connection string, the account's shared key, else Azure's default
credential chain (azure-identity, imported when first needed). A connection string or a shared
key reaches its own account only; the default credential reaches any account on the domain,
with one client per account.

ETags. Azure's own ETags are opaque version stamps, but Silt's are S3's: the hex MD5 of the
bytes, or ``<md5 of the parts' md5s>-<N>`` after a multipart upload. Every write computes the
MD5 as the bytes stream past and stores the ETag in the blob's metadata (``silt_etag``); a copy
carries it along. A blob written by another tool reports its Content-MD5 property as hex, or
failing that Azure's ETag without its quotes.

Streaming. ``put`` reads the caller's stream one block (8 MiB, larger only for objects over
390 GiB) at a time into a buffer — memory up to 8 MiB, a temporary file beyond — so a retry
can rewind it. A stream that ends within the first block is sent with one Put Blob; anything
longer is staged block by block and committed with one Put Block List, so readers see the old
object or the new one, whole. ``get`` and ``get_range`` stream the body of one Get Blob request
in 256 KiB pieces as the caller reads (one version, no matter what is written meanwhile), with
Azure SDK errors in reads translated too.

Multipart uploads are S3's, built on staged (uncommitted) blocks of the target blob itself:

* ``create_multipart_upload`` writes a marker blob ``.silt-uploads/<upload id>`` in the object's
  own directory, inside its namespace's prefix (no key and no listing ever reaches a ``.silt-``
  name), whose metadata binds the upload id to the target blob's name; any other upload id is
  NotFound, and so is the id after complete or abort.
* ``upload_part`` buffers the part (8 MiB in memory, a temporary file beyond), then stages it as
  one block whose id encodes the upload id, the part number and the part's MD5 (all block ids,
  put's too, are 60 characters: Azure wants every block id of a blob to have one length).
* ``complete_multipart_upload`` reads the blob's uncommitted block list, finds for each listed
  part the block of that upload, number and ETag (InvalidArgument, with the upload left as it was,
  when one is missing), commits them in order with the multipart ETag in the metadata and removes
  the marker.
* ``abort_multipart_upload`` removes the marker. Azure has no call that drops staged blocks: they
  are discarded by the next commit of that blob, or by Azure a week after they were staged.

Deviations from S3:

* A put (or another upload's complete) of the same key while a multipart upload of it is in
  progress discards that upload's staged parts (Azure drops a blob's uncommitted blocks whenever
  it is committed); completing the upload afterwards fails with InvalidArgument. Silt writes each
  physical address once, so this does not happen to its own uploads.
* A part holds at most 4000 MiB (Azure's largest block), not 5 GiB, and an upload holds at most
  50,000 parts' worth of blocks (10,000 parts fit). Parts under 5 MiB are accepted anywhere.
* A part number uploaded again replaces the part, but the earlier bytes stay staged until the
  upload ends: completing with the earlier part's ETag takes the earlier bytes, where S3 would
  answer InvalidPart.
* Empty parts are not staged (Azure refuses empty blocks): a part listed with the MD5 of no bytes
  is taken as empty.
* ``copy`` within an account is a server-side Copy Blob of the version whose size was read; across
  accounts (only possible with the default credential) the bytes pass through this process.
  ``upload_part_copy`` always streams the range through this process (the part's MD5 must be
  known to name its block).
* ``list_objects`` returns the blob service's order, which is the keys' UTF-8 byte order for every
  key without characters beyond the Basic Multilingual Plane. Azure has no start-after: listing
  ``after`` a key reads (and skips) the keys before it.

Errors. Every Azure SDK and transport exception is translated: missing blobs, containers and
uploads become NotFound, requests Azure rejects as malformed (400, 413, 416) InvalidArgument,
conflicting creates AlreadyExists, and everything else (authentication, network errors,
timeouts, throttling, 5xx) Unavailable, with a one-line message naming the object; secrets
never appear in messages (query strings, where a SAS would be, are cut out).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import re
import secrets
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

import requests
import requests.adapters
import urllib3.exceptions
import urllib3.util
from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import (
    BlobBlock,
    BlobClient,
    BlobProperties,
    BlobSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ContentSettings,
    ExponentialRetry,
    UserDelegationKey,
    generate_blob_sas,
)
from azure.storage.blob._generated.models import ModifiedAccessConditions

from silt.block.adapter import (
    ListedObject,
    ObjectStat,
    PartInfo,
    PresignedURL,
    PresignMethod,
    PutResult,
    UploadPart,
    list_page_size_of,
)
from silt.block.common import Calls, Pieces, Spool, check_part_size, check_size, one_line, spool_part
from silt.block.pinned import Pin, PinnedReadAdapter, check_as_imported
from silt.block.rules import (
    MAX_KEY_BYTES,
    MAX_PRESIGN_SECONDS,
    RESERVED_PREFIX,
    attachment,
    check_range,
    multipart_etag,
    normalize_etag,
    split_key,
)
from silt.block.streams import PieceStream
from silt.config import AzureBlockstoreConfig
from silt.errors import AlreadyExists, ConfigError, InvalidArgument, NotFound, PredicateFailed, SiltError, Unavailable

MiB = 1024 * 1024
BLOCK_SIZE = 8 * MiB  # put's blocks, and the largest object sent with one Put Blob
DOWNLOAD_CHUNK = 256 * 1024  # the pieces a download's body is read in
MAX_BLOCKS = 50_000  # Azure's limit of committed blocks in a blob
MAX_BLOCK_SIZE = 4000 * MiB  # Azure's largest block
MAX_PART_SIZE = MAX_BLOCK_SIZE
MAX_OBJECT_SIZE = MAX_BLOCKS * MAX_BLOCK_SIZE
MAX_POOL_CONNECTIONS = 64
COPY_POLL_SECONDS = 0.2
_PART_SHOWN = f"{MAX_PART_SIZE // MiB} MiB"
# Blocks double every 10,000, so 50,000 blocks hold far more than S3's 5 TiB.
BLOCKS = Pieces("azure", f"Azure's limit of {MAX_BLOCKS} blocks", BLOCK_SIZE, MAX_BLOCKS, 10_000)

ETAG_METADATA = "silt_etag"
TARGET_METADATA = "silt_target"
UPLOADS = RESERVED_PREFIX + "uploads"
EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).digest()

_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
_CONTAINER = re.compile(r"(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
_HEX_MD5 = re.compile(r"[0-9a-f]{32}")
_QUERY = re.compile(r"\?\S*")

# Block ids: one letter, 32 hex digits (put: a random token; part: the upload id), five digits
# (put: the block's sequence number; part: the part number), then 22 characters (part: the
# part's MD5 in unpadded URL-safe base64; put: dashes). 60 characters, under Azure's 64.
_PUT_BLOCK_TAIL = "-" * 22


def _put_block_id(token: str, seq: int) -> str:
    return f"p{token}{seq:05d}{_PUT_BLOCK_TAIL}"


def _part_block_id(upload_id: str, number: int, md5: bytes) -> str:
    digest = base64.urlsafe_b64encode(md5).decode("ascii").rstrip("=")
    return f"m{upload_id}{number:05d}{digest}"


_INVALID_CODES = {
    "InvalidBlobOrBlock",
    "InvalidBlockId",
    "InvalidBlockList",
    "InvalidHeaderValue",
    "InvalidInput",
    "InvalidQueryParameterValue",
    "InvalidRange",
    "InvalidResourceName",
    "InvalidUri",
    "Md5Mismatch",
    "OutOfRangeInput",
    "OutOfRangeQueryParameterValue",
    "RequestBodyTooLarge",
}


def _one_line(text: object) -> str:
    return _QUERY.sub("?...", one_line(text))


def _translate(exc: Exception, what: str) -> SiltError:
    if isinstance(exc, HttpResponseError):
        status = exc.status_code or 0
        # The generated client's errors carry the code only in a response header.
        headers = getattr(exc.response, "headers", None) or {}
        code = str(getattr(exc, "error_code", None) or headers.get("x-ms-error-code") or "")
        reason = _one_line(exc.reason or "")
        detail = code or reason or str(status)
        if isinstance(exc, ResourceNotFoundError) or status == 404:
            return NotFound(f"{what}: {detail}")
        if isinstance(exc, ClientAuthenticationError):
            return Unavailable(f"azure {what}: not authorized ({status} {detail})")
        if isinstance(exc, ResourceExistsError) and code == "BlobAlreadyExists":
            return AlreadyExists(f"{what}: {detail}")
        if status in (400, 413, 416) or code in _INVALID_CODES:
            return InvalidArgument(f"{what}: {detail}")
        return Unavailable(f"azure {what}: {status} {detail}")
    # The first line only: transport errors repeat the request, and the rest is a traceback.
    first = _one_line(str(exc).splitlines()[0] if str(exc) else "")
    return Unavailable(
        f"azure {what}: {type(exc).__name__}: {first}" if first else f"azure {what}: {type(exc).__name__}"
    )


# Turns Azure SDK and network exceptions into Silt errors.
_calls = Calls((AzureError, requests.RequestException, urllib3.exceptions.HTTPError, OSError), _translate)


def _utc(value: datetime | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _etag_of(props: BlobProperties) -> str:
    """The blob's S3-form ETag: Silt's record of it, else its Content-MD5, else Azure's ETag."""
    recorded = (props.metadata or {}).get(ETAG_METADATA)
    return normalize_etag(recorded) if recorded else _content_etag_of(props)


def _version_of(props: BlobProperties) -> str:
    """Azure's ETag of the blob, quoted as an If-Match header carries it (a listing gives it
    bare, Get Blob Properties quoted)."""
    etag = str(props.etag or "")
    if not etag or etag.startswith(('"', "W/")):
        return etag
    return f'"{etag}"'


def _content_etag_of(props: BlobProperties) -> str:
    """The ETag of the blob's bytes from its properties alone (its Content-MD5, else Azure's
    ETag): never Silt's metadata, which anyone who may write the blob may set."""
    content_md5 = props.content_settings.content_md5 if props.content_settings else None
    if content_md5:
        return bytes(content_md5).hex()
    return normalize_etag(str(props.etag or ""))


class _BlobReader(PieceStream):
    """The body of one Get Blob response, streamed as it arrives; read errors are Silt errors and
    closing releases the connection."""

    def __init__(self, body: Iterator[bytes], response: Any, what: str) -> None:
        super().__init__()
        self._body = body
        self._response = response
        self._what = what

    def _next_piece(self) -> bytes | None:
        with _calls(f"reading {self._what}"):
            return next(self._body, None)

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._response.close()
        super().close()


@dataclass(frozen=True)
class _Target:
    """A blob: its account, container and name, its client, and how messages name it."""

    account: str
    container: str
    name: str
    blob: BlobClient
    what: str


def _retries_within(try_timeout: float, read_timeout: float, wanted: int) -> int:
    """As many of `wanted` retries as fit, with their backoff, in the deadline of one request."""
    retries = 0
    spent = read_timeout
    while retries < wanted:
        spent += 1 + 2**retries + read_timeout
        if spent > try_timeout:
            break
        retries += 1
    return retries


class AzureAdapter(PinnedReadAdapter):
    scheme = "azure"

    def __init__(
        self,
        config: AzureBlockstoreConfig,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        retries: int = 3,
    ) -> None:
        self._config = config
        self._endpoint = config.test_endpoint_url.rstrip("/") if config.test_endpoint_url else None
        self._domain = config.domain.strip(".").lower()
        try_timeout = config.try_timeout_seconds
        read_timeout = min(read_timeout, try_timeout)
        self._client_options: dict[str, Any] = {
            "connection_timeout": min(connect_timeout, try_timeout),
            "read_timeout": read_timeout,
            "retry_policy": ExponentialRetry(
                initial_backoff=1,
                increment_base=2,
                retry_total=_retries_within(try_timeout, read_timeout, retries),
                random_jitter_range=1,
            ),
            "max_single_put_size": BLOCK_SIZE,
            "max_block_size": BLOCK_SIZE,
            "connection_data_block_size": DOWNLOAD_CHUNK,
        }
        self._copy_timeout = try_timeout
        self._lock = threading.Lock()
        self._clients: dict[str, BlobServiceClient] = {}
        self._credential: Any = None  # the default credential, made on first use
        self._delegation_keys: dict[str, tuple[UserDelegationKey, datetime]] = {}
        self._fixed_account: str | None = None
        self._account_key: str | None = None
        try:
            if config.connection_string is not None:
                client = BlobServiceClient.from_connection_string(
                    config.connection_string.get_secret_value(),
                    transport=self._transport(self._client_options),
                    **self._client_options,
                )
                self._fixed_account = str(client.account_name)
                self._account_key = getattr(client.credential, "account_key", None)
                self._clients[self._fixed_account] = client
            elif config.storage_account and config.storage_access_key is not None:
                self._fixed_account = config.storage_account
                self._account_key = config.storage_access_key.get_secret_value()
                self._clients[config.storage_account] = BlobServiceClient(
                    self._account_url(config.storage_account),
                    credential={"account_name": config.storage_account, "account_key": self._account_key},
                    transport=self._transport(self._client_options),
                    **self._client_options,
                )
        except (ValueError, AzureError) as exc:
            # The SDK's messages can quote the connection string: name the problem's kind only.
            raise ConfigError(f"blockstore.azure: cannot create the Azure client ({type(exc).__name__})") from None

    @staticmethod
    def _transport(options: dict[str, Any]) -> RequestsTransport:
        """A transport whose connection pool serves a gateway's many concurrent requests (the
        default keeps 10 connections). Retries are the pipeline's, never urllib3's. The timeouts
        and block size go to the transport itself: a client given a transport of its own takes
        none of them from its options (it would wait 300 s per connect and per read)."""
        session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(
            pool_connections=MAX_POOL_CONNECTIONS,
            pool_maxsize=MAX_POOL_CONNECTIONS,
            max_retries=urllib3.util.Retry(total=False, redirect=False, raise_on_status=False),
        )
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        return RequestsTransport(
            session=session,
            session_owner=True,
            connection_timeout=options["connection_timeout"],
            read_timeout=options["read_timeout"],
            connection_data_block_size=options["connection_data_block_size"],
        )

    @property
    def credential_kind(self) -> str:
        """Which credentials the adapter uses: "connection_string", "shared_key" or "default"."""
        if self._config.connection_string is not None:
            return "connection_string"
        return "shared_key" if self._fixed_account else "default"

    def service_client(self, account: str) -> BlobServiceClient:
        """The SDK's client of an account (InvalidArgument for one the credentials cannot reach)."""
        return self._service(account, self._account_url(account))

    def _account_url(self, account: str) -> str:
        return f"{self._endpoint}/{account}" if self._endpoint else f"https://{account}.{self._domain}"

    def _service(self, account: str, namespace: str) -> BlobServiceClient:
        if self._fixed_account is not None:
            if account != self._fixed_account:
                raise InvalidArgument(
                    f"storage namespace {namespace!r}: account {account!r} is not the configured account "
                    f"{self._fixed_account!r} (its credentials reach no other)"
                )
            return self._clients[account]
        with self._lock:
            client = self._clients.get(account)
            if client is None:
                if self._credential is None:
                    from azure.identity import DefaultAzureCredential

                    self._credential = DefaultAzureCredential()
                client = BlobServiceClient(
                    self._account_url(account),
                    credential=self._credential,
                    transport=self._transport(self._client_options),
                    **self._client_options,
                )
                self._clients[account] = client
            return client

    # --- names -------------------------------------------------------------------------

    def parse_namespace(self, namespace: str) -> tuple[str, str, list[str]]:
        """(account, container, prefix components) of a storage namespace, or InvalidArgument."""
        if not isinstance(namespace, str):
            raise InvalidArgument(f"storage namespace must be a string, got {type(namespace).__name__}")
        shown = repr(namespace if len(namespace) <= 80 else namespace[:77] + "...")
        if self._endpoint:
            form = f"{self._endpoint}/<account>/<container>[/<prefix>]"
        else:
            form = f"https://<account>.{self._domain}/<container>[/<prefix>]"

        def refuse(problem: str) -> InvalidArgument:
            return InvalidArgument(f"invalid storage namespace {shown}: {problem} (expected {form})")

        if "?" in namespace or "#" in namespace:
            raise refuse("a query or fragment is not part of a namespace")
        if self._endpoint:
            head = self._endpoint + "/"
            if not namespace.startswith(head):
                raise refuse("not under the configured test endpoint")
            account, _, rest = namespace[len(head) :].partition("/")
        else:
            head = "https://"
            if not namespace.startswith(head):
                raise refuse("not an https:// Azure Blob Storage address")
            host, _, rest = namespace[len(head) :].partition("/")
            suffix = "." + self._domain
            if not host.endswith(suffix):
                raise refuse(f"the host is not <account>.{self._domain}")
            account = host[: -len(suffix)]
        if not _ACCOUNT.fullmatch(account):
            raise refuse("a storage account name is 3 to 24 lower-case letters and digits")
        if rest.endswith("/"):
            rest = rest[:-1]
        container, slash, prefix = rest.partition("/")
        if not _CONTAINER.fullmatch(container):
            raise refuse("a container name is 3 to 63 lower-case letters, digits and single hyphens")
        if slash and not prefix:
            raise refuse("empty path component")
        try:
            parts = split_key(prefix) if prefix else []
        except InvalidArgument as exc:
            raise refuse(str(exc)) from None
        return account, container, parts

    def _address(self, account: str, container: str, name: str = "") -> str:
        base = f"{self._account_url(account)}/{container}"
        return f"{base}/{name}" if name else base

    def _locate(self, namespace: str, key: str) -> _Target:
        account, container, prefix = self.parse_namespace(namespace)
        name = "/".join([*prefix, *split_key(key)])
        if len(name.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidArgument(
                f"{self._address(account, container, name[:80])}...: prefix and key exceed {MAX_KEY_BYTES} bytes"
            )
        service = self._service(account, namespace)
        return _Target(
            account, container, name, service.get_blob_client(container, name), self._address(account, container, name)
        )

    def _container(self, target: _Target) -> ContainerClient:
        return self._service(target.account, "").get_container_client(target.container)

    def _properties(self, target: _Target) -> BlobProperties:
        with _calls(target.what):
            props: BlobProperties = target.blob.get_blob_properties()
        return props

    # --- objects -----------------------------------------------------------------------

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        target = self._locate(namespace, key)
        return self._upload(target, stream, size, if_absent=False)

    def put_if_absent(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        target = self._locate(namespace, key)
        return self._upload(target, stream, size, if_absent=True)

    def _upload(
        self, target: _Target, stream: BinaryIO, size: int | None, *, if_absent: bool, etag: str | None = None
    ) -> PutResult:
        """Write the stream as the blob (only if there is none when `if_absent`); its ETag is the
        MD5 of the bytes, or `etag` when given (a copy keeps its source's)."""
        what = target.what
        check_size(size, what)
        if size is not None and size > MAX_OBJECT_SIZE:
            raise InvalidArgument(f"{what}: {size} bytes exceeds Azure's block blob size limit")
        block_size = BLOCKS.size_for(size)
        running = hashlib.md5(usedforsecurity=False)
        first, carry, single = BLOCKS.first(stream, size, block_size, what, running)
        with first:
            if single:
                result_etag = etag or first.md5.hex()
                with self._writing(target, if_absent):
                    target.blob.upload_blob(
                        first.file,
                        length=first.size,
                        overwrite=not if_absent,
                        metadata={ETAG_METADATA: result_etag},
                        content_settings=ContentSettings(content_md5=bytearray(first.md5)),
                    )
                return PutResult(size=first.size, etag=result_etag)
            spools = BLOCKS.all(stream, size, first, carry, block_size, what, running)
            return self._upload_blocks(target, spools, running, if_absent, etag)

    @staticmethod
    def _conditions(if_absent: bool) -> dict[str, Any]:
        return {"match_condition": MatchConditions.IfMissing} if if_absent else {}

    @contextlib.contextmanager
    def _writing(self, target: _Target, if_absent: bool) -> Iterator[None]:
        """_calls for a write; with `if_absent`, an existing blob is AlreadyExists."""
        try:
            yield
        except (ResourceExistsError, ResourceModifiedError) as exc:
            if if_absent:
                raise AlreadyExists(f"{target.what}: the object already exists") from None
            raise _translate(exc, target.what) from None
        except (AzureError, requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _translate(exc, target.what) from None

    def _upload_blocks(
        self, target: _Target, spools: Generator[Spool], md5: Any, if_absent: bool, etag: str | None
    ) -> PutResult:
        token = secrets.token_hex(16)
        blocks: list[BlobBlock] = []
        total = 0
        # Each block is let go before the next is read: one block in memory at a time.
        with contextlib.closing(spools):
            for buffer in spools:
                block_id = _put_block_id(token, len(blocks))
                with _calls(target.what):
                    target.blob.stage_block(block_id, buffer.file, length=buffer.size)
                blocks.append(BlobBlock(block_id))
                total += buffer.size
        digest = md5.digest()
        result_etag = etag or digest.hex()
        with self._writing(target, if_absent):
            target.blob.commit_block_list(
                blocks,
                metadata={ETAG_METADATA: result_etag},
                content_settings=ContentSettings(content_md5=bytearray(digest)),
                **self._conditions(if_absent),
            )
        return PutResult(size=total, etag=result_etag)

    def get(self, namespace: str, key: str) -> BinaryIO:
        target = self._locate(namespace, key)
        return self._download(target, None, None)

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        check_range(start, end)
        target = self._locate(namespace, key)
        return self._download(target, start, end - start + 1)

    def _read_pinned(self, namespace: str, key: str, pin: Pin, byte_range: tuple[int, int] | None) -> BinaryIO:
        """get_if_match of an imported blob: for sources Silt does not own, so nothing a writer of
        the blob can set in its metadata is trusted.

        With the pin's version (the ETag Azure gave the blob when it was imported), the read is
        conditional on it (If-Match, in the one Get Blob request the body streams from): any
        write to the blob since, its metadata's included, fails it. Without (an entry imported
        before Azure ETags were recorded), the blob's properties are read and its size and
        Content-MD5 (else Azure's ETag) compared with the pin's, never Silt's ETag
        metadata, and the read made conditional on the Azure ETag those properties carried, so a
        replacement in between fails it. PredicateFailed when the blob is not the one imported,
        NotFound when there is none."""
        target = self._locate(namespace, key)
        version = pin.version
        if not version:
            props = self._properties(target)
            check_as_imported(target.what, pin, int(props.size), _content_etag_of(props))
            if not props.etag:
                raise Unavailable(f"azure {target.what}: the store reported no ETag for the blob")
            version = _version_of(props)
        if byte_range is None:
            return self._download(target, None, None, if_match=version)
        return self._download(target, byte_range[0], byte_range[1] - byte_range[0] + 1, if_match=version)

    def _download(
        self, target: _Target, offset: int | None, length: int | None, if_match: str | None = None
    ) -> BinaryIO:
        """A reader of `length` bytes from `offset` (the whole blob when None), streamed from one
        Get Blob request. The request is sent here, so a missing object or an unsatisfiable range
        fails right away.

        The SDK's download_blob reads every response whole, and its list of the body's pieces costs
        eight times the bytes fetched (32 MiB of pointers for a 4 MiB chunk): the streaming Get
        Blob of the SDK's generated client (its public BlobClient's own) is used instead.
        """
        range_header = None if offset is None or length is None else f"bytes={offset}-{offset + length - 1}"
        conditions = None if if_match is None else ModifiedAccessConditions(if_match=if_match)
        with _calls(target.what):
            try:
                body, response = target.blob._client.blob.download(
                    range=range_header,
                    modified_access_conditions=conditions,
                    cls=lambda pipeline_response, body, headers: (body, pipeline_response.http_response),
                )
            except HttpResponseError as exc:
                if conditions is not None and exc.status_code == 412:
                    raise PredicateFailed(f"{target.what}: replaced since its properties were read") from None
                raise
        reader = io.BufferedReader(_BlobReader(body, response, target.what), 64 * 1024)
        if range_header is not None and not int(response.headers.get("Content-Length") or 0):
            # Azure answers 416 to a range that starts beyond the end; Azurite, an empty body.
            reader.close()
            raise InvalidArgument(f"{target.what}: range {range_header[6:]} starts beyond the object's end")
        return reader

    def stat(self, namespace: str, key: str) -> ObjectStat:
        target = self._locate(namespace, key)
        props = self._properties(target)
        tier = props.blob_tier
        return ObjectStat(
            size=int(props.size),
            etag=_etag_of(props),
            mtime=_utc(props.last_modified),
            version=_version_of(props),
            storage_class=str(tier.value if hasattr(tier, "value") else tier) if tier else None,
        )

    def delete(self, namespace: str, key: str) -> None:
        target = self._locate(namespace, key)
        # Like a missing object, a missing container leaves nothing to delete.
        with contextlib.suppress(NotFound), _calls(target.what):
            # With its snapshots, if any were taken (a blob that has some cannot be deleted alone).
            target.blob.delete_blob(delete_snapshots="include")

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        src = self._locate(src_namespace, src_key)
        dst = self._locate(dst_namespace, dst_key)
        what = f"copying {src.what} to {dst.what}"
        for _ in range(3):
            props = self._properties(src)
            size, etag = int(props.size), _etag_of(props)
            if src.account != dst.account:
                # Copy Blob reaches another account's source only with a SAS of its own; stream.
                with self.get(src_namespace, src_key) as reader:
                    return self._upload(dst, reader, size, if_absent=False, etag=etag)
            metadata = {k: v for k, v in (props.metadata or {}).items() if k != ETAG_METADATA}
            metadata[ETAG_METADATA] = etag
            try:
                # Only the version whose size was read is copied; if it changed since, start over.
                copy = dst.blob.start_copy_from_url(
                    src.blob.url,
                    metadata=metadata,
                    source_etag=props.etag,
                    source_match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError:
                continue
            except (AzureError, requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
                raise _translate(exc, what) from None
            self._wait_for_copy(dst, str(copy.get("copy_status", "")), str(copy.get("copy_id", "")), what)
            return PutResult(size=size, etag=etag)
        raise Unavailable(f"azure {what}: the source kept changing during the copy")

    def _wait_for_copy(self, dst: _Target, status: str, copy_id: str, what: str) -> None:
        deadline = time.monotonic() + self._copy_timeout
        while status == "pending":
            if time.monotonic() > deadline:
                with contextlib.suppress(Exception):
                    dst.blob.abort_copy(copy_id)
                raise Unavailable(f"azure {what}: the copy did not finish within {self._copy_timeout:.0f}s")
            time.sleep(COPY_POLL_SECONDS)
            props = self._properties(dst)
            status = str(props.copy.status or "") if props.copy else ""
        if status not in ("success", ""):
            raise Unavailable(f"azure {what}: the copy ended with status {status!r}")

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        account, container, parts = self.parse_namespace(namespace)
        client = self._service(account, namespace).get_container_client(container)
        base = "/".join(parts) + "/" if parts else ""
        return self._listing(client, base, prefix, after, self._address(account, container, base + prefix))

    def _listing(
        self, client: ContainerClient, base: str, prefix: str, after: str, what: str
    ) -> Iterator[ListedObject]:
        after_bytes = after.encode("utf-8", "surrogatepass")
        page_size = list_page_size_of(self)
        paging: dict[str, Any] = {"results_per_page": page_size} if page_size is not None else {}
        with _calls(f"listing {what}"):
            for props in client.list_blobs(name_starts_with=base + prefix, include=["metadata"], **paging):
                key = str(props.name)[len(base) :]
                if any(part.startswith(RESERVED_PREFIX) for part in key.split("/")):
                    continue
                # Directories of a hierarchical namespace account are blobs too; not objects.
                if (props.metadata or {}).get("hdi_isfolder") == "true":
                    continue
                if after and key.encode("utf-8", "surrogatepass") <= after_bytes:
                    continue
                yield ListedObject(key, int(props.size), _etag_of(props), _utc(props.last_modified), _version_of(props))

    # --- presigned URLs ----------------------------------------------------------------

    def presign(
        self, namespace: str, key: str, method: PresignMethod, expires_in: int, filename: str | None = None
    ) -> PresignedURL:
        target = self._locate(namespace, key)
        if (
            isinstance(expires_in, bool)
            or not isinstance(expires_in, int)
            or not 1 <= expires_in <= MAX_PRESIGN_SECONDS
        ):
            raise InvalidArgument(
                f"{target.what}: a presigned URL lives 1 to {MAX_PRESIGN_SECONDS} seconds, not {expires_in}"
            )
        if method not in ("GET", "PUT"):
            raise InvalidArgument(f"{target.what}: cannot presign {method!r}")
        now = datetime.now(UTC)
        expiry = now + timedelta(seconds=expires_in)
        read, write = method == "GET", method == "PUT"
        # Create only: an upload's address is new, and write permission would also let the URL's
        # holder lease the blob, which would make it undeletable by garbage collection.
        permission = BlobSasPermissions(read=read, create=write)
        extra: dict[str, Any] = {}
        if method == "GET" and filename:
            extra["content_disposition"] = attachment(filename)
        signer: dict[str, Any] = {}
        if self._account_key:
            signer["account_key"] = self._account_key
        else:
            signer["user_delegation_key"] = self._delegation_key(target, now, expiry)
        with _calls(f"presigning {target.what}"):
            sas = generate_blob_sas(
                target.account,
                target.container,
                target.name,
                permission=permission,
                expiry=expiry,
                # Clocks drift: a URL is valid from a little before it was made.
                start=now - timedelta(minutes=5),
                **signer,
                **extra,
            )
        url = target.blob.url
        if self._config.pre_signed_endpoint:
            endpoint = urlsplit(self._config.pre_signed_endpoint)
            parts = urlsplit(url)
            url = urlunsplit((endpoint.scheme, endpoint.netloc, parts.path, "", ""))
        return PresignedURL(f"{url}?{sas}", int(expiry.timestamp()))

    def _delegation_key(self, target: _Target, now: datetime, expiry: datetime) -> UserDelegationKey:
        """A user delegation key of the account valid until `expiry`: one request a week or so,
        shared by every URL of the account."""
        with self._lock:
            cached = self._delegation_keys.get(target.account)
        if cached is not None and cached[1] >= expiry:
            return cached[0]
        key_expiry = now + timedelta(seconds=MAX_PRESIGN_SECONDS)
        with _calls(f"presigning {target.what}: getting a user delegation key"):
            key = self._service(target.account, "").get_user_delegation_key(now - timedelta(minutes=5), key_expiry)
        with self._lock:
            self._delegation_keys[target.account] = (key, key_expiry)
        return key

    # --- multipart uploads -------------------------------------------------------------

    @staticmethod
    def _target_digest(target: _Target) -> str:
        return hashlib.sha256(target.name.encode("utf-8")).hexdigest()

    def _marker(self, target: _Target, upload_id: str) -> BlobClient:
        # Beside the object, so inside its namespace's prefix: a role scoped to the prefix covers it.
        directory = target.name.rpartition("/")[0]
        name = f"{directory}/{UPLOADS}/{upload_id}" if directory else f"{UPLOADS}/{upload_id}"
        return self._container(target).get_blob_client(name)

    def _check_upload(self, target: _Target, upload_id: str) -> BlobClient:
        """The upload's marker blob; NotFound unless `upload_id` is an upload of this object in progress."""
        missing = NotFound(f"{target.what}: no multipart upload {upload_id!r} in progress")
        if not isinstance(upload_id, str) or not _UPLOAD_ID.fullmatch(upload_id):
            raise missing
        marker = self._marker(target, upload_id)
        try:
            with _calls(target.what):
                props = marker.get_blob_properties()
        except NotFound:
            raise missing from None
        if (props.metadata or {}).get(TARGET_METADATA) != self._target_digest(target):
            raise missing
        return marker

    def create_multipart_upload(self, namespace: str, key: str) -> str:
        target = self._locate(namespace, key)
        upload_id = secrets.token_hex(16)
        with _calls(target.what):
            self._marker(target, upload_id).upload_blob(
                b"", overwrite=False, metadata={TARGET_METADATA: self._target_digest(target)}
            )
        return upload_id

    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        target = self._locate(part.namespace, part.key)
        check_part_size(size, target.what, MAX_PART_SIZE, _PART_SHOWN)
        self._check_upload(target, part.upload_id)
        with spool_part(stream, size, target.what, "azure", MAX_PART_SIZE, _PART_SHOWN) as buffer:
            if buffer.size:
                with _calls(target.what):
                    target.blob.stage_block(
                        _part_block_id(part.upload_id, part.number, buffer.md5), buffer.file, length=buffer.size
                    )
        return PartInfo(part_number=part.number, etag=buffer.md5.hex())

    def _complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        target = self._locate(namespace, key)
        marker = self._check_upload(target, upload_id)
        try:
            with _calls(target.what):
                _, uncommitted = target.blob.get_block_list("uncommitted")
        except NotFound:
            uncommitted = []  # no blob and nothing staged yet
        staged = {block.id: int(block.size) for block in uncommitted}
        blocks: list[BlobBlock] = []
        md5s: list[bytes] = []
        total = 0
        for part in parts:
            etag = normalize_etag(part.etag)
            if not _HEX_MD5.fullmatch(etag):
                raise InvalidArgument(f"{target.what}: part {part.part_number}: {part.etag!r} is not a part's ETag")
            md5 = bytes.fromhex(etag)
            md5s.append(md5)
            if md5 == EMPTY_MD5:
                continue  # empty parts are never staged
            block_id = _part_block_id(upload_id, part.part_number, md5)
            if block_id not in staged:
                raise InvalidArgument(
                    f"{target.what}: part {part.part_number} with ETag {etag} was not uploaded to upload {upload_id}"
                )
            blocks.append(BlobBlock(block_id))
            total += staged[block_id]
        etag = multipart_etag(md5s)
        with _calls(target.what):
            target.blob.commit_block_list(blocks, metadata={ETAG_METADATA: etag})
        # The object is complete; a marker left behind only keeps the upload id known.
        with contextlib.suppress(AzureError, requests.RequestException, OSError):
            marker.delete_blob()
        return PutResult(size=total, etag=etag)

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        target = self._locate(namespace, key)
        marker = self._check_upload(target, upload_id)
        try:
            with _calls(target.what):
                marker.delete_blob()
        except NotFound:
            raise NotFound(f"{target.what}: no multipart upload {upload_id!r} in progress") from None
