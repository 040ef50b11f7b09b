"""`silt branch` and `silt tag`: refs, and undoing with reset, revert and cherry-pick, over the
REST API. A branch's compaction (`branch show`'s state, `branch compact`) is the compactor's, an
operator's gRPC service with no REST form."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cli import records
from cli.commits import print_commit
from cli.common import confirm, done, json_option, on_branch, output, rest, table
from cli.rest import ApiError, segment
from silt.client_base import EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, ClientError, is_uri, parse_uri

# Seconds `branch show` waits for the compactor's state: an internal port a laptop may not reach.
_COMPACTOR_STATUS_TIMEOUT = 3.0


def _repo_and_name(uri: str, what: str) -> tuple[str, str]:
    repo, name, path = parse_uri(uri)
    if path:
        raise ClientError(f"expected lakefs://<repository>/<{what}>, got {uri!r}", EXIT_USAGE)
    return repo, name


def ref_argument(repo: str, ref: str, what: str) -> str:
    """A ref given by name (main, a commit ID, main~1) or, as lakectl gives it, by URI in the
    same repository (lakefs://repo/main)."""
    if not is_uri(ref):
        return ref
    other, name, path = parse_uri(ref)
    if other != repo:
        raise ClientError(f"{what} {ref!r} is in repository {other}, not {repo}", EXIT_USAGE)
    if path:
        raise ClientError(f"expected lakefs://<repository>/<ref> as {what}, got {ref!r}", EXIT_USAGE)
    return name


def _branch_path(repo: str, name: str) -> str:
    return f"/repositories/{segment(repo)}/branches/{segment(name)}"


def _add_list_command(group: click.Group, column: str, items: str, record: Callable[[Any], dict[str, Any]]) -> None:
    """Give group its `list` command: the records of the repository's branches or tags, or a table
    of name and commit."""

    @group.command("list", help=f"The {items} of a repository.")
    @click.argument("uri", metavar="lakefs://REPO")
    @json_option
    def list_refs(uri: str) -> None:
        repo, _, _ = parse_uri(uri, need_ref=False)
        refs = list(rest().pages(f"/repositories/{segment(repo)}/{items}", what=f"list {items} of {repo}"))
        output([record(r) for r in refs], lambda: table([column, "commit"], [(r["id"], r["commit_id"]) for r in refs]))


@click.group()
def branch() -> None:
    """Branches."""


@branch.command("create")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option(
    "--source", "-s", required=True, help="Ref to branch from: a branch, tag, commit or expression, or its URI."
)
@json_option
def branch_create(uri: str, source: str) -> None:
    """Create a branch pointing at SOURCE."""
    repo, name = _repo_and_name(uri, "branch")
    body = {"name": name, "source": ref_argument(repo, source, "--source")}
    rest().post(f"/repositories/{segment(repo)}/branches", body, what=f"create branch {name}")
    info = rest().get(_branch_path(repo, name))
    output(records.branch(info), lambda: click.echo(f"Branch {name} created at {info['commit_id'][:12]}"))


_add_list_command(branch, "branch", "branches", records.branch)


@branch.command("show")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@json_option
def branch_show(uri: str) -> None:
    """A branch's head commit, and its staging compaction state when the compactor (an internal
    gRPC service) is reachable (docs/design/compaction.md)."""
    repo, name = _repo_and_name(uri, "branch")
    with on_branch(repo, name):
        info = rest().get(_branch_path(repo, name))
    data: dict[str, object] = {"name": name, "commit_id": info["commit_id"], "compaction": _compaction(repo, name)}

    def human() -> None:
        click.echo(f"Branch:     {name}")
        click.echo(f"Commit:     {info['commit_id']}")
        state = data["compaction"]
        if not isinstance(state, dict):
            click.echo("Compaction: unknown (compactor unavailable)")
            return
        compacted = state["compacted_metarange_id"]
        click.echo(f"Compacted:  {compacted if compacted else 'no (reads go to the head commit)'}")
        click.echo(f"Last claim: {state['last_started'] or 'never'}")
        click.echo(f"Sealed:     {state['sealed_tokens']} staging tokens")
        click.echo(f"Running:    {'yes' if state['running'] else 'no'}")

    output(data, human)


def _compaction(repo: str, name: str) -> dict[str, object] | None:
    """The compactor's state of the branch; None when it cannot be asked (not running, not
    reachable from here, or no gRPC credentials)."""
    from cli.common import client
    from silt.compactor.v1 import compactor_pb2 as capi

    try:
        status = client().compactor.GetStatus(
            capi.GetStatusRequest(repository=repo, branch=name), timeout=_COMPACTOR_STATUS_TIMEOUT
        )
    except ClientError as exc:
        if exc.exit_code not in (EXIT_UNAVAILABLE, EXIT_USAGE):  # a deadline passed is Unavailable too
            raise
        return None
    started = status.compaction_start_time.ToJsonString() if status.HasField("compaction_start_time") else None
    return {
        "compacted_metarange_id": status.compacted_metarange_id or None,
        "last_started": started,
        "sealed_tokens": status.sealed_tokens,
        "running": status.running,
    }


@branch.command("compact")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for the compaction.")
@json_option
def branch_compact(uri: str, timeout: float) -> None:
    """Fold the branch's staged changes into a compacted metarange now (no commit is made).

    An operator command: it calls the compactor's gRPC service, which has no REST form."""
    from cli.common import as_dict, client
    from silt.compactor.v1 import compactor_pb2 as capi

    repo, name = _repo_and_name(uri, "branch")
    with on_branch(repo, name):
        resp = client().compactor.Compact(capi.CompactRequest(repository=repo, branch=name), timeout=timeout)
    output(
        as_dict(resp),
        lambda: click.echo(
            f"Branch {name} compacted: {resp.tokens_compacted} staging tokens folded, "
            f"{resp.records_changed} records changed, in {resp.seconds:.2f}s"
        ),
    )


yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (lakectl's -y).")


@branch.command("delete")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@yes_option
@json_option
def branch_delete(uri: str, yes: bool) -> None:
    """Delete a branch (its commits stay reachable from other refs)."""
    repo, name = _repo_and_name(uri, "branch")
    with on_branch(repo, name):  # a missing branch fails here, before anyone is asked
        rest().get(_branch_path(repo, name))
    confirm(f"Delete branch {name} of {repo}, with its uncommitted changes?", yes)
    rest().delete(_branch_path(repo, name))
    done(f"Branch {name} deleted", repository=repo, branch=name)


@branch.command("reset")
@click.argument("uri", metavar="lakefs://REPO/BRANCH[/PATH]")
@click.option(
    "--prefix",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[PREFIX]",
    help="Drop every change under PREFIX (lakectl's --prefix p), or under the URI's PATH when given alone.",
)
@click.option("--object", "object_path", metavar="PATH", help="Drop one object's change (lakectl's --object).")
@click.option("--hard", "hard_ref", metavar="REF", help="Point the branch at REF, dropping uncommitted changes.")
@yes_option
@json_option
def branch_reset(uri: str, prefix: str | None, object_path: str | None, hard_ref: str | None, yes: bool) -> None:
    """Drop uncommitted changes: all of them, one object's (PATH), or under a prefix."""
    repo, name, path = parse_uri(uri)
    if prefix is not None:
        body, scope = {"type": "common_prefix", "path": prefix or path}, f" under {prefix or path}"
        if not body["path"]:
            raise ClientError("--prefix needs a prefix: --prefix P, or the URI's path", EXIT_USAGE)
    elif object_path or path:
        body, scope = {"type": "object", "path": object_path or path}, f" to {object_path or path}"
    else:
        body, scope = {"type": "reset"}, ""
    api = rest()
    with on_branch(repo, name):  # a missing branch fails here, before anyone is asked
        api.get(_branch_path(repo, name))
    if hard_ref:
        confirm(f"Point branch {name} of {repo} at {hard_ref}, dropping its uncommitted changes?", yes)
        with on_branch(repo, name):
            api.put(_branch_path(repo, name) + "/hard_reset", params={"ref": ref_argument(repo, hard_ref, "--hard")})
    else:
        confirm(f"Drop the uncommitted changes{scope} of branch {name} of {repo}?", yes)
        with on_branch(repo, name):
            api.put(_branch_path(repo, name), body)
    info = api.get(_branch_path(repo, name))
    output(records.branch(info), lambda: click.echo(f"Branch {name} reset (at {info['commit_id'][:12]})"))


@branch.command("revert")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.argument("refs", nargs=-1, required=True, metavar="REF...")
@click.option("--parent-number", "-m", type=int, default=0, help="For merge commits: the parent to keep (1-based).")
@click.option("--message", default="", help="Commit message (default: Revert <commit>).")
@click.option("--allow-empty", is_flag=True, help="Commit even when the revert changes nothing.")
@yes_option
@json_option
def branch_revert(
    uri: str, refs: tuple[str, ...], parent_number: int, message: str, allow_empty: bool, yes: bool
) -> None:
    """Undo the changes of commits REF... on the branch, each as a new commit."""
    repo, name = _repo_and_name(uri, "branch")
    api = rest()
    with on_branch(repo, name):
        api.get(_branch_path(repo, name))
    confirm(f"Revert the effect of {', '.join(refs)} on branch {name} of {repo}?", yes)
    for ref in refs:
        body: dict[str, Any] = {"ref": ref_argument(repo, ref, "REF"), "parent_number": parent_number}
        if message:
            body["commit_overrides"] = {"message": message}
        if allow_empty:
            body["allow_empty"] = True
        with on_branch(repo, name):
            api.post(_branch_path(repo, name) + "/revert", body)
    head = api.get(_branch_path(repo, name))["commit_id"]
    print_commit(
        api.get(f"/repositories/{segment(repo)}/commits/{segment(head)}"), f"Reverted {', '.join(refs)} on {name}"
    )


@branch.command("cherry-pick")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.argument("ref")
@click.option("--parent-number", "-m", type=int, default=0, help="For merge commits: the parent to diff against.")
@json_option
def branch_cherry_pick(uri: str, ref: str, parent_number: int) -> None:
    """Apply the changes of commit REF to the branch, as a new commit."""
    repo, name = _repo_and_name(uri, "branch")
    body: dict[str, Any] = {"ref": ref_argument(repo, ref, "REF")}
    if parent_number:
        body["parent_number"] = parent_number
    with on_branch(repo, name):
        info = rest().post(_branch_path(repo, name) + "/cherry-pick", body)
    print_commit(info, f"Cherry-picked {ref} onto {name}")


@click.group()
def tag() -> None:
    """Tags: immutable names for commits."""


@tag.command("create")
@click.argument("uri", metavar="lakefs://REPO/TAG")
@click.argument("ref", metavar="REF | lakefs://REPO/REF")
@click.option("--force", "-f", is_flag=True, help="Replace the tag if it exists (lakectl's --force).")
@json_option
def tag_create(uri: str, ref: str, force: bool) -> None:
    """Create tag TAG at REF."""
    repo, name = _repo_and_name(uri, "tag")
    body: dict[str, Any] = {"id": name, "ref": ref_argument(repo, ref, "REF")}
    if force:  # as lakectl's: the old tag deleted first (the API's own `force` is for read-only repositories)
        try:
            rest().delete(f"/repositories/{segment(repo)}/tags/{segment(name)}")
        except ApiError as exc:
            if exc.exit_code != EXIT_NOT_FOUND:
                raise
    info = rest().post(f"/repositories/{segment(repo)}/tags", body, what=f"create tag {name}")
    output(records.tag(info), lambda: click.echo(f"Tag {info['id']} created at {info['commit_id'][:12]}"))


_add_list_command(tag, "tag", "tags", records.tag)


@tag.command("show")
@click.argument("uri", metavar="lakefs://REPO/TAG")
@json_option
def tag_show(uri: str) -> None:
    """The commit a tag points at."""
    repo, name = _repo_and_name(uri, "tag")
    info = rest().get(f"/repositories/{segment(repo)}/tags/{segment(name)}")
    output(records.tag(info), lambda: click.echo(f"{info['id']} {info['commit_id']}"))


@tag.command("delete")
@click.argument("uri", metavar="lakefs://REPO/TAG")
@yes_option
@json_option
def tag_delete(uri: str, yes: bool) -> None:
    """Delete a tag."""
    repo, name = _repo_and_name(uri, "tag")
    path = f"/repositories/{segment(repo)}/tags/{segment(name)}"
    rest().get(path)  # a missing tag fails here, before anyone is asked
    confirm(f"Delete tag {name} of {repo}?", yes)
    rest().delete(path)
    done(f"Tag {name} deleted", repository=repo, tag=name)
