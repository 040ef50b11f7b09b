"""`silt local`: lakectl's local checkouts. A directory holds the objects under a path of a ref
and a `.lakefs_ref.yaml` naming its source and the commit it was synced at (`at_head`);
status, commit, pull and checkout compare it with that commit and with the ref's head now.

Over the REST API, as the other user commands. One case calls graveler's gRPC service instead: a
commit of a checkout of a path while the branch has other uncommitted changes outside it (the
REST API commits a whole branch; graveler commits one prefix)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from cli.common import done, human_size, json_option, meta_pairs, on_branch, output, rest, state, table
from cli.local_index import (
    ADDED,
    MODIFIED,
    MTIME_META,
    REF_FILE,
    REMOVED,
    Change,
    Source,
    as_json,
    entry_mtime_ns,
    find_checkouts,
    local_changes,
    local_path,
    read_source,
    same_content,
    scan,
    write_source,
)
from cli.rest import ApiError, segment
from cli.transfer import Job, mover, presign_option, progress_option, run_transfers
from silt.client_base import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_USAGE, ClientError, parse_uri
from silt.graveler.v1 import model_pb2 as pb

# A change to make in the checkout: the object to download, or None to delete the file.
Plan = list[tuple[str, pb.Entry | None]]

_DIFF_KIND = {"added": ADDED, "removed": REMOVED, "changed": MODIFIED}


dir_argument = click.argument("directory", required=False, default=".", type=click.Path(path_type=Path))


@click.group()
def local() -> None:
    """Local checkouts of a path of a ref, as lakectl's `local` (a `.lakefs_ref.yaml` in each)."""


# --- remote side ---------------------------------------------------------------------------


def _repo_path(repo: str) -> str:
    return f"/repositories/{segment(repo)}"


def _resolve(repo: str, ref: str) -> str:
    """The commit ref names now."""
    info = rest().get(f"{_repo_path(repo)}/commits/{segment(ref)}", what=f"lakefs://{repo}/{ref}")
    return str(info["id"])


def _ref_kind(repo: str, ref: str) -> str:
    """ "branch", "tag" or "commit": what ref is (only a branch takes commits)."""
    for kind, plural in (("branch", "branches"), ("tag", "tags")):
        try:
            rest().get(f"{_repo_path(repo)}/{plural}/{segment(ref)}")
        except ApiError as exc:
            if exc.exit_code != EXIT_NOT_FOUND:
                raise
        else:
            return kind
    return "commit"


def _entry(stats: dict[str, Any]) -> pb.Entry:
    """The REST API's object record as the entry the checkout's index compares files with."""
    entry = pb.Entry(
        physical_address=str(stats.get("physical_address") or ""),
        size=int(stats.get("size_bytes") or 0),
        etag=str(stats.get("checksum") or ""),
        content_type=str(stats.get("content_type") or ""),
        metadata={str(k): str(v) for k, v in (stats.get("metadata") or {}).items()},
    )
    entry.last_modified.FromSeconds(int(stats.get("mtime") or 0))
    return entry


def _objects(source: Source, commit_id: str) -> dict[str, pb.Entry]:
    """The objects of the checkout's path at a commit, by path relative to it."""
    prefix = source.prefix
    out = {}
    listing = rest().pages(
        f"{_repo_path(source.repo)}/refs/{segment(commit_id)}/objects/ls", {"prefix": prefix, "user_metadata": "true"}
    )
    for item in listing:
        rel = item["path"][len(prefix) :]
        if item.get("path_type") != "common_prefix" and rel and not rel.endswith("/") and rel != REF_FILE:
            out[rel] = _entry(item)
    return out


def _remote_changes(source: Source, head: str) -> list[tuple[Change, pb.Entry | None]]:
    """What changed under the checkout's path between at_head and head, with the new object."""
    if head == source.at_head:
        return []
    path = f"{_repo_path(source.repo)}/refs/{segment(source.at_head)}/diff/{segment(head)}"
    changed = []
    for item in rest().pages(path, {"prefix": source.prefix, "type": "two_dot"}):
        rel = item["path"][len(source.prefix) :]
        if item["type"] in _DIFF_KIND and rel and not rel.endswith("/") and rel != REF_FILE:
            changed.append(Change(rel, _DIFF_KIND[item["type"]]))
    if not changed:
        return []
    # The diff names paths; the new objects' records (size, ETag, mtime) come from one listing.
    at_head = _objects(source, head) if any(c.kind != REMOVED for c in changed) else {}
    return [(c, None if c.kind == REMOVED else at_head[c.path]) for c in changed]


# --- local side ----------------------------------------------------------------------------


def _apply(root: Path, source: Source, commit_id: str, plan: Plan, quiet: bool, presign: bool | None) -> None:
    """Download or delete files so that the planned paths match the commit's objects."""
    targets = [(rel, local_path(root, rel), entry) for rel, entry in plan]  # all checked first
    move = mover(presign) if any(entry is not None for _, _, entry in targets) else None
    jobs: list[tuple[str, int, Job]] = []
    for rel, target, entry in targets:
        if entry is None:
            _remove(root, target)
            continue
        mtime = entry_mtime_ns(entry)

        def stamp(path: Path = target, mtime: int = mtime) -> None:
            os.utime(path, ns=(mtime, mtime))

        key = source.prefix + rel
        assert move is not None
        jobs.append((rel, entry.size, move.download(source.repo, commit_id, key, target, entry.size, stamp)))
    if jobs:
        run_transfers(jobs, "downloading", quiet)


def _remove(root: Path, target: Path) -> None:
    if target.is_file():
        target.unlink()
    parent = target.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _refuse(paths: Iterable[str], message: str) -> None:
    """List the conflicting paths (stdout, or JSON) and fail with exit code 5."""
    listed = sorted(set(paths))
    if state().json:
        click.echo(json.dumps({"conflicts": listed}, indent=2))
    else:
        for path in listed:
            click.echo(f"conflict: {path}")
    raise ClientError(f"{len(listed)} conflicting path(s): {message}", EXIT_CONFLICT)


def _changes_json(changes: Iterable[Change]) -> list[dict[str, str]]:
    return as_json(changes)


# --- commands ------------------------------------------------------------------------------


@local.command("clone")
@click.argument("uri", metavar="lakefs://REPO/REF[/PATH]")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@progress_option
@presign_option
@json_option
def clone(uri: str, directory: Path | None, quiet: bool, presign: bool | None) -> None:
    """Download every object under PATH at REF into DIRECTORY (default: PATH's last element or
    the repository's name), which must be empty or absent."""
    repo, ref, path = parse_uri(uri)
    root = directory or Path(path.rstrip("/").rpartition("/")[2] or repo)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ClientError(f"{root} already exists and is not an empty directory", EXIT_CONFLICT)
    head = _resolve(repo, ref)
    source = Source(repo, ref, path, head)
    objects = _objects(source, head)
    root.mkdir(parents=True, exist_ok=True)
    _apply(root, source, head, list(objects.items()), quiet, presign)
    write_source(root, source)
    total = sum(e.size for e in objects.values())
    done(
        f"Cloned {source.src} at {head[:12]} into {root}: {len(objects)} file(s), {human_size(total)}",
        directory=os.fspath(root),
        src=source.src,
        at_head=head,
        files=len(objects),
        bytes=total,
    )


@local.command("init")
@click.argument("uri", metavar="lakefs://REPO/REF[/PATH]")
@click.argument("directory", required=False, default=".", type=click.Path(path_type=Path, file_okay=False))
@click.option("--force", is_flag=True, help="Connect a directory that already is a checkout (of anything).")
@json_option
def init(uri: str, directory: Path, force: bool) -> None:
    """Connect DIRECTORY (default: here), as it is, to PATH at REF's head, downloading nothing
    (lakectl's local init): `status` then shows its files against that commit, `commit` uploads them."""
    repo, ref, path = parse_uri(uri)
    if (directory / REF_FILE).exists() and not force:
        raise ClientError(
            f"{directory} is a local checkout already ({REF_FILE}); --force connects it anew", EXIT_CONFLICT
        )
    source = Source(repo, ref, path, _resolve(repo, ref))
    directory.mkdir(parents=True, exist_ok=True)
    write_source(directory, source)
    done(
        f"{directory} connected to {source.src} at {source.at_head[:12]}",
        directory=os.fspath(directory),
        src=source.src,
        at_head=source.at_head,
    )


@local.command("status")
@dir_argument
@json_option
def status(directory: Path) -> None:
    """Local changes against the synced commit and, if the ref moved since, remote changes."""
    source = read_source(directory)
    changes = local_changes(scan(directory), _objects(source, source.at_head))
    head = _resolve(source.repo, source.ref)
    remote = [change for change, _ in _remote_changes(source, head)]

    def human() -> None:
        click.echo(f"{source.src} at {source.at_head[:12]}")
        if not changes and not remote:
            click.echo("No changes")
        rows = [("local", c.kind, c.path) for c in changes]
        rows += [("remote", c.kind, c.path) for c in remote]
        if rows:
            table(["side", "change", "path"], rows)
        if remote:
            click.echo(f"{source.ref} moved to {head[:12]}: `silt local pull` brings its changes")

    output(
        {
            "src": source.src,
            "at_head": source.at_head,
            "remote_head": head,
            "local": _changes_json(changes),
            "remote": _changes_json(remote),
        },
        human,
    )


@local.command("commit")
@dir_argument
@click.option("--message", "-m", required=True, help="Commit message.")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="Commit metadata; repeatable.")
@progress_option
@presign_option
@json_option
def commit(directory: Path, message: str, meta: tuple[str, ...], quiet: bool, presign: bool | None) -> None:
    """Upload added and modified files, delete removed ones, and commit them on the branch."""
    source = read_source(directory)
    metadata = meta_pairs(meta)
    kind = _ref_kind(source.repo, source.ref)
    if kind != "branch":
        raise ClientError(
            f"{source.ref!r} is a {kind}, not a branch: only a branch takes commits; "
            f"`silt local checkout {directory} --ref BRANCH` first",
            EXIT_USAGE,
        )
    changes = local_changes(scan(directory), _objects(source, source.at_head))
    if not changes:
        done("No local changes: nothing to commit", commit=None, changes=[])
        return
    mine = {c.path for c in changes}
    remote = _remote_changes(source, _resolve(source.repo, source.ref))
    overlap = mine & {c.path for c, _ in remote}
    if overlap:
        _refuse(overlap, f"{source.ref} changed them since {source.at_head[:12]}; `silt local pull` first")
    others_outside = _check_clean_branch(source)
    _push(directory, source, changes, quiet, presign)
    with on_branch(source.repo, source.ref):
        if others_outside:
            commit_id = _commit_prefix(source, message, metadata)
        else:
            body = {"message": message, "metadata": metadata}
            branch = f"{_repo_path(source.repo)}/branches/{segment(source.ref)}"
            commit_id = str(rest().post(branch + "/commits", body)["id"])
    # Others' commits since at_head (none on our paths) come in too: the checkout is at the new commit.
    theirs = [(c.path, e) for c, e in _remote_changes(source, commit_id) if c.path not in mine]
    _apply(directory, source, commit_id, theirs, quiet, presign)
    write_source(directory, Source(source.repo, source.ref, source.path, commit_id))
    done(
        f"Commit {commit_id} on {source.ref}: {len(changes)} change(s)",
        commit=commit_id,
        changes=_changes_json(changes),
    )


def _commit_prefix(source: Source, message: str, metadata: dict[str, str]) -> str:
    """A commit of the checkout's path alone: graveler's gRPC call (the REST API commits whole branches)."""
    from cli.common import client
    from silt.graveler.v1 import graveler_pb2 as api

    info = client().graveler.Commit(
        api.CommitRequest(
            repository=source.repo,
            branch=source.ref,
            message=message,
            metadata=metadata,
            prefixes=[source.prefix] if source.prefix else [],
        )
    )
    return str(info.id)


def _check_clean_branch(source: Source) -> bool:
    """Refuse when the branch has uncommitted changes under the path: the commit would take them.
    Whether it has some outside the path (then only a commit of the path leaves them staged)."""
    staged = rest().get(f"{_repo_path(source.repo)}/branches/{segment(source.ref)}/diff", {"amount": 100}, what="diff")
    paths = [str(item["path"]) for item in staged.get("results") or []]
    inside = [p for p in paths if p.startswith(source.prefix)]
    if inside:
        keys = [p[len(source.prefix) :] for p in inside]  # as paths in the checkout
        _refuse(
            keys,
            f"{source.ref} has uncommitted changes under {source.prefix or '/'} that are not from this "
            f"checkout; commit or reset them first (silt branch reset)",
        )
    return len(inside) < len(paths) or bool(staged.get("pagination", {}).get("has_more"))


def _push(root: Path, source: Source, changes: list[Change], quiet: bool, presign: bool | None) -> None:
    """Upload added and modified files (with their mtime) and delete removed ones, on the branch."""
    files = scan(root)
    uploads = [change for change in changes if change.kind != REMOVED]
    move = mover(presign) if uploads else None
    jobs: list[tuple[str, int, Job]] = []
    for change in uploads:
        assert move is not None
        f = files[change.path]
        metadata = {MTIME_META: str(f.mtime_ns)}
        key = source.prefix + change.path
        jobs.append((change.path, f.size, move.upload(source.repo, source.ref, key, f.path, metadata)))
    if jobs:
        run_transfers(jobs, "uploading", quiet)
    objects = f"{_repo_path(source.repo)}/branches/{segment(source.ref)}/objects"
    for change in changes:
        if change.kind == REMOVED:
            rest().delete(objects, {"path": source.prefix + change.path})


@local.command("pull")
@dir_argument
@click.option("--force", is_flag=True, help="Overwrite local changes to paths that changed remotely.")
@progress_option
@presign_option
@json_option
def pull(directory: Path, force: bool, quiet: bool, presign: bool | None) -> None:
    """Bring the ref's changes since the synced commit into the checkout."""
    source = read_source(directory)
    head = _resolve(source.repo, source.ref)
    remote = _remote_changes(source, head)
    if not force:
        mine = {c.path for c in local_changes(scan(directory), _objects(source, source.at_head))}
        overlap = mine & {c.path for c, _ in remote}
        if overlap:
            _refuse(overlap, "local changes to paths that changed remotely, nothing changed; commit, undo, or --force")
    _apply(directory, source, head, [(c.path, e) for c, e in remote], quiet, presign)
    write_source(directory, Source(source.repo, source.ref, source.path, head))
    message = f"Pulled {len(remote)} change(s) at {head[:12]}" if remote else f"Up to date at {head[:12]}"
    done(message, at_head=head, changes=_changes_json(c for c, _ in remote))


@local.command("checkout")
@dir_argument
@click.option("--ref", "new_ref", help="Switch to this ref (branch, tag or commit); default: the current one.")
@click.option("--force", is_flag=True, help="Discard local changes.")
@progress_option
@presign_option
@json_option
def checkout(directory: Path, new_ref: str | None, force: bool, quiet: bool, presign: bool | None) -> None:
    """Make the checkout match a ref's head (its own ref's, or --ref's)."""
    source = read_source(directory)
    files = scan(directory)
    if not force:
        changes = local_changes(files, _objects(source, source.at_head))
        if changes:
            _refuse((c.path for c in changes), "local changes would be lost; commit them, or --force")
    ref = new_ref or source.ref
    target = Source(source.repo, ref, source.path, _resolve(source.repo, ref))
    wanted = _objects(target, target.at_head)
    plan: Plan = [(rel, None) for rel in files if rel not in wanted]
    plan += [(rel, e) for rel, e in wanted.items() if rel not in files or not same_content(files[rel], e)]
    _apply(directory, target, target.at_head, plan, quiet, presign)
    write_source(directory, target)
    done(
        f"{directory} is at {target.src} {target.at_head[:12]} ({len(plan)} file(s) changed)",
        src=target.src,
        at_head=target.at_head,
        changed=len(plan),
    )


@local.command("list")
@click.argument("directory", required=False, default=".", type=click.Path(path_type=Path, file_okay=False))
@json_option
def list_(directory: Path) -> None:
    """Local checkouts under DIRECTORY (default: here): their source and synced commit."""
    rows = []
    for root in find_checkouts(directory):
        source = read_source(root)
        rows.append({"directory": os.fspath(root), "src": source.src, "at_head": source.at_head})
    output(rows, lambda: table(["directory", "src", "at head"], [tuple(r.values()) for r in rows]))
