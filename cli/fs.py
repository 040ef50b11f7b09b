"""`silt fs`: objects. Listing, stat and rm are graveler calls. Bytes go through presigned URLs
when the server hands them out (straight to and from the object store, with no storage
credentials: the URL is the credential), else through the S3 gateway (boto3); --no-presign
always takes the gateway (cli/transfer.py)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from cli.common import as_dict, client, directory_prefix, done, human_size, json_option, on_branch, output, table, when
from cli.presign import presign
from cli.transfer import TRANSFER_THREADS, mover, presign_option, progress_option, run_transfers
from silt.client import EXIT_USAGE, ClientError, parse_uri
from silt.graveler.v1 import graveler_pb2 as api


@click.group()
def fs() -> None:
    """Objects in a repository: silt://REPO/REF/PATH."""


@fs.command("ls")
@click.argument("uri", metavar="silt://REPO/REF[/PREFIX]")
@click.option("--recursive", "-r", is_flag=True, help="Every object under the prefix, not only one level.")
@json_option
def ls(uri: str, recursive: bool) -> None:
    """Objects and directories under a prefix."""
    repo, ref, path = parse_uri(uri)
    prefix = directory_prefix(path)
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
    prefix = directory_prefix(path)
    keys = [item.key for item in c.entries(repo, branch, prefix)]

    def delete(key: str) -> None:
        c.graveler.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch=branch, key=key))

    with ThreadPoolExecutor(TRANSFER_THREADS) as pool:
        list(pool.map(delete, keys))
    done(f"Removed {len(keys)} object(s) under {prefix or '/'}", removed=keys)


@fs.command("cat")
@click.argument("uri", metavar="silt://REPO/REF/PATH")
@presign_option
def cat(uri: str, presign: bool | None) -> None:
    """Write an object's bytes to stdout."""
    repo, ref, path = parse_uri(uri)
    out = sys.stdout.buffer
    mover(presign).stream(repo, ref, path, out.write)
    out.flush()


@fs.command("upload")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.argument("uri", metavar="silt://REPO/BRANCH/PATH")
@click.option("--recursive", "-r", is_flag=True, help="Upload a directory tree under PATH.")
@click.option("--content-type", help="Content type of the uploaded objects.")
@progress_option
@presign_option
@json_option
def upload(
    source: Path, uri: str, recursive: bool, content_type: str | None, quiet: bool, presign: bool | None
) -> None:
    """Upload a file, or a directory with -r, to a branch (uncommitted until `silt commit`)."""
    repo, branch, path = parse_uri(uri)
    if source.is_dir():
        if not recursive:
            raise ClientError(f"{source} is a directory: use --recursive", EXIT_USAGE)
        prefix = directory_prefix(path)
        files = sorted(p for p in source.rglob("*") if p.is_file())
        pairs = [(f, prefix + f.relative_to(source).as_posix()) for f in files]
    else:
        key = path + source.name if not path or path.endswith("/") else path
        pairs = [(source, key)]
    sizes = [f.stat().st_size for f, _ in pairs]
    total = sum(sizes)
    with on_branch(repo, branch):
        client().graveler.GetBranch(api.GetBranchRequest(repository=repo, name=branch))
    move = mover(presign)
    run_transfers(
        [
            (k, size, move.upload(repo, branch, k, f, content_type=content_type))
            for (f, k), size in zip(pairs, sizes, strict=True)
        ],
        "uploading",
        quiet,
    )
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
@presign_option
@json_option
def download(uri: str, destination: Path, recursive: bool, quiet: bool, presign: bool | None) -> None:
    """Download an object, or every object under a prefix with -r."""
    repo, ref, path = parse_uri(uri)
    c = client()
    if recursive:
        prefix = directory_prefix(path)
        items = [i for i in c.entries(repo, ref, prefix) if not i.common_prefix]
        pairs = [(i.key, destination / i.key[len(prefix) :], i.entry.size) for i in items]
    else:
        info = c.graveler.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key=path))
        target = destination / Path(path).name if destination.is_dir() else destination
        pairs = [(path, target, info.entry.size)]
    total = sum(size for _, _, size in pairs)
    move = mover(presign)
    run_transfers([(k, size, move.download(repo, ref, k, p, size)) for k, p, size in pairs], "downloading", quiet)
    done(
        f"Downloaded {len(pairs)} file(s), {human_size(total)}, to {os.fspath(destination)}",
        files=[{"path": k, "local": os.fspath(p), "size": size} for k, p, size in pairs],
        bytes=total,
    )


fs.add_command(presign)  # lakectl's `fs presign`, in a module of its own (it needs lakeFS's client)
