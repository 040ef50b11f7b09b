"""Moving object bytes between local files and the S3 gateway, as `silt fs` and `silt local` do:
concurrent transfers on a bounded pool with one progress display, and S3 errors turned into
the CLI's one-line errors and exit codes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from silt.cli.common import client
from silt.cli.progress import TransferProgress
from silt.client import EXIT_DENIED, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, ClientError

TRANSFER_THREADS = 8

# A transfer, given its file's progress callback (called with each chunk's byte count).
Job = Callable[[Callable[[int], object]], None]

progress_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress (bars on a terminal, else a line every few seconds)."
)


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
        with s3_errors(f"silt://{repo}/{branch}/{key}"):
            s3.upload_file(str(local), repo, f"{branch}/{key}", ExtraArgs=extra, Callback=progress)

    return run


def download_job(s3: Any, repo: str, ref: str, key: str, local: Path, after: Callable[[], None] | None = None) -> Job:
    """Download silt://repo/ref/key to a local file (creating its directory), then after()."""

    def run(progress: Callable[[int], object]) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        with s3_errors(f"silt://{repo}/{ref}/{key}"):
            s3.download_file(repo, f"{ref}/{key}", str(local), Callback=progress)
        if after is not None:
            after()

    return run
