"""`silt branch` and `silt tag`: refs, and undoing with reset, revert and cherry-pick."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import click

from cli.commits import print_merge_result
from cli.common import as_dict, client, done, json_option, on_branch, output, table
from silt.client import EXIT_UNAVAILABLE, ClientError, paged, parse_uri
from silt.compactor.v1 import compactor_pb2 as capi
from silt.graveler.v1 import graveler_pb2 as api

_LIST_PAGE = 1000


def _repo_and_name(uri: str, what: str) -> tuple[str, str]:
    repo, name, path = parse_uri(uri)
    if path:
        raise ClientError(f"expected silt://<repository>/<{what}>, got {uri!r}", 2)
    return repo, name


def _ref_created(kind: str, name: str, info: Any) -> None:
    """Answer a created branch or tag: its record, or a line naming the commit it points at."""
    output(as_dict(info), lambda: click.echo(f"{kind} {name} created at {info.commit_id[:12]}"))


def _add_list_command(
    group: click.Group,
    column: str,
    items: str,
    key: Callable[[Any], str],
    rpc: Callable[[Any], Callable[[Any], Any]],
    request: Callable[..., Any],
) -> None:
    """Give group its `list` command: the records of the repository's branches or tags, or a table
    of name and commit. The two listings differ only in these arguments: rpc(graveler stub) is the
    call that answers one page of request(repository, after, amount), the refs under the field items,
    each named by key."""

    @group.command("list", help=f"The {items} of a repository.")
    @click.argument("uri", metavar="silt://REPO")
    @json_option
    def list_refs(uri: str) -> None:
        repo, _, _ = parse_uri(uri, need_ref=False)
        call = rpc(client().graveler)
        refs = list(paged(lambda after: call(request(repository=repo, after=after, amount=_LIST_PAGE)), items, key))
        output([as_dict(r) for r in refs], lambda: table([column, "commit"], [(key(r), r.commit_id) for r in refs]))


@click.group()
def branch() -> None:
    """Branches."""


@branch.command("create")
@click.argument("uri", metavar="silt://REPO/BRANCH")
@click.option("--source", "-s", required=True, help="Ref to branch from (branch, tag, commit, expression).")
@json_option
def branch_create(uri: str, source: str) -> None:
    """Create a branch pointing at SOURCE."""
    repo, name = _repo_and_name(uri, "branch")
    info = client().graveler.CreateBranch(api.CreateBranchRequest(repository=repo, name=name, source_ref=source))
    _ref_created("Branch", name, info)


_add_list_command(branch, "branch", "branches", attrgetter("name"), lambda g: g.ListBranches, api.ListBranchesRequest)


@branch.command("show")
@click.argument("uri", metavar="silt://REPO/BRANCH")
@json_option
def branch_show(uri: str) -> None:
    """A branch's head commit and its staging compaction state (docs/design/compaction.md)."""
    repo, name = _repo_and_name(uri, "branch")
    c = client()
    with on_branch(repo, name):
        info = c.graveler.GetBranch(api.GetBranchRequest(repository=repo, name=name))
    data: dict[str, object] = {"name": name, "commit_id": info.commit_id}
    try:
        status = c.compactor.GetStatus(capi.GetStatusRequest(repository=repo, branch=name))
    except ClientError as exc:
        if exc.exit_code != EXIT_UNAVAILABLE:
            raise
        data["compaction"] = None  # the compactor is not running: its state is unknown
    else:
        started = status.compaction_start_time.ToJsonString() if status.HasField("compaction_start_time") else None
        data["compaction"] = {
            "compacted_metarange_id": status.compacted_metarange_id or None,
            "last_started": started,
            "sealed_tokens": status.sealed_tokens,
            "running": status.running,
        }

    def human() -> None:
        click.echo(f"Branch:     {name}")
        click.echo(f"Commit:     {info.commit_id}")
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


@branch.command("compact")
@click.argument("uri", metavar="silt://REPO/BRANCH")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for the compaction.")
@json_option
def branch_compact(uri: str, timeout: float) -> None:
    """Fold the branch's staged changes into a compacted metarange now (no commit is made)."""
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


@branch.command("delete")
@click.argument("uri", metavar="silt://REPO/BRANCH")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def branch_delete(uri: str, yes: bool) -> None:
    """Delete a branch (its commits stay reachable from other refs)."""
    repo, name = _repo_and_name(uri, "branch")
    g = client().graveler
    with on_branch(repo, name):  # a missing branch fails here, before anyone is asked
        g.GetBranch(api.GetBranchRequest(repository=repo, name=name))
    if not yes:
        click.confirm(f"Delete branch {name} of {repo}, with its uncommitted changes?", abort=True)
    g.DeleteBranch(api.DeleteBranchRequest(repository=repo, name=name))
    done(f"Branch {name} deleted", repository=repo, branch=name)


@branch.command("reset")
@click.argument("uri", metavar="silt://REPO/BRANCH[/PATH]")
@click.option("--prefix", is_flag=True, help="Treat PATH as a prefix: drop every change under it.")
@click.option("--hard", "hard_ref", metavar="REF", help="Point the branch at REF, dropping uncommitted changes.")
@json_option
def branch_reset(uri: str, prefix: bool, hard_ref: str | None) -> None:
    """Drop uncommitted changes: all of them, one object's (PATH), or under a prefix."""
    repo, name, path = parse_uri(uri)
    req = api.ResetBranchRequest(repository=repo, branch=name)
    if hard_ref:
        req.hard_ref = hard_ref
    elif path and prefix:
        req.prefix = path
    elif path:
        req.key = path
    else:
        req.all = True
    with on_branch(repo, name):
        resp = client().graveler.ResetBranch(req)
    output(as_dict(resp.branch), lambda: click.echo(f"Branch {name} reset (at {resp.branch.commit_id[:12]})"))


@branch.command("revert")
@click.argument("uri", metavar="silt://REPO/BRANCH")
@click.argument("ref")
@click.option("--parent-number", "-m", type=int, default=0, help="For merge commits: the parent to keep (1-based).")
@click.option("--message", default="", help="Commit message (default: Revert <commit>).")
@json_option
def branch_revert(uri: str, ref: str, parent_number: int, message: str) -> None:
    """Undo the changes of commit REF on the branch, as a new commit."""
    repo, name = _repo_and_name(uri, "branch")
    with on_branch(repo, name):
        resp = client().graveler.Revert(
            api.RevertRequest(repository=repo, branch=name, ref=ref, parent_number=parent_number, message=message)
        )
    print_merge_result(resp, f"Reverted {ref} on {name}")


@branch.command("cherry-pick")
@click.argument("uri", metavar="silt://REPO/BRANCH")
@click.argument("ref")
@click.option("--parent-number", "-m", type=int, default=0, help="For merge commits: the parent to diff against.")
@json_option
def branch_cherry_pick(uri: str, ref: str, parent_number: int) -> None:
    """Apply the changes of commit REF to the branch, as a new commit."""
    repo, name = _repo_and_name(uri, "branch")
    with on_branch(repo, name):
        resp = client().graveler.CherryPick(
            api.CherryPickRequest(repository=repo, branch=name, ref=ref, parent_number=parent_number)
        )
    print_merge_result(resp, f"Cherry-picked {ref} onto {name}")


@click.group()
def tag() -> None:
    """Tags: immutable names for commits."""


@tag.command("create")
@click.argument("uri", metavar="silt://REPO/TAG")
@click.argument("ref")
@json_option
def tag_create(uri: str, ref: str) -> None:
    """Create tag TAG at REF."""
    repo, name = _repo_and_name(uri, "tag")
    info = client().graveler.CreateTag(api.CreateTagRequest(repository=repo, id=name, ref=ref))
    _ref_created("Tag", info.id, info)


_add_list_command(tag, "tag", "tags", attrgetter("id"), lambda g: g.ListTags, api.ListTagsRequest)


@tag.command("show")
@click.argument("uri", metavar="silt://REPO/TAG")
@json_option
def tag_show(uri: str) -> None:
    """The commit a tag points at."""
    repo, name = _repo_and_name(uri, "tag")
    info = client().graveler.GetTag(api.GetTagRequest(repository=repo, id=name))
    output(as_dict(info), lambda: click.echo(f"{info.id} {info.commit_id}"))


@tag.command("delete")
@click.argument("uri", metavar="silt://REPO/TAG")
@json_option
def tag_delete(uri: str) -> None:
    """Delete a tag."""
    repo, name = _repo_and_name(uri, "tag")
    client().graveler.DeleteTag(api.DeleteTagRequest(repository=repo, id=name))
    done(f"Tag {name} deleted", repository=repo, tag=name)
