"""`silt fs`: objects. Listing, stat and rm are REST API calls. Bytes go through presigned URLs
when the server hands them out (straight to and from the object store, with no storage
credentials: the URL is the credential), else through the S3 gateway (boto3), both on the same
endpoint as the REST API; --no-presign always takes the gateway (cli/transfer.py)."""

from __future__ import annotations

import mimetypes
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cli import records
from cli.common import directory_prefix, done, human_size, json_option, on_branch, output, rest, state, table, when
from cli.presign import presign
from cli.rest import exit_of_status, segment
from cli.transfer import mover, presign_option, progress_option, run_transfers
from silt.client_base import EXIT_USAGE, ClientError, parse_uri

# A bulk delete's most paths (the REST API's limit, as lakeFS's).
_DELETE_BATCH = 1000


@click.group()
def fs() -> None:
    """Objects in a repository: lakefs://REPO/REF/PATH."""


def objects(repo: str, ref: str, prefix: str, delimiter: str = "") -> Iterator[dict[str, Any]]:
    """The REST API's listing of ref under prefix: objects, and directories when delimiter is "/"."""
    path = f"/repositories/{segment(repo)}/refs/{segment(ref)}/objects/ls"
    return rest().pages(path, {"prefix": prefix, "delimiter": delimiter, "user_metadata": "true"})


def namespace_of(repo: str) -> str:
    """The repository's storage namespace: objects' addresses are printed relative to it."""
    return str(rest().get(f"/repositories/{segment(repo)}").get("storage_namespace") or "")


def stat_object(repo: str, ref: str, path: str) -> dict[str, Any]:
    info: dict[str, Any] = rest().get(
        f"/repositories/{segment(repo)}/refs/{segment(ref)}/objects/stat",
        {"path": path, "user_metadata": "true"},
        what=f"lakefs://{repo}/{ref}/{path}",
    )
    return info


@fs.command("ls")
@click.argument("uri", metavar="lakefs://REPO/REF[/PREFIX]")
@click.option("--recursive", "-r", is_flag=True, help="Every object under the prefix, not only one level.")
@json_option
def ls(uri: str, recursive: bool) -> None:
    """Objects and directories under a prefix."""
    repo, ref, path = parse_uri(uri)
    items = list(objects(repo, ref, directory_prefix(path), "" if recursive else "/"))
    namespace = namespace_of(repo) if state().json else ""

    def human() -> None:
        rows = []
        for item in items:
            if item.get("path_type") == "common_prefix":
                rows.append(("dir", "", "", item["path"]))
            else:
                rows.append(("obj", when(item.get("mtime")), human_size(item.get("size_bytes") or 0), item["path"]))
        table(["type", "modified", "size", "path"], rows)

    output(
        [
            {
                "path": i["path"],
                "type": "dir" if i.get("path_type") == "common_prefix" else "object",
                **records.entry(i, namespace),
            }
            for i in items
        ],
        human,
    )


@fs.command("stat")
@click.argument("uri", metavar="lakefs://REPO/REF/PATH")
@json_option
def stat(uri: str) -> None:
    """One object's metadata."""
    repo, ref, path = parse_uri(uri)
    info = stat_object(repo, ref, path)
    size = info.get("size_bytes") or 0
    record = records.entry(info, namespace_of(repo))

    def human() -> None:
        rows = [
            ("path", info["path"]),
            ("size", f"{size} ({human_size(size)})"),
            ("etag", info.get("checksum", "")),
            ("modified", when(info.get("mtime"))),
            ("content type", info.get("content_type") or ""),
            ("physical address", record.get("physical_address", "")),
        ]
        rows += [(f"metadata {k}", v) for k, v in sorted((info.get("metadata") or {}).items())]
        table(["field", "value"], rows)

    output({"path": info["path"], **record}, human)


@fs.command("rm")
@click.argument("uri", metavar="lakefs://REPO/BRANCH/PATH")
@click.option("--recursive", "-r", is_flag=True, help="Remove every object under PATH as a prefix.")
@click.option("--yes", "-y", is_flag=True, help="Accepted for scripts; rm never asks (as lakectl's rm).")
@json_option
def rm(uri: str, recursive: bool, yes: bool) -> None:
    """Delete objects from a branch (uncommitted until `silt commit`)."""
    repo, branch, path = parse_uri(uri)
    api = rest()
    objects_path = f"/repositories/{segment(repo)}/branches/{segment(branch)}/objects"
    if not recursive:
        with on_branch(repo, branch):
            api.delete(objects_path, {"path": path}, what=f"lakefs://{repo}/{branch}/{path}")
        done(f"Removed {path}", removed=[path])
        return
    prefix = directory_prefix(path)
    keys = [item["path"] for item in objects(repo, branch, prefix)]
    for start in range(0, len(keys), _DELETE_BATCH):
        with on_branch(repo, branch):
            answer = api.post(objects_path + "/delete", {"paths": keys[start : start + _DELETE_BATCH]})
        errors = (answer or {}).get("errors") or []
        if errors:  # the first refusal (a protected branch, a denied path), as a single rm's
            first = errors[0]
            status = int(first.get("status_code") or 500)
            raise ClientError(f"{first.get('path', '')}: {first.get('message', '')}", exit_of_status(status))
    done(f"Removed {len(keys)} object(s) under {prefix or '/'}", removed=keys)


@fs.command("cat")
@click.argument("uri", metavar="lakefs://REPO/REF/PATH")
@presign_option
def cat(uri: str, presign: bool | None) -> None:
    """Write an object's bytes to stdout."""
    repo, ref, path = parse_uri(uri)
    out = sys.stdout.buffer
    mover(presign).stream(repo, ref, path, out.write)
    out.flush()


@fs.command("upload")
@click.argument("args", nargs=-1, required=True, metavar="[SOURCE] lakefs://REPO/BRANCH/PATH")
@click.option("--source", "-s", "source_option", metavar="SOURCE", help="The file or directory (lakectl's form).")
@click.option("--recursive", "-r", is_flag=True, help="Upload a directory tree under PATH.")
@click.option("--content-type", help="Content type of the uploaded objects (default: guessed from each name).")
@progress_option
@presign_option
@json_option
def upload(
    args: tuple[str, ...],
    source_option: str | None,
    recursive: bool,
    content_type: str | None,
    quiet: bool,
    presign: bool | None,
) -> None:
    """Upload a file, or a directory with -r, to a branch (uncommitted until `silt commit`):
    `silt fs upload SOURCE URI`, or lakectl's `silt fs upload URI --source SOURCE`."""
    if len(args) == 1 and source_option:
        uri, given = args[0], source_option
    elif len(args) == 2 and not source_option:
        given, uri = args
    else:
        raise ClientError("expected `silt fs upload SOURCE URI` or `silt fs upload URI --source SOURCE`", EXIT_USAGE)
    source = Path(given)
    if not source.exists():
        raise ClientError(f"{given}: no such file or directory", EXIT_USAGE)
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
        rest().get(f"/repositories/{segment(repo)}/branches/{segment(branch)}")
    move = mover(presign)
    run_transfers(
        [
            (k, size, move.upload(repo, branch, k, f, content_type=content_type or _content_type(k)))
            for (f, k), size in zip(pairs, sizes, strict=True)
        ],
        "uploading",
        quiet,
    )
    done(
        f"Uploaded {len(pairs)} file(s), {human_size(total)}, to lakefs://{repo}/{branch}/{path}",
        files=[{"path": k, "size": size} for (_, k), size in zip(pairs, sizes, strict=True)],
        bytes=total,
    )


def _content_type(name: str) -> str | None:
    """The content type a name suggests (text/csv for a .csv, as browsers and the web UI set it);
    None leaves it to the server."""
    return mimetypes.guess_type(name, strict=False)[0]


@fs.command("download")
@click.argument("uri", metavar="lakefs://REPO/REF/PATH")
@click.argument("destination", required=False, type=click.Path(path_type=Path))
@click.option("--recursive", "-r", is_flag=True, help="Download every object under PATH into a directory.")
@progress_option
@presign_option
@json_option
def download(uri: str, destination: Path | None, recursive: bool, quiet: bool, presign: bool | None) -> None:
    """Download an object, or every object under a prefix with -r, to DESTINATION (default: the
    current directory, as lakectl's). Files are created with the modes the umask allows."""
    repo, ref, path = parse_uri(uri)
    destination = destination if destination is not None else Path(".")
    if recursive:
        prefix = directory_prefix(path)
        items = list(objects(repo, ref, prefix))
        pairs = [(i["path"], destination / i["path"][len(prefix) :], int(i.get("size_bytes") or 0)) for i in items]
    else:
        info = stat_object(repo, ref, path)
        target = destination / Path(path).name if destination.is_dir() else destination
        pairs = [(path, target, int(info.get("size_bytes") or 0))]
    total = sum(size for _, _, size in pairs)
    move = mover(presign)
    run_transfers([(k, size, move.download(repo, ref, k, p, size)) for k, p, size in pairs], "downloading", quiet)
    done(
        f"Downloaded {len(pairs)} file(s), {human_size(total)}, to {os.fspath(destination)}",
        files=[{"path": k, "local": os.fspath(p), "size": size} for k, p, size in pairs],
        bytes=total,
    )


fs.add_command(presign)  # lakectl's `fs presign`, in a module of its own (it needs lakeFS's client)


@fs.command("stage")
@click.argument("uri", metavar="lakefs://REPO/BRANCH/PATH")
@click.option("--location", required=True, help="The object's full address in the store (s3://bucket/key...).")
@click.option("--size", type=int, required=True, help="Its size in bytes.")
@click.option("--checksum", required=True, help="Its ETag (MD5, hex).")
@click.option("--mtime", type=int, default=None, help="Its modification time, Unix seconds (default: now).")
@click.option("--content-type", help="Its content type.")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="User metadata; repeatable.")
@json_option
def stage(
    uri: str,
    location: str,
    size: int,
    checksum: str,
    mtime: int | None,
    content_type: str | None,
    meta: tuple[str, ...],
) -> None:
    """Name an object that is already in the store (below an allowed import prefix) at PATH on
    the branch, without copying it (lakectl's fs stage)."""
    from cli.common import meta_pairs

    repo, branch, path = parse_uri(uri)
    if not path:
        raise ClientError(f"expected lakefs://<repository>/<branch>/<path>, got {uri!r}", EXIT_USAGE)
    body: dict[str, Any] = {"physical_address": location, "checksum": checksum, "size_bytes": size}
    if mtime is not None:
        body["mtime"] = mtime
    if content_type:
        body["content_type"] = content_type
    if meta:
        body["metadata"] = meta_pairs(meta)
    with on_branch(repo, branch):
        info = rest().put(f"/repositories/{segment(repo)}/branches/{segment(branch)}/objects", body, {"path": path})
    output({"path": info["path"], **records.entry(info)}, lambda: click.echo(f"Staged {info['path']} from {location}"))


@fs.command("update-metadata")
@click.argument("uri", metavar="lakefs://REPO/BRANCH/PATH")
@click.option("--metadata", multiple=True, required=True, metavar="KEY=VALUE[,KEY=VALUE]", help="User metadata to set.")
@json_option
def update_metadata(uri: str, metadata: tuple[str, ...]) -> None:
    """Replace an object's user metadata on a branch (lakectl's fs update-metadata)."""
    from cli.common import meta_pairs

    repo, branch, path = parse_uri(uri)
    if not path:
        raise ClientError(f"expected lakefs://<repository>/<branch>/<path>, got {uri!r}", EXIT_USAGE)
    pairs = meta_pairs(tuple(pair for item in metadata for pair in item.split(",") if pair))
    with on_branch(repo, branch):
        rest().put(
            f"/repositories/{segment(repo)}/branches/{segment(branch)}/objects/stat/user_metadata",
            {"set": pairs},
            {"path": path},
            what=f"lakefs://{repo}/{branch}/{path}",
        )
    done(f"Metadata of {path} updated", path=path, metadata=pairs)
