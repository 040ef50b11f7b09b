"""`silt fs`: objects. Listing, stat and rm are graveler calls; bytes go through the S3 gateway
(boto3), never straight to the object store, so the CLI needs no storage credentials."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import click

from silt.cli.common import as_dict, client, done, human_size, json_option, on_branch, output, table, when
from silt.cli.progress import TransferProgress
from silt.client import EXIT_DENIED, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, ClientError, parse_uri
from silt.graveler.v1 import graveler_pb2 as api

TRANSFER_THREADS = 8


@click.group()
def fs() -> None:
    """Objects in a repository: silt://REPO/REF/PATH."""


def _s3_error(exc: Exception, what: str) -> ClientError:
    from botocore.exceptions import ClientError as BotoError
    from botocore.exceptions import EndpointConnectionError

    if isinstance(exc, EndpointConnectionError):
        endpoint = client().settings.s3_endpoint
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
def _s3_errors(what: str) -> Iterator[None]:
    try:
        yield
    except ClientError:
        raise
    except Exception as exc:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError
        from botocore.exceptions import ClientError as BotoError

        if isinstance(exc, BotoError | BotoCoreError | Boto3Error):
            raise _s3_error(exc, what) from None
        raise


@fs.command("ls")
@click.argument("uri", metavar="silt://REPO/REF[/PREFIX]")
@click.option("--recursive", "-r", is_flag=True, help="Every object under the prefix, not only one level.")
@json_option
def ls(uri: str, recursive: bool) -> None:
    """Objects and directories under a prefix."""
    repo, ref, prefix = parse_uri(uri)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    items = list(client().entries(repo, ref, prefix, "" if recursive else "/"))

    def human() -> None:
        rows = []
        for item in items:
            if item.common_prefix:
                rows.append(("dir", "", "", item.key))
            else:
                rows.append(("obj", when(item.entry.last_modified), human_size(item.entry.size), item.key))
        table(["type", "modified", "size", "path"], rows)

    output([{"path": i.key, "type": "dir" if i.common_prefix else "object", **as_dict(i.entry)} for i in items], human)


@fs.command("stat")
@click.argument("uri", metavar="silt://REPO/REF/PATH")
@json_option
def stat(uri: str) -> None:
    """One object's metadata."""
    repo, ref, path = parse_uri(uri)
    info = client().graveler.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key=path))
    e = info.entry

    def human() -> None:
        rows = [
            ("path", info.key),
            ("size", f"{e.size} ({human_size(e.size)})"),
            ("etag", e.etag),
            ("modified", when(e.last_modified)),
            ("content type", e.content_type),
            ("physical address", e.physical_address),
        ]
        rows += [(f"metadata {k}", v) for k, v in sorted(e.metadata.items())]
        table(["field", "value"], rows)

    output({"path": info.key, **as_dict(e)}, human)


@fs.command("rm")
@click.argument("uri", metavar="silt://REPO/BRANCH/PATH")
@click.option("--recursive", "-r", is_flag=True, help="Remove every object under PATH as a prefix.")
@json_option
def rm(uri: str, recursive: bool) -> None:
    """Delete objects from a branch (uncommitted until `silt commit`)."""
    repo, branch, path = parse_uri(uri)
    c = client()
    if not recursive:
        with on_branch(repo, branch):
            c.graveler.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch=branch, key=path))
        done(f"Removed {path}", removed=[path])
        return
    prefix = path if not path or path.endswith("/") else path + "/"
    keys = [item.key for item in c.entries(repo, branch, prefix)]

    def delete(key: str) -> None:
        c.graveler.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch=branch, key=key))

    with ThreadPoolExecutor(TRANSFER_THREADS) as pool:
        list(pool.map(delete, keys))
    done(f"Removed {len(keys)} object(s) under {prefix or '/'}", removed=keys)


@fs.command("cat")
@click.argument("uri", metavar="silt://REPO/REF/PATH")
def cat(uri: str) -> None:
    """Write an object's bytes to stdout."""
    repo, ref, path = parse_uri(uri)
    with _s3_errors(uri):
        body = client().s3.get_object(Bucket=repo, Key=f"{ref}/{path}")["Body"]
        out = sys.stdout.buffer
        for chunk in iter(lambda: body.read(1 << 20), b""):
            out.write(chunk)
        out.flush()


Job = Callable[[Callable[[int], object]], None]


def _transfer(jobs: list[tuple[str, int, Job]], verb: str, quiet: bool) -> None:
    """Run (name, size, job) transfers concurrently; each job gets its file's progress callback."""
    with TransferProgress(verb, [(name, size) for name, size, _ in jobs], quiet) as progress:

        def run(name: str, job: Job) -> None:
            job(progress.file(name))
            progress.finished(name)

        with ThreadPoolExecutor(TRANSFER_THREADS) as pool:
            for future in [pool.submit(run, name, job) for name, _, job in jobs]:
                future.result()


progress_option = click.option(
    "--quiet", "-q", is_flag=True, help="No progress (bars on a terminal, else a line every few seconds)."
)


@fs.command("upload")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.argument("uri", metavar="silt://REPO/BRANCH/PATH")
@click.option("--recursive", "-r", is_flag=True, help="Upload a directory tree under PATH.")
@click.option("--content-type", help="Content type of the uploaded objects.")
@progress_option
@json_option
def upload(source: Path, uri: str, recursive: bool, content_type: str | None, quiet: bool) -> None:
    """Upload a file, or a directory with -r, to a branch (uncommitted until `silt commit`)."""
    repo, branch, path = parse_uri(uri)
    if source.is_dir():
        if not recursive:
            raise ClientError(f"{source} is a directory: use --recursive", EXIT_USAGE)
        prefix = path if not path or path.endswith("/") else path + "/"
        files = sorted(p for p in source.rglob("*") if p.is_file())
        pairs = [(f, prefix + f.relative_to(source).as_posix()) for f in files]
    else:
        key = path + source.name if not path or path.endswith("/") else path
        pairs = [(source, key)]
    s3 = client().s3
    extra = {"ContentType": content_type} if content_type else None

    def job(local: Path, key: str) -> Job:
        def run(progress: Callable[[int], object]) -> None:
            with _s3_errors(f"silt://{repo}/{branch}/{key}"):
                s3.upload_file(str(local), repo, f"{branch}/{key}", ExtraArgs=extra, Callback=progress)

        return run

    sizes = [f.stat().st_size for f, _ in pairs]
    total = sum(sizes)
    with on_branch(repo, branch):
        client().graveler.GetBranch(api.GetBranchRequest(repository=repo, name=branch))
    _transfer([(k, size, job(f, k)) for (f, k), size in zip(pairs, sizes, strict=True)], "uploading", quiet)
    done(
        f"Uploaded {len(pairs)} file(s), {human_size(total)}, to silt://{repo}/{branch}/{path}",
        files=[{"path": k, "size": size} for (_, k), size in zip(pairs, sizes, strict=True)],
        bytes=total,
    )


@fs.command("download")
@click.argument("uri", metavar="silt://REPO/REF/PATH")
@click.argument("destination", type=click.Path(path_type=Path))
@click.option("--recursive", "-r", is_flag=True, help="Download every object under PATH into a directory.")
@progress_option
@json_option
def download(uri: str, destination: Path, recursive: bool, quiet: bool) -> None:
    """Download an object, or every object under a prefix with -r."""
    repo, ref, path = parse_uri(uri)
    c = client()
    if recursive:
        prefix = path if not path or path.endswith("/") else path + "/"
        items = [i for i in c.entries(repo, ref, prefix) if not i.common_prefix]
        pairs = [(i.key, destination / i.key[len(prefix) :], i.entry.size) for i in items]
    else:
        info = c.graveler.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key=path))
        target = destination / Path(path).name if destination.is_dir() else destination
        pairs = [(path, target, info.entry.size)]
    s3 = c.s3

    def job(key: str, local: Path) -> Job:
        def run(progress: Callable[[int], object]) -> None:
            local.parent.mkdir(parents=True, exist_ok=True)
            with _s3_errors(f"silt://{repo}/{ref}/{key}"):
                s3.download_file(repo, f"{ref}/{key}", str(local), Callback=progress)

        return run

    total = sum(size for _, _, size in pairs)
    _transfer([(k, size, job(k, p)) for k, p, size in pairs], "downloading", quiet)
    done(
        f"Downloaded {len(pairs)} file(s), {human_size(total)}, to {os.fspath(destination)}",
        files=[{"path": k, "local": os.fspath(p), "size": size} for k, p, size in pairs],
        bytes=total,
    )
