"""`silt commit`, `log`, `diff`, `merge`, `show` and `find-merge-base`: recording, reading and
combining commits, over the REST API. Two Silt-only options have no REST form and call graveler's
gRPC service instead (an operator's port, internal on Kubernetes): a commit of one prefix
(`commit lakefs://r/b/PREFIX`) and `merge --path-strategy`."""

from __future__ import annotations

import json
from typing import Any

import click

from cli import records
from cli.common import json_option, meta_pairs, on_branch, output, rest, state, table, when
from cli.rest import ApiError, segment
from silt.client_base import EXIT_CONFLICT, EXIT_USAGE, ClientError, is_uri, parse_uri

_DIFF_SIGN = {
    "added": ("+", "added"),
    "removed": ("-", "removed"),
    "changed": ("~", "changed"),
    "prefix_changed": ("~", "prefix changed"),
    "conflict": ("!", "conflict"),
}
_STRATEGIES = ("dest-wins", "fail", "source-wins")


def print_commit(info: dict[str, Any], done: str) -> None:
    """A commit the command made (the REST API's record), as a line or --json's record."""
    output(records.commit(info), lambda: click.echo(f"{done}: commit {info['id']}"))


def _print_conflicts(paths: list[str], truncated: bool) -> None:
    """The conflicts that stopped a merge, then exit code 5."""
    if state().json:
        click.echo(json.dumps({"conflicts": paths, "truncated": truncated}, indent=2))
    else:
        for path in paths:
            click.echo(f"conflict: {path}")
    more = " (the first ones; there may be more)" if truncated else ""
    raise ClientError(
        f"{len(paths)} conflict(s){more}, nothing changed; resolve with --strategy source-wins or dest-wins",
        EXIT_CONFLICT,
    )


def _same_repository(repo: str, uri: str, what: str) -> str:
    """The ref of uri, a URI in repo (lakectl's form) or a bare ref."""
    if not is_uri(uri):
        return uri
    other, ref, _ = parse_uri(uri)
    if other != repo:
        raise ClientError(f"{what} must be in the same repository", EXIT_USAGE)
    return ref


def _commit_path(repo: str, ref: str) -> str:
    return f"/repositories/{segment(repo)}/commits/{segment(ref)}"


@click.command("commit")
@click.argument("uri", metavar="lakefs://REPO/BRANCH[/PREFIX]")
@click.option("--message", "-m", required=True, help="Commit message.")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="Commit metadata; repeatable.")
@click.option(
    "--allow-empty", "--allow-empty-commit", "allow_empty", is_flag=True, help="Commit even when nothing changed."
)
@json_option
def commit(uri: str, message: str, meta: tuple[str, ...], allow_empty: bool) -> None:
    """Commit a branch's uncommitted changes (only those under PREFIX when given)."""
    repo, branch, prefix = parse_uri(uri)
    metadata = meta_pairs(meta)
    if prefix:
        info = _commit_prefix(repo, branch, prefix, message, metadata, allow_empty)
    else:
        body: dict[str, Any] = {"message": message, "metadata": metadata}
        if allow_empty:
            body["allow_empty"] = True
        with on_branch(repo, branch):
            info = rest().post(f"/repositories/{segment(repo)}/branches/{segment(branch)}/commits", body)
    # lakectl names the branch by its URI first.
    output(
        records.commit(info), lambda: click.echo(f"Branch: lakefs://{repo}/{branch}\nCommit {info['id']} on {branch}")
    )


def _commit_prefix(
    repo: str, branch: str, prefix: str, message: str, metadata: dict[str, str], allow_empty: bool
) -> dict[str, Any]:
    """A commit of the changes under one prefix: graveler's gRPC call (the REST API commits a
    whole branch), answered as the REST API's record."""
    from cli.common import as_dict, client
    from silt.graveler.v1 import graveler_pb2 as api

    with on_branch(repo, branch):
        info = client().graveler.Commit(
            api.CommitRequest(
                repository=repo,
                branch=branch,
                message=message,
                metadata=metadata,
                allow_empty=allow_empty,
                prefixes=[prefix],
            )
        )
    data = as_dict(info)
    return {
        "id": info.id,
        "committer": info.committer,
        "message": info.message,
        "meta_range_id": info.metarange_id,
        "creation_date": info.creation_date.seconds,
        "parents": list(info.parents),
        "metadata": dict(info.metadata),
        "generation": data.get("generation", 0),
    }


def _split(values: tuple[str, ...]) -> list[str]:
    """lakectl's list flags: repeatable, and comma-separated within one."""
    return [v for item in values for v in item.split(",") if v]


@click.command("log")
@click.argument("uri", metavar="lakefs://REPO/REF[/PATH]")
@click.option("--limit", "-n", "--amount", "limit", type=int, default=0, help="At most this many commits (0: all).")
@click.option("--first-parent", is_flag=True, help="Follow first parents only.")
@click.option("--oneline", is_flag=True, help="One line per commit.")
@click.option("--objects", multiple=True, metavar="PATH", help="Only commits that changed these objects (lakectl's).")
@click.option("--prefixes", multiple=True, metavar="PREFIX", help="Only commits that changed under these prefixes.")
@click.option("--no-merges", is_flag=True, help="Leave out merge commits.")
@json_option
def log(
    uri: str,
    limit: int,
    first_parent: bool,
    oneline: bool,
    objects: tuple[str, ...],
    prefixes: tuple[str, ...],
    no_merges: bool,
) -> None:
    """History of a ref, newest first (only commits that touched PATH, a key or prefix, when given)."""
    repo, ref, path = parse_uri(uri)
    params: dict[str, Any] = {
        "objects": _split(objects),
        "prefixes": _split(prefixes) + ([path] if path else []),
        "first_parent": "true" if first_parent else None,
    }
    commits: list[dict[str, Any]] = []
    for c in rest().pages(f"/repositories/{segment(repo)}/refs/{segment(ref)}/commits", params):
        if no_merges and len(c.get("parents") or []) > 1:
            continue
        commits.append(c)
        if limit and len(commits) >= limit:
            break

    def human() -> None:
        if oneline:
            for c in commits:
                click.echo(f"{c['id'][:12]} {c['message']}")
            return
        for c in commits:
            click.echo(f"commit {c['id']}")
            parents = c.get("parents") or []
            if len(parents) > 1:
                click.echo("merge:  " + " ".join(p[:12] for p in parents))
            click.echo(f"author: {c.get('committer', '')}")
            click.echo(f"date:   {when(c.get('creation_date'))}")
            for key, value in sorted((c.get("metadata") or {}).items()):
                click.echo(f"meta:   {key}={value}")
            click.echo(f"\n    {c['message']}\n")

    output([records.commit(c) for c in commits], human)


@click.command("diff")
@click.argument("left", metavar="lakefs://REPO/REF[/PREFIX]")
@click.argument("right", required=False, metavar="[lakefs://REPO/REF | REF]")
@click.option(
    "--three-dot",
    is_flag=True,
    help="What changed on RIGHT since the merge base of LEFT and RIGHT (the default, as lakectl's; kept for scripts).",
)
@click.option(
    "--two-way",
    "--two-dot",
    "two_way",
    is_flag=True,
    help="Compare the two refs as they are, whatever their common ancestor (lakectl's --two-way).",
)
@click.option("--prefix", "prefix_option", default="", help="Only changes under this prefix (lakectl's --prefix).")
@click.option("--delimiter", default="", help='"/" to summarise changes per directory.')
@json_option
def diff(left: str, right: str | None, three_dot: bool, two_way: bool, prefix_option: str, delimiter: str) -> None:
    """Differences between two refs, or a branch's uncommitted changes when only LEFT is given."""
    repo, left_ref, prefix = parse_uri(left)
    params: dict[str, Any] = {"prefix": prefix_option or prefix, "delimiter": delimiter}
    if right is not None:
        right_ref = _same_repository(repo, right, "both sides of a diff")
        if three_dot and two_way:
            raise ClientError("--three-dot and --two-way exclude each other", EXIT_USAGE)
        # lakectl's default: the changes RIGHT brings since it left LEFT's history (a merge's preview).
        params["type"] = "two_dot" if two_way else "three_dot"
        path = f"/repositories/{segment(repo)}/refs/{segment(left_ref)}/diff/{segment(right_ref)}"
    else:
        path = f"/repositories/{segment(repo)}/branches/{segment(left_ref)}/diff"
    items = list(rest().pages(path, params))

    def human() -> None:
        if not items:
            click.echo("No differences")
        for item in items:
            sign, _ = _DIFF_SIGN.get(item["type"], ("?", "?"))
            click.echo(f"{sign} {item['path']}")

    output([{"key": i["path"], "type": _DIFF_SIGN.get(i["type"], ("?", "unknown"))[1]} for i in items], human)


@click.command("merge")
@click.argument("source", metavar="lakefs://REPO/SOURCE_REF")
@click.argument("destination", metavar="lakefs://REPO/DEST_BRANCH | DEST_BRANCH")
@click.option(
    "--strategy",
    type=click.Choice(_STRATEGIES),
    default="fail",
    show_default=True,
    help="How to resolve conflicting changes.",
)
@click.option(
    "--path-strategy",
    multiple=True,
    metavar="GLOB=STRATEGY",
    help="Per-path strategy; first match wins (Silt's: through graveler's gRPC service, an operator's port).",
)
@click.option("--squash", is_flag=True, help="One parent: the destination.")
@click.option("--message", "-m", default="", help="Commit message.")
@click.option(
    "--allow-empty", "--force", "allow_empty", is_flag=True, help="Create a commit even when nothing changes."
)
@json_option
def merge(
    source: str,
    destination: str,
    strategy: str,
    path_strategy: tuple[str, ...],
    squash: bool,
    message: str,
    allow_empty: bool,
) -> None:
    """Merge SOURCE into the branch DESTINATION; conflicts are listed and exit with code 5."""
    repo, source_ref, _ = parse_uri(source)
    dest = _same_repository(repo, destination, "source and destination")
    if path_strategy:
        _merge_by_path(repo, source_ref, dest, strategy, path_strategy, squash, message, allow_empty)
        return
    body: dict[str, Any] = {
        "message": message or None,
        "squash_merge": squash or None,
        "allow_empty": allow_empty or None,
    }
    if strategy != "fail":
        body["strategy"] = strategy
    api = rest()
    try:
        result = api.post(
            f"/repositories/{segment(repo)}/refs/{segment(source_ref)}/merge/{segment(dest)}",
            {k: v for k, v in body.items() if v is not None},
        )
    except ApiError as exc:
        conflicts = exc.body.get("conflicts") if exc.status == 409 else None
        if not isinstance(conflicts, list):
            raise
        _print_conflicts([str(c.get("path")) for c in conflicts], bool(exc.body.get("conflicts_truncated")))
        raise AssertionError("unreachable") from None
    print_commit(api.get(_commit_path(repo, result["reference"])), f"Merged {source_ref} into {dest}")


def _merge_by_path(
    repo: str,
    source_ref: str,
    dest: str,
    strategy: str,
    path_strategy: tuple[str, ...],
    squash: bool,
    message: str,
    allow_empty: bool,
) -> None:
    """A merge with per-path strategies: graveler's gRPC call (lakeFS's REST API has no such field)."""
    from cli.common import client
    from silt.graveler.v1 import graveler_pb2 as api

    strategies = {
        "fail": api.MERGE_STRATEGY_FAIL,
        "source-wins": api.MERGE_STRATEGY_SOURCE_WINS,
        "dest-wins": api.MERGE_STRATEGY_DEST_WINS,
    }
    per_path = []
    for item in path_strategy:
        pattern, sep, name = item.rpartition("=")
        if not sep or name not in strategies:
            raise ClientError(f"expected --path-strategy GLOB={'|'.join(sorted(strategies))}, got {item!r}", EXIT_USAGE)
        per_path.append(api.PathStrategy(pattern=pattern, strategy=strategies[name]))
    resp = client().graveler.Merge(
        api.MergeRequest(
            repository=repo,
            source_ref=source_ref,
            destination_branch=dest,
            strategy=strategies[strategy],
            path_strategies=per_path,
            squash=squash,
            message=message,
            allow_empty=allow_empty,
        )
    )
    if resp.conflicts:
        _print_conflicts([c.key for c in resp.conflicts], resp.conflicts_truncated)
    print_commit(rest().get(_commit_path(repo, resp.commit.id)), f"Merged {source_ref} into {dest}")


@click.command("show")
@click.argument("args", nargs=-1, required=True, metavar="[commit] lakefs://REPO/REF")
@json_option
def show_commit(args: tuple[str, ...]) -> None:
    """The commit a ref resolves to."""
    if args[0] == "commit" and len(args) == 2:  # lakectl's `show commit URI`
        args = args[1:]
    if len(args) != 1:
        raise ClientError("expected `silt show [commit] lakefs://<repository>/<ref>`", EXIT_USAGE)
    repo, ref, _ = parse_uri(args[0])
    info = rest().get(_commit_path(repo, ref))

    def human() -> None:
        table(
            ["field", "value"],
            [
                ("id", info["id"]),
                ("message", info["message"]),
                ("committer", info.get("committer", "")),
                ("date", when(info.get("creation_date"))),
                ("parents", " ".join(info.get("parents") or [])),
                # metadata, e.g. silt.requested-committer: a name the caller asked for, not the author
                *((f"meta {k}", v) for k, v in sorted((info.get("metadata") or {}).items())),
            ],
        )

    output(records.commit(info), human)


@click.command("find-merge-base")
@click.argument("source", metavar="lakefs://REPO/SOURCE_REF")
@click.argument("destination", metavar="lakefs://REPO/DEST_REF")
@json_option
def find_merge_base(source: str, destination: str) -> None:
    """The commit a merge of SOURCE into DESTINATION would start from (lakectl's find-merge-base)."""
    repo, source_ref, _ = parse_uri(source)
    dest = _same_repository(repo, destination, "source and destination")
    found = rest().get(f"/repositories/{segment(repo)}/refs/{segment(source_ref)}/merge/{segment(dest)}")
    output(
        found,
        lambda: click.echo(
            f"Source ref: {source_ref}\nDestination ref: {dest}\nMerge base: {found.get('base_commit_id', '')}"
        ),
    )
