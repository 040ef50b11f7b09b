"""The S3 block adapter, on boto3: any S3-compatible object store.

Streaming. ``put`` never holds more than one part of the object: it reads the caller's
stream one part (8 MiB) at a time into a spool (silt/block/common.py) — memory up to 8 MiB,
a temporary file beyond that — and sends it with its Content-MD5, so a retry can rewind the spool and the
store verifies the bytes. A stream that ends within the first part is sent with one
PutObject (ETag: the MD5); anything longer becomes a multipart upload under the hood
(ETag: ``<md5>-<N>``), aborted again if anything fails. The ETag is the one the store
returned for this very request, so it cannot belong to a concurrent writer's object.

``upload_part`` spools a part the same way before sending it: botocore must read a body
twice (to sign it, then to send it) and rewind it for retries, which a caller's stream
cannot do.

Limits: ``copy`` uses one CopyObject and so refuses sources over 5 GiB (S3's limit for
it); copy larger objects with a multipart upload and ``upload_part_copy``. ``put`` of a
stream of unknown size grows its parts as it goes, up to S3's 5 TiB object limit.

Every botocore and urllib3 exception is translated: missing objects, buckets and
uploads become NotFound, requests S3 rejects as malformed become InvalidArgument, and
everything else (network errors, timeouts, throttling, 5xx, access denied) becomes
Unavailable with a one-line message.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import re
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, BinaryIO

import boto3
import botocore.session
import botocore.utils
import urllib3.exceptions
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from silt.block.adapter import (
    CopySource,
    ListedObject,
    ObjectStat,
    PartInfo,
    PresignedURL,
    PresignMethod,
    PutResult,
    UploadPart,
    check_delete_batch,
    list_page_size_of,
)
from silt.block.common import Calls, Pieces, Spool, check_part_size, check_size, one_line, spool_part
from silt.block.pinned import Pin, PinnedReadAdapter
from silt.block.rules import (
    MAX_KEY_BYTES,
    MAX_PRESIGN_SECONDS,
    RESERVED_PREFIX,
    WRITE_ONCE_S3,
    attachment,
    check_part_number,
    check_range,
    normalize_etag,
    split_key,
    split_namespace,
)
from silt.block.streams import ObjectStream
from silt.config import S3BlockstoreConfig
from silt.errors import ConfigError, InvalidArgument, NotFound, PredicateFailed, SiltError, Unavailable

MiB = 1024 * 1024
GiB = 1024 * MiB
# The part size put() starts with.
PART_SIZE = 8 * MiB
MAX_PART_SIZE = 5 * GiB
MAX_PARTS = 10_000
MAX_OBJECT_SIZE = 5 * 1024 * GiB
MAX_COPY_SIZE = 5 * GiB
# Parts double every 1000, so 10,000 parts reach S3's 5 TiB object limit while small objects
# keep small parts. Spools beyond 8 MiB go to disk.
PARTS = Pieces("s3", f"S3's limit of {MAX_PARTS} parts", PART_SIZE, MAX_PARTS, 1000)
# A gateway serves many requests at once; botocore's default pool of 10 would queue them.
MAX_POOL_CONNECTIONS = 64

_NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "NoSuchUpload", "NotFound", "404"}
_INVALID = {
    "400",
    "416",
    "EntityTooLarge",
    "EntityTooSmall",
    "InvalidArgument",
    "InvalidBucketName",
    "InvalidPart",
    "InvalidPartOrder",
    "InvalidRange",
    "InvalidRequest",
    "KeyTooLongError",
    "MalformedXML",
}
# Errors of reading a response body: botocore wraps most, urllib3 and sockets the rest.
_STREAM_ERRORS = (BotoCoreError, urllib3.exceptions.HTTPError, OSError)


def _version_id(head: dict[str, Any]) -> str:
    """The VersionId a HeadObject reported: "" without versioning, and for S3's "null" version
    (versioning suspended), which the next write replaces in place."""
    version = str(head.get("VersionId") or "")
    return "" if version == "null" else version


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _translate(exc: Exception, what: str) -> SiltError:
    if isinstance(exc, ClientError):
        code = _error_code(exc)
        message = one_line(exc.response.get("Error", {}).get("Message") or "")
        text = f"{what}: {code}: {message}" if message and message != code else f"{what}: {code}"
        if code in _NOT_FOUND:
            return NotFound(text)
        if code in _INVALID:
            return InvalidArgument(text)
        return Unavailable(f"s3 {text}")
    if isinstance(exc, ParamValidationError):
        return InvalidArgument(f"{what}: {one_line(exc)}")
    return Unavailable(f"s3 {what}: {one_line(exc)}")


# Turns botocore and network exceptions into Silt errors.
_calls = Calls((ClientError, *_STREAM_ERRORS), _translate)


class _BodyReader(ObjectStream):
    """An S3 response body whose read errors are Silt errors; closing releases the connection."""

    def __init__(self, body: Any, what: str) -> None:
        super().__init__()
        self._body = body
        self._what = what

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        with _calls(f"reading {self._what}"):
            data = self._body.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._body.close()
        super().close()


def _reader(body: Any, what: str) -> BinaryIO:
    return io.BufferedReader(_BodyReader(body, what), 64 * 1024)


def _timestamp(value: str) -> datetime:
    """botocore's timestamp parsing, fast for the ISO 8601 UTC times of listings: its default
    parses every one with dateutil, 160 us a key of a ListObjectsV2 page against 33 (an import
    lists millions). Any other spelling (an HTTP date, epoch seconds, a time without a zone) is
    botocore's own parser's, so every answer is the one botocore would give."""
    if "T" in value and value.endswith("Z"):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    parsed: datetime = botocore.utils.parse_timestamp(value)
    return parsed


def build_client(
    config: S3BlockstoreConfig,
    *,
    connect_timeout: float = 5.0,
    read_timeout: float = 60.0,
    endpoint_url: str | None = None,
    signature_version: str | None = None,
) -> Any:
    """A boto3 S3 client for the blockstore.s3 configuration section (at `endpoint_url` instead of
    the configured one when given)."""
    creds = config.credentials
    if bool(creds.access_key_id) != bool(creds.secret_access_key):
        raise ConfigError("blockstore.s3.credentials: access_key_id and secret_access_key must be given together")
    try:
        core = botocore.session.Session()
        core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_timestamp)
        if config.credentials_file:
            core.set_config_variable("credentials_file", os.path.expanduser(config.credentials_file))
        session = boto3.session.Session(botocore_session=core, profile_name=config.profile)
        static: dict[str, str | None] = {}
        if creds.access_key_id and creds.secret_access_key:
            static = {
                "aws_access_key_id": creds.access_key_id,
                "aws_secret_access_key": creds.secret_access_key.get_secret_value(),
                "aws_session_token": creds.session_token.get_secret_value() if creds.session_token else None,
            }
        client_config = Config(
            region_name=config.region,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"max_attempts": config.max_retries, "mode": "standard"},
            s3={"addressing_style": "path" if config.force_path_style else "auto"},
            max_pool_connections=MAX_POOL_CONNECTIONS,
            # Many S3-compatible stores reject the CRC checksums botocore adds by default
            # since 1.36; Content-MD5 on every upload already protects the bytes. (It also keeps
            # checksum parameters out of presigned PUT URLs, which plain HTTP clients cannot meet.)
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            signature_version=signature_version,
        )
        endpoint = endpoint_url or config.endpoint_url
        client = session.client("s3", endpoint_url=endpoint, config=client_config, **static)
        client.meta.events.register("before-sign.s3.DeleteObjects", _content_md5_instead_of_crc)
        return client
    except BotoCoreError as exc:
        raise ConfigError(f"blockstore.s3: cannot create the S3 client: {one_line(exc)}") from None


def _content_md5_instead_of_crc(request: Any, **_: Any) -> None:
    """DeleteObjects must carry a checksum of its body: botocore sends a CRC32, which S3-compatible
    stores that predate it refuse; Content-MD5 is what every one of them takes."""
    body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
    for header in [
        name for name in request.headers if name.lower().startswith(("x-amz-checksum-", "x-amz-sdk-checksum-"))
    ]:
        del request.headers[header]
    request.headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()


# Characters XML 1.0 cannot carry, which botocore sends unescaped in DeleteObjects's body: a
# key holding one is deleted by a call of its own.
_NOT_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class S3Adapter(PinnedReadAdapter):
    scheme = "s3"
    # The store's presigned PUT URLs can write the object again until they expire (unless
    # pre_signed_put_write_once): reads of a linked upload are pinned (silt/block/external.py).
    presigned_puts_replace = True

    def __init__(self, config: S3BlockstoreConfig, *, connect_timeout: float = 5.0, read_timeout: float = 60.0) -> None:
        self._config = config
        self._client = build_client(config, connect_timeout=connect_timeout, read_timeout=read_timeout)
        self._presigner: Any = None
        self._presigner_lock = threading.Lock()

    @property
    def client(self) -> Any:
        return self._client

    def _locate(self, namespace: str, key: str) -> tuple[str, str, str]:
        """(bucket, full object key, how error messages name it)."""
        bucket, prefix = split_namespace(namespace, self.scheme)
        name = "/".join([*prefix, *split_key(key)])
        if len(name.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidArgument(f"s3://{bucket}/{name[:80]}...: prefix and key exceed {MAX_KEY_BYTES} bytes")
        return bucket, name, f"s3://{bucket}/{name}"

    def _head(self, bucket: str, name: str, what: str) -> dict[str, Any]:
        with _calls(what):
            response: dict[str, Any] = self._client.head_object(Bucket=bucket, Key=name)
        return response

    # --- objects -------------------------------------------------------------------

    def put(self, namespace: str, key: str, stream: BinaryIO, size: int | None = None) -> PutResult:
        bucket, name, what = self._locate(namespace, key)
        check_size(size, what)
        if size is not None and size > MAX_OBJECT_SIZE:
            raise InvalidArgument(f"{what}: {size} bytes exceeds S3's object size limit")
        part_size = PARTS.size_for(size)
        first, carry, single = PARTS.first(stream, size, part_size, what)
        with first:
            if single:
                with _calls(what):
                    response = self._client.put_object(
                        Bucket=bucket, Key=name, Body=first.file, ContentLength=first.size, ContentMD5=first.content_md5
                    )
                return PutResult(size=first.size, etag=normalize_etag(response["ETag"]))
            return self._put_multipart(bucket, name, what, PARTS.all(stream, size, first, carry, part_size, what))

    def _put_multipart(self, bucket: str, name: str, what: str, spools: Generator[Spool]) -> PutResult:
        with _calls(what):
            upload_id = self._client.create_multipart_upload(Bucket=bucket, Key=name)["UploadId"]
        try:
            parts: list[dict[str, Any]] = []
            total = 0
            # Each part is let go before the next is read: one part in memory at a time.
            with contextlib.closing(spools):
                for number, spool in enumerate(spools, 1):
                    etag = self._send_part(bucket, name, what, upload_id, number, spool)
                    parts.append({"PartNumber": number, "ETag": f'"{etag}"'})
                    total += spool.size
            with _calls(what):
                response = self._client.complete_multipart_upload(
                    Bucket=bucket, Key=name, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
        except BaseException:
            # Parts of an abandoned upload are billed until aborted; failures of the abort
            # itself must not hide the original error.
            with contextlib.suppress(Exception):
                self._client.abort_multipart_upload(Bucket=bucket, Key=name, UploadId=upload_id)
            raise
        return PutResult(size=total, etag=normalize_etag(response["ETag"]))

    def _send_part(self, bucket: str, name: str, what: str, upload_id: str, number: int, spool: Spool) -> str:
        with _calls(what):
            response = self._client.upload_part(
                Bucket=bucket,
                Key=name,
                UploadId=upload_id,
                PartNumber=number,
                Body=spool.file,
                ContentLength=spool.size,
                ContentMD5=spool.content_md5,
            )
        return normalize_etag(response["ETag"])

    def get(self, namespace: str, key: str) -> BinaryIO:
        bucket, name, what = self._locate(namespace, key)
        with _calls(what):
            response = self._client.get_object(Bucket=bucket, Key=name)
        return _reader(response["Body"], what)

    def get_range(self, namespace: str, key: str, start: int, end: int) -> BinaryIO:
        check_range(start, end)
        bucket, name, what = self._locate(namespace, key)
        with _calls(what):
            response = self._client.get_object(Bucket=bucket, Key=name, Range=f"bytes={start}-{end}")
        return _reader(response["Body"], what)

    def _read_pinned(self, namespace: str, key: str, pin: Pin, byte_range: tuple[int, int] | None) -> BinaryIO:
        """get_if_match: get (or get_range) only while the object's ETag is the pinned one: S3's
        If-Match in the same request, so the check costs nothing and no other version's bytes can
        follow it. The ETag is S3's own, which no writer sets; the pin's size adds nothing. With
        the pin's version (the VersionId of an object linked in a versioned bucket) exactly that
        version is read: an object written again later is another version, and the linked one is
        still served. PredicateFailed when the ETag differs, NotFound when the object (version) is
        gone."""
        extra: dict[str, str] = {}
        if byte_range is not None:
            extra["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
        if pin.version:
            extra["VersionId"] = pin.version
        bucket, name, what = self._locate(namespace, key)
        try:
            response = self._client.get_object(
                Bucket=bucket, Key=name, IfMatch=f'"{normalize_etag(pin.etag)}"', **extra
            )
        except ClientError as exc:
            if _error_code(exc) in ("PreconditionFailed", "412"):
                raise PredicateFailed(f"{what}: its ETag is no longer {pin.etag}") from None
            raise _translate(exc, what) from None
        except _STREAM_ERRORS as exc:
            raise _translate(exc, what) from None
        return _reader(response["Body"], what)

    def stat(self, namespace: str, key: str) -> ObjectStat:
        bucket, name, what = self._locate(namespace, key)
        head = self._head(bucket, name, what)
        return ObjectStat(
            size=int(head["ContentLength"]),
            etag=normalize_etag(head["ETag"]),
            mtime=head["LastModified"].astimezone(UTC),
            # In a versioned bucket, the version a read can ask for; "" otherwise.
            version=_version_id(head),
            storage_class=head.get("StorageClass"),
        )

    def delete(self, namespace: str, key: str) -> None:
        bucket, name, what = self._locate(namespace, key)
        # Like a missing object, a missing bucket leaves nothing to delete.
        with contextlib.suppress(NotFound), _calls(what):
            self._client.delete_object(Bucket=bucket, Key=name)

    def delete_many(self, namespace: str, keys: Sequence[str]) -> None:
        check_delete_batch(keys)
        if not keys:
            return
        located = [self._locate(namespace, key) for key in keys]  # every key checked before any delete
        batched = []
        for key, where in zip(keys, located, strict=True):
            if _NOT_IN_XML.search(key):
                self.delete(namespace, key)
            else:
                batched.append(where)
        located = batched
        if not located:
            return
        bucket = located[0][0]
        what = f"s3://{bucket}/ (deleting {len(located)} objects)"
        response: dict[str, Any] = {}
        # Like a missing object, a missing bucket leaves nothing to delete. Quiet: the answer
        # lists only the keys S3 could not delete.
        with contextlib.suppress(NotFound), _calls(what):
            response = self._client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": name} for _, name, _ in located], "Quiet": True}
            )
        errors = [error for error in response.get("Errors", []) if error.get("Code") != "NoSuchKey"]
        if errors:
            first = errors[0]
            raise Unavailable(
                f"s3 {what}: {len(errors)} not deleted; s3://{bucket}/{first.get('Key')}:"
                f" {first.get('Code')}: {one_line(first.get('Message') or '')}"
            )

    def copy(self, src_namespace: str, src_key: str, dst_namespace: str, dst_key: str) -> PutResult:
        src_bucket, src_name, src_what = self._locate(src_namespace, src_key)
        dst_bucket, dst_name, dst_what = self._locate(dst_namespace, dst_key)
        # CopyObject does not report the size. The source's size is read first and the
        # copy made only of that same version (CopySourceIfMatch); if the source changes
        # in between, start over.
        for _ in range(3):
            head = self._head(src_bucket, src_name, src_what)
            size = int(head["ContentLength"])
            if size > MAX_COPY_SIZE:
                raise InvalidArgument(
                    f"{src_what}: copying objects over 5 GiB needs a multipart upload with upload_part_copy"
                )
            try:
                response = self._client.copy_object(
                    Bucket=dst_bucket,
                    Key=dst_name,
                    CopySource={"Bucket": src_bucket, "Key": src_name},
                    CopySourceIfMatch=head["ETag"],
                )
            except ClientError as exc:
                if _error_code(exc) in ("PreconditionFailed", "412"):
                    continue
                raise _translate(exc, f"copying {src_what} to {dst_what}") from None
            except _STREAM_ERRORS as exc:
                raise _translate(exc, f"copying {src_what} to {dst_what}") from None
            return PutResult(size=size, etag=normalize_etag(response["CopyObjectResult"]["ETag"]))
        raise Unavailable(f"s3 copying {src_what} to {dst_what}: the source kept changing during the copy")

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        bucket, parts = split_namespace(namespace, self.scheme)
        base = "/".join(parts) + "/" if parts else ""
        arguments: dict[str, str] = {"Bucket": bucket, "Prefix": base + prefix}
        if after:
            arguments["StartAfter"] = base + after
        page_size = list_page_size_of(self)
        paging = {"PaginationConfig": {"PageSize": page_size}} if page_size is not None else {}
        pages = self._client.get_paginator("list_objects_v2").paginate(**arguments, **paging)
        with _calls(f"listing s3://{bucket}/{base}{prefix}"):
            for page in pages:
                for item in page.get("Contents", []):
                    key = str(item["Key"])[len(base) :]
                    if any(part.startswith(RESERVED_PREFIX) for part in key.split("/")):
                        continue
                    yield ListedObject(
                        key, int(item["Size"]), normalize_etag(item["ETag"]), item["LastModified"].astimezone(UTC)
                    )

    # --- presigned URLs ---------------------------------------------------------------

    def _presigning_client(self) -> Any:
        """A client that signs URLs with SigV4 (botocore would presign some with SigV2, which
        not every store accepts) for the endpoint clients reach: made on first use."""
        with self._presigner_lock:
            if self._presigner is None:
                self._presigner = build_client(
                    self._config, endpoint_url=self._config.pre_signed_endpoint, signature_version="s3v4"
                )
            return self._presigner

    def presign(
        self, namespace: str, key: str, method: PresignMethod, expires_in: int, filename: str | None = None
    ) -> PresignedURL:
        bucket, name, what = self._locate(namespace, key)
        if not 1 <= expires_in <= MAX_PRESIGN_SECONDS:
            raise InvalidArgument(f"{what}: a presigned URL lives 1 to {MAX_PRESIGN_SECONDS} seconds, not {expires_in}")
        params: dict[str, str] = {"Bucket": bucket, "Key": name}
        if method == "GET" and filename:
            params["ResponseContentDisposition"] = attachment(filename)
        if method == "PUT" and self._config.pre_signed_put_write_once:
            # Signed, so the upload must send it: the URL creates the object once, never replaces it.
            params["IfNoneMatch"] = WRITE_ONCE_S3[1]
        operation = "get_object" if method == "GET" else "put_object"
        expires = int(time.time()) + expires_in
        with _calls(f"presigning {what}"):
            url: str = self._presigning_client().generate_presigned_url(
                operation, Params=params, ExpiresIn=expires_in, HttpMethod=method
            )
        return PresignedURL(url, expires)

    def presign_part(self, namespace: str, key: str, upload_id: str, part_number: int, expires_in: int) -> PresignedURL:
        bucket, name, what = self._locate(namespace, key)
        check_part_number(part_number)
        if not 1 <= expires_in <= MAX_PRESIGN_SECONDS:
            raise InvalidArgument(f"{what}: a presigned URL lives 1 to {MAX_PRESIGN_SECONDS} seconds, not {expires_in}")
        params = {"Bucket": bucket, "Key": name, "UploadId": upload_id, "PartNumber": part_number}
        expires = int(time.time()) + expires_in
        with _calls(f"presigning part {part_number} of {what}"):
            url: str = self._presigning_client().generate_presigned_url(
                "upload_part", Params=params, ExpiresIn=expires_in, HttpMethod="PUT"
            )
        return PresignedURL(url, expires)

    # --- multipart uploads -----------------------------------------------------------

    def create_multipart_upload(self, namespace: str, key: str) -> str:
        bucket, name, what = self._locate(namespace, key)
        with _calls(what):
            upload_id: str = self._client.create_multipart_upload(Bucket=bucket, Key=name)["UploadId"]
        return upload_id

    def _upload_part(self, part: UploadPart, stream: BinaryIO, size: int | None) -> PartInfo:
        bucket, name, what = self._locate(part.namespace, part.key)
        check_part_size(size, what, MAX_PART_SIZE, "5 GiB")
        with spool_part(stream, size, what, "s3", MAX_PART_SIZE, "5 GiB") as spool:
            etag = self._send_part(bucket, name, what, part.upload_id, part.number, spool)
        return PartInfo(part_number=part.number, etag=etag)

    def _copy_part(self, part: UploadPart, source: CopySource) -> PartInfo:
        bucket, name, what = self._locate(part.namespace, part.key)
        src_bucket, src_name, src_what = self._locate(source.namespace, source.key)
        extra: dict[str, str] = {}
        if source.byte_range is not None:
            start, end = source.byte_range
            # S3 refuses a range past the source's end, but not every S3-compatible store
            # does (some copy a shorter part); check it here so every store behaves alike,
            # and copy only the version that was checked.
            head = self._head(src_bucket, src_name, src_what)
            if end >= int(head["ContentLength"]):
                raise InvalidArgument(
                    f"{src_what}: copy range {start}-{end} is outside the object's {head['ContentLength']} bytes"
                )
            extra = {"CopySourceRange": f"bytes={start}-{end}", "CopySourceIfMatch": head["ETag"]}
        with _calls(f"copying {src_what} into {what}"):
            response = self._client.upload_part_copy(
                Bucket=bucket,
                Key=name,
                UploadId=part.upload_id,
                PartNumber=part.number,
                CopySource={"Bucket": src_bucket, "Key": src_name},
                **extra,
            )
        return PartInfo(part_number=part.number, etag=normalize_etag(response["CopyPartResult"]["ETag"]))

    def _complete_multipart_upload(self, namespace: str, key: str, upload_id: str, parts: list[PartInfo]) -> PutResult:
        bucket, name, what = self._locate(namespace, key)
        listed = [{"PartNumber": p.part_number, "ETag": f'"{normalize_etag(p.etag)}"'} for p in parts]
        with _calls(what):
            response = self._client.complete_multipart_upload(
                Bucket=bucket, Key=name, UploadId=upload_id, MultipartUpload={"Parts": listed}
            )
        etag = normalize_etag(response["ETag"])
        # CompleteMultipartUpload does not report the size; Silt's physical keys are
        # written once, so the object read back is the one just completed.
        head = self._head(bucket, name, what)
        return PutResult(size=int(head["ContentLength"]), etag=etag)

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        bucket, name, what = self._locate(namespace, key)
        with _calls(what):
            self._client.abort_multipart_upload(Bucket=bucket, Key=name, UploadId=upload_id)
