"""`silt commit`, `log`, `diff`, `merge` and `show`: recording, reading and combining commits."""

from __future__ import annotations

import json

import click

from cli.common import as_dict, client, json_option, meta_pairs, on_branch, output, state, table, when
from silt.client import EXIT_CONFLICT, EXIT_USAGE, ClientError, is_uri, paged, parse_uri
from silt.graveler.v1 import graveler_pb2 as api

_DIFF_SIGN = {
    api.DIFF_TYPE_ADDED: ("+", "added"),
    api.DIFF_TYPE_REMOVED: ("-", "removed"),
    api.DIFF_TYPE_CHANGED: ("~", "changed"),
    api.DIFF_TYPE_PREFIX_CHANGED: ("~", "prefix changed"),
}
_STRATEGIES = {
    "fail": api.MERGE_STRATEGY_FAIL,
    "source-wins": api.MERGE_STRATEGY_SOURCE_WINS,
    "dest-wins": api.MERGE_STRATEGY_DEST_WINS,
}


def print_merge_result(resp: api.MergeResponse, done: str) -> None:
    """A commit, or the conflicts that stopped the operation (then exit code 5)."""
    if resp.conflicts:
        conflicts = [c.key for c in resp.conflicts]
        if state().json:
            click.echo(json.dumps({"conflicts": conflicts, "truncated": resp.conflicts_truncated}, indent=2))
        else:
            for key in conflicts:
                click.echo(f"conflict: {key}")
        more = " (the first ones; there may be more)" if resp.conflicts_truncated else ""
        raise ClientError(
            f"{len(conflicts)} conflict(s){more}, nothing changed; resolve with --strategy source-wins or dest-wins",
            EXIT_CONFLICT,
        )
    output(as_dict(resp.commit), lambda: click.echo(f"{done}: commit {resp.commit.id}"))


@click.command("commit")
@click.argument("uri", metavar="silt://REPO/BRANCH[/PREFIX]")
@click.option("--message", "-m", required=True, help="Commit message.")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="Commit metadata; repeatable.")
@click.option("--allow-empty", is_flag=True, help="Commit even when nothing changed.")
@json_option
def commit(uri: str, message: str, meta: tuple[str, ...], allow_empty: bool) -> None:
    """Commit a branch's uncommitted changes (only those under PREFIX when given)."""
    repo, branch, prefix = parse_uri(uri)
    with on_branch(repo, branch):
        info = client().graveler.Commit(
            api.CommitRequest(
                repository=repo,
                branch=branch,
                message=message,
                metadata=meta_pairs(meta),
                allow_empty=allow_empty,
                prefixes=[prefix] if prefix else [],
            )
        )
    # lakectl names the branch by its URI first.
    output(as_dict(info), lambda: click.echo(f"Branch: lakefs://{repo}/{branch}\nCommit {info.id} on {branch}"))


@click.command("log")
@click.argument("uri", metavar="silt://REPO/REF[/PATH]")
@click.option("--limit", "-n", type=int, default=0, help="At most this many commits (0: all).")
@click.option("--first-parent", is_flag=True, help="Follow first parents only.")
@click.option("--oneline", is_flag=True, help="One line per commit.")
@json_option
def log(uri: str, limit: int, first_parent: bool, oneline: bool) -> None:
    """History of a ref, newest first (only commits that touched PATH, a key or prefix, when given)."""
    repo, ref, path = parse_uri(uri)
    g = client().graveler
    commits: list[api.CommitInfo] = []
    after = ""
    while True:
        resp = g.Log(
            api.LogRequest(
                repository=repo,
                ref=ref,
                after=after,
                amount=1000,
                prefixes=[path] if path else [],
                first_parent=first_parent,
                limit=limit,
            )
        )
        commits += resp.commits
        # A page may be short or empty while more history follows: graveler bounds each call.
        if not resp.has_more or (limit and len(commits) >= limit):
            break
        after = resp.next_after
    if limit:
        commits = commits[:limit]

    def human() -> None:
        if oneline:
            for c in commits:
                click.echo(f"{c.id[:12]} {c.message}")
            return
        for c in commits:
            click.echo(f"commit {c.id}")
            if len(c.parents) > 1:
                click.echo("merge:  " + " ".join(p[:12] for p in c.parents))
            click.echo(f"author: {c.committer}")
            click.echo(f"date:   {when(c.creation_date)}")
            for key, value in sorted(c.metadata.items()):
                click.echo(f"meta:   {key}={value}")
            click.echo(f"\n    {c.message}\n")

    output([as_dict(c) for c in commits], human)


@click.command("diff")
@click.argument("left", metavar="silt://REPO/REF[/PREFIX]")
@click.argument("right", required=False, metavar="[silt://REPO/REF | REF]")
@click.option("--three-dot", is_flag=True, help="Compare RIGHT with the merge base of LEFT and RIGHT.")
@click.option("--delimiter", default="", help='"/" to summarise changes per directory.')
@json_option
def diff(left: str, right: str | None, three_dot: bool, delimiter: str) -> None:
    """Differences between two refs, or a branch's uncommitted changes when only LEFT is given."""
    repo, left_ref, prefix = parse_uri(left)
    g = client().graveler
    if right is not None:
        right_ref = right
        if is_uri(right):
            right_repo, right_ref, _ = parse_uri(right)
            if right_repo != repo:
                raise ClientError("both sides of a diff must be in the same repository", EXIT_USAGE)

        def fetch(after: str) -> api.DiffResponse:
            return g.Diff(
                api.DiffRequest(
                    repository=repo,
                    left_ref=left_ref,
                    right_ref=right_ref,
                    three_dot=three_dot,
                    prefix=prefix,
                    delimiter=delimiter,
                    after=after,
                    amount=1000,
                )
            )
    else:

        def fetch(after: str) -> api.DiffResponse:
            return g.DiffBranch(
                api.DiffBranchRequest(
                    repository=repo, branch=left_ref, prefix=prefix, delimiter=delimiter, after=after, amount=1000
                )
            )

    items: list[api.DiffItem] = list(paged(fetch, "items", lambda item: item.key))

    def human() -> None:
        if not items:
            click.echo("No differences")
        for item in items:
            sign, _ = _DIFF_SIGN.get(item.type, ("?", "?"))
            click.echo(f"{sign} {item.key}")

    output(
        [{"key": i.key, "type": _DIFF_SIGN.get(i.type, ("?", "unknown"))[1]} for i in items],
        human,
    )


@click.command("merge")
@click.argument("source", metavar="silt://REPO/SOURCE_REF")
@click.argument("destination", metavar="silt://REPO/DEST_BRANCH | DEST_BRANCH")
@click.option(
    "--strategy",
    type=click.Choice(sorted(_STRATEGIES)),
    default="fail",
    show_default=True,
    help="How to resolve conflicting changes.",
)
@click.option("--path-strategy", multiple=True, metavar="GLOB=STRATEGY", help="Per-path strategy; first match wins.")
@click.option("--squash", is_flag=True, help="One parent: the destination.")
@click.option("--message", "-m", default="", help="Commit message.")
@click.option("--allow-empty", is_flag=True, help="Create a commit even when nothing changes.")
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
    dest = destination
    if is_uri(destination):
        dest_repo, dest, _ = parse_uri(destination)
        if dest_repo != repo:
            raise ClientError("source and destination must be in the same repository", EXIT_USAGE)
    per_path = []
    for item in path_strategy:
        pattern, sep, name = item.rpartition("=")
        if not sep or name not in _STRATEGIES:
            raise ClientError(f"expected --path-strategy GLOB={'|'.join(sorted(_STRATEGIES))}, got {item!r}", 2)
        per_path.append(api.PathStrategy(pattern=pattern, strategy=_STRATEGIES[name]))
    resp = client().graveler.Merge(
        api.MergeRequest(
            repository=repo,
            source_ref=source_ref,
            destination_branch=dest,
            strategy=_STRATEGIES[strategy],
            path_strategies=per_path,
            squash=squash,
            message=message,
            allow_empty=allow_empty,
        )
    )
    print_merge_result(resp, f"Merged {source_ref} into {dest}")


@click.command("show")
@click.argument("uri", metavar="silt://REPO/REF")
@json_option
def show_commit(uri: str) -> None:
    """The commit a ref resolves to."""
    repo, ref, _ = parse_uri(uri)
    g = client().graveler
    resolved = g.ResolveRef(api.ResolveRefRequest(repository=repo, ref=ref))
    info = g.GetCommit(api.GetCommitRequest(repository=repo, commit_id=resolved.commit_id))

    def human() -> None:
        table(
            ["field", "value"],
            [
                ("id", info.id),
                ("message", info.message),
                ("committer", info.committer),
                ("date", when(info.creation_date)),
                ("parents", " ".join(info.parents)),
                # metadata, e.g. silt.requested-committer: a name the caller asked for, not the author
                *((f"meta {k}", v) for k, v in sorted(info.metadata.items())),
            ],
        )

    output(as_dict(info), human)
