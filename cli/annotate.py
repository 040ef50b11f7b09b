"""`silt annotate` (lakectl's annotate, git's blame for objects): each object under a path with
the last commit that changed it."""

from __future__ import annotations

import click

from cli.common import client, json_option, output, table, when
from silt.client_base import EXIT_USAGE, ClientError, parse_uri
from silt.graveler.v1 import graveler_pb2 as api

# Objects annotated at most per call: each costs a walk of the history, bounded by graveler.
MAX_OBJECTS = 10_000


def last_commit(repo: str, ref: str, key: str) -> api.CommitInfo | None:
    """The newest commit reachable from ref that changed key; None if none did (only staged)."""
    g = client().graveler
    after = ""
    while True:
        resp = g.Log(api.LogRequest(repository=repo, ref=ref, after=after, amount=1, objects=[key], limit=1))
        if resp.commits:
            commit: api.CommitInfo = resp.commits[0]
            return commit
        # A page may be empty while more history follows: graveler bounds each call's walk.
        if not resp.has_more:
            return None
        after = resp.next_after


@click.command()
@click.argument("uri", metavar="lakefs://REPO/REF[/PATH]")
@click.option("--recursive", "-r", is_flag=True, help="Every object under PATH, not only one level.")
@json_option
def annotate(uri: str, recursive: bool) -> None:
    """Each object under PATH with the last commit that changed it (lakectl's annotate)."""
    repo, ref, path = parse_uri(uri)
    c = client()
    items = []
    for item in c.entries(repo, ref, path, "" if recursive else "/"):
        if item.common_prefix:
            continue
        items.append(item.key)
        if len(items) > MAX_OBJECTS:
            raise ClientError(f"more than {MAX_OBJECTS} objects under {uri}: annotate a narrower path", EXIT_USAGE)
    rows = [(key, last_commit(repo, ref, key)) for key in items]
    data = [
        {
            "path": key,
            "commit_id": commit.id if commit else "",
            "committer": commit.committer if commit else "",
            "creation_date": when(commit.creation_date) if commit else "",
            "message": commit.message if commit else "",
        }
        for key, commit in rows
    ]

    def human() -> None:
        table(
            ["path", "commit", "committer", "date", "message"],
            [
                (d["path"], d["commit_id"][:12] or "(uncommitted)", d["committer"], d["creation_date"], d["message"])
                for d in data
            ],
        )

    output(data, human)
