"""Moving object bytes between local files and the server, as `silt fs` and `silt local` do:
concurrent transfers on a bounded pool with one progress display, and errors turned into the
CLI's one-line errors and exit codes.

Bytes go through presigned URLs when the server hands them out (lakeFS's /config says
pre_sign_support), as lakectl moves them: a download GETs the URL of a stat with presign; an
upload PUTs to the URL of a staging address (getPhysicalAddress) and then links it to the path
(linkPhysicalAddress, the server checking size and ETag). With S3 underneath, the bytes then go
straight between the client and the bucket. Otherwise (or with --no-presign) they go through
the S3 gateway with boto3.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from cli.common import client
from cli.presign import RestApi, http_error, rest_api
from cli.progress import TransferProgress
from silt.client_base import EXIT_DENIED, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, ClientError

TRANSFER_THREADS = 8

# A transfer, given its file's progress callback (called with each chunk's byte count).
Job = Callable[[Callable[[int], object]], None]

progress_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress (bars on a terminal, else a line every few seconds)."
)
presign_option = click.option(
    "--pre-sign/--no-presign",
    "presign",
    default=None,
    help="Move bytes through presigned URLs (the default when the server supports them), or through the S3 gateway.",
)
# A presigned PUT writes one object of at most 5 GiB (S3's limit); larger files go through the
# gateway, which uploads them in parts.
PRESIGNED_PUT_MAX_BYTES = 5 * 1024**3
_CHUNK = 1 << 20


def s3_error(exc: Exception, what: str) -> ClientError:
    from botocore.exceptions import ClientError as BotoError
    from botocore.exceptions import EndpointConnectionError

    if isinstance(exc, EndpointConnectionError):
        try:
            endpoint = client().settings.s3_endpoint
        except RuntimeError:  # in a transfer thread: click's context is the main thread's
            endpoint = "its endpoint"
        return ClientError(f"S3 gateway unavailable at {endpoint} (is the stack running? `silt run`)", EXIT_UNAVAILABLE)
    if isinstance(exc, BotoError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = error.get("Message") or code
        if code in ("NoSuchKey", "NoSuchBucket", "404", "NotFound"):
            return ClientError(f"not found: {what}", EXIT_NOT_FOUND)
        if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return ClientError(f"permission denied: {what}: {message}", EXIT_DENIED)
        return ClientError(f"{what}: {code}: {message}")
    # boto3's transfer errors carry the S3 error only in their text.
    text = str(exc)
    for code, exit_code, words in (
        ("(AccessDenied)", EXIT_DENIED, "permission denied"),
        ("(NoSuchKey)", EXIT_NOT_FOUND, "not found"),
        ("(NoSuchBucket)", EXIT_NOT_FOUND, "not found"),
        ("(403)", EXIT_DENIED, "permission denied"),
        ("(404)", EXIT_NOT_FOUND, "not found"),
    ):
        if code in text:
            # "... when calling the PutObject operation: <message>"; the message may hold ": " too.
            message = text.partition(" operation: ")[2] or text.rpartition(": ")[2]
            return ClientError(f"{words}: {what}: {message}", exit_code)
    return ClientError(f"{what}: {text}")


@contextmanager
def s3_errors(what: str) -> Iterator[None]:
    try:
        yield
    except ClientError:
        raise
    except Exception as exc:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError
        from botocore.exceptions import ClientError as BotoError

        if isinstance(exc, BotoError | BotoCoreError | Boto3Error):
            raise s3_error(exc, what) from None
        raise


def run_transfers(jobs: list[tuple[str, int, Job]], verb: str, quiet: bool) -> None:
    """Run (name, size, job) transfers concurrently; each job gets its file's progress callback."""
    with TransferProgress(verb, [(name, size) for name, size, _ in jobs], quiet) as progress:

        def run(name: str, job: Job) -> None:
            job(progress.file(name))
            progress.finished(name)

        with ThreadPoolExecutor(TRANSFER_THREADS) as pool:
            for future in [pool.submit(run, name, job) for name, _, job in jobs]:
                future.result()


def upload_job(s3: Any, repo: str, branch: str, key: str, local: Path, extra: dict[str, Any] | None = None) -> Job:
    """Upload one file to silt://repo/branch/key (ExtraArgs: content type, user metadata) with
    s3, the client's boto3 client (made beforehand: jobs run in threads)."""

    def run(progress: Callable[[int], object]) -> None:
        with s3_errors(f"lakefs://{repo}/{branch}/{key}"):
            s3.upload_file(str(local), repo, f"{branch}/{key}", ExtraArgs=extra, Callback=progress)

    return run


def download_job(s3: Any, repo: str, ref: str, key: str, local: Path, after: Callable[[], None] | None = None) -> Job:
    """Download silt://repo/ref/key to a local file (creating its directory), then after()."""

    def run(progress: Callable[[int], object]) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        with s3_errors(f"lakefs://{repo}/{ref}/{key}"):
            s3.download_file(repo, f"{ref}/{key}", str(local), Callback=progress)
        if after is not None:
            after()

    return run


class Mover:
    """Makes the transfer jobs of one command: through presigned URLs (api given) or the S3
    gateway. Made in the command's thread; its jobs run in transfer threads."""

    def __init__(self, gateway: Callable[[], Any], api: RestApi | None) -> None:
        self._gateway = gateway  # the CLI's Client, made (gRPC imported) only if the gateway is used
        self.api = api
        self._pools: dict[bool, Any] = {}
        self._file_mode = new_file_mode()
        if api is not None:
            import urllib3

            retries = urllib3.Retry(total=3, connect=3, read=0, status=0, backoff_factor=0.2)
            # The gateway's CA bundle (gateways.s3.tls.ca_file) for the edge's own URLs; the
            # system's for the store's (an S3 endpoint elsewhere).
            for own in (True, False):
                ca_file = api.ca_file if own else None
                self._pools[own] = urllib3.PoolManager(
                    num_pools=4, maxsize=TRANSFER_THREADS, retries=retries, ca_certs=ca_file or None
                )

    @property
    def s3(self) -> Any:
        return self._gateway().s3

    def download(
        self, repo: str, ref: str, key: str, local: Path, size: int, after: Callable[[], None] | None = None
    ) -> Job:
        """Download silt://repo/ref/key (size bytes) to a local file (creating its directory), then after()."""
        if self.api is None:
            return download_job(self.s3, repo, ref, key, local, after)  # (made in the command's thread)
        api = self.api

        def run(progress: Callable[[int], object]) -> None:
            local.parent.mkdir(parents=True, exist_ok=True)
            url = api.presigned_url(repo, ref, key)
            self._get(url, f"lakefs://{repo}/{ref}/{key}", local, size, progress)
            if after is not None:
                after()

        return run

    def upload(
        self,
        repo: str,
        branch: str,
        key: str,
        local: Path,
        metadata: dict[str, str] | None = None,
        content_type: str | None = None,
    ) -> Job:
        """Upload one file to silt://repo/branch/key, with user metadata and a content type."""
        size = local.stat().st_size
        if self.api is None or size > PRESIGNED_PUT_MAX_BYTES:
            extra: dict[str, Any] = {}
            if metadata:
                extra["Metadata"] = metadata
            if content_type:
                extra["ContentType"] = content_type
            return upload_job(self.s3, repo, branch, key, local, extra or None)
        api = self.api

        def run(progress: Callable[[int], object]) -> None:
            address, url = api.upload_location(repo, branch, key)
            etag = self._put(url, f"lakefs://{repo}/{branch}/{key}", local, size, progress)
            api.link(repo, branch, key, address, etag, size, metadata, content_type)

        return run

    def stream(self, repo: str, ref: str, key: str, write: Callable[[bytes], object]) -> None:
        """An object's bytes, in pieces, to write (as `silt fs cat` writes them to stdout)."""
        what = f"lakefs://{repo}/{ref}/{key}"
        if self.api is None:
            with s3_errors(what):
                body = self.s3.get_object(Bucket=repo, Key=f"{ref}/{key}")["Body"]
                for chunk in iter(lambda: body.read(_CHUNK), b""):
                    write(chunk)
            return
        response = self._request("GET", self.api.presigned_url(repo, ref, key), what, preload_content=False)
        try:
            _check_status(response, what, 200)
            for chunk in response.stream(_CHUNK):
                write(chunk)
        except ClientError:
            raise
        except Exception as exc:  # urllib3's errors mid-body
            from urllib3.exceptions import HTTPError

            if not isinstance(exc, HTTPError):
                raise
            raise ClientError(f"{what}: download failed: {exc}") from None
        finally:
            response.release_conn()

    def _get(self, url: str, what: str, local: Path, size: int, progress: Callable[[int], object]) -> None:
        """GET a presigned URL into local: through a temporary file beside it, renamed into place
        only once every byte came (the size the object has, and the response announced)."""
        import tempfile

        response = self._request("GET", url, what, preload_content=False)
        try:
            _check_status(response, what, 200)
            announced = response.headers.get("Content-Length")
            fd, name = tempfile.mkstemp(dir=local.parent, prefix=f".{local.name}.", suffix=".part")
            tmp = Path(name)
            try:
                received = 0
                with open(fd, "wb") as f:
                    for chunk in response.stream(_CHUNK):
                        f.write(chunk)
                        received += len(chunk)
                        progress(len(chunk))
                if received != size or (announced is not None and announced.isdigit() and int(announced) != size):
                    raise ClientError(f"{what}: incomplete download: {received} of {size} bytes")
                # mkstemp's file is 0600; a downloaded file gets what any new file would.
                tmp.chmod(self._file_mode)
                tmp.replace(local)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except ClientError:
            raise
        except Exception as exc:  # urllib3's errors mid-body (a connection reset, a protocol error)
            raise ClientError(f"{what}: download failed: {exc}") from None
        finally:
            response.release_conn()

    def _put(self, url: str, what: str, local: Path, size: int, progress: Callable[[int], object]) -> str:
        """PUT a file to a presigned URL; the ETag the store answers."""
        from silt.block.rules import signed_upload_headers  # not at start-up: the CLI starts without silt.block

        with local.open("rb") as f:
            body = _Counted(f, size, progress)
            headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
            # A write-once URL (blockstore.<s3|gs>.pre_signed_put_write_once) signs the condition it needs.
            headers.update(signed_upload_headers(url))
            response = self._request("PUT", url, what, body=body, headers=headers, retries=False)
        _check_status(response, what, 200, 201, 204)
        etag = (response.headers.get("ETag") or "").strip().strip('"')
        if not etag:
            raise ClientError(f"{what}: the store answered the upload without an ETag")
        if body.sent != size:
            raise ClientError(f"{what}: {local} changed during the upload ({body.sent} of {size} bytes sent)")
        return etag

    def _request(self, method: str, url: str, what: str, **kwargs: Any) -> Any:
        from urllib3.exceptions import HTTPError

        assert self.api is not None
        own = _origin(url) == _origin(self.api.endpoint)
        try:
            return self._pools[own].request(method, url, timeout=60.0, **kwargs)
        except HTTPError as exc:
            raise ClientError(f"{what}: presigned {method} failed: {exc}", EXIT_UNAVAILABLE) from None


def new_file_mode() -> int:
    """The mode a new file gets here (0666 less the umask), read once in the command's thread:
    the umask can only be read by setting it."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _origin(url: str) -> tuple[str, str, int | None]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class _Counted:
    """A file read for an upload, each chunk counted and reported; never past size, the length
    the request declared (a file that grew meanwhile is sent as it was)."""

    def __init__(self, f: Any, size: int, progress: Callable[[int], object]) -> None:
        self._f = f
        self._size = size
        self._progress = progress
        self.sent = 0

    def read(self, n: int = -1) -> bytes:
        left = self._size - self.sent
        data: bytes = self._f.read(left if n < 0 else min(n, left)) if left > 0 else b""
        self.sent += len(data)
        if data:
            self._progress(len(data))
        return data


def _check_status(response: Any, what: str, *ok: int) -> None:
    if response.status not in ok:
        body = response.data if response.data is not None else b""
        raise http_error(f"{what}: presigned URL", int(response.status), body[:2000])


def mover(presign: bool | None) -> Mover:
    """The command's Mover: presigned URLs unless presign is False or the server does not
    support them (asked once per invocation), else the S3 gateway."""
    if presign is False:
        return Mover(client, None)
    api = rest_api()
    return Mover(client, api if api.presigns() else None)
