"""`silt annotate` (lakectl's annotate, git's blame for objects): each object under a path with
the last commit that changed it, over the REST API (a listing, then a log per object)."""

from __future__ import annotations

from typing import Any

import click

from cli.common import json_option, output, rest, table, when
from cli.rest import segment
from silt.client_base import EXIT_USAGE, ClientError, parse_uri

# Objects annotated at most per call: each costs a walk of the history, bounded by graveler.
MAX_OBJECTS = 10_000


def last_commit(repo: str, ref: str, key: str, first_parent: bool = False) -> dict[str, Any] | None:
    """The newest commit reachable from ref that changed key; None if none did (only staged)."""
    path = f"/repositories/{segment(repo)}/refs/{segment(ref)}/commits"
    after = ""
    while True:
        params = {"objects": [key], "amount": 1, "after": after, "first_parent": "true" if first_parent else None}
        answer = rest().get(path, params)
        if answer.get("results"):
            found: dict[str, Any] = answer["results"][0]
            return found
        # A page may be empty while more history follows: graveler bounds each call's walk.
        pagination = answer.get("pagination") or {}
        if not pagination.get("has_more") or not pagination.get("next_offset"):
            return None
        after = pagination["next_offset"]


@click.command()
@click.argument("uri", metavar="lakefs://REPO/REF[/PATH]")
@click.option("--recursive", "-r", is_flag=True, help="Every object under PATH, not only one level.")
@click.option("--first-parent", is_flag=True, help="Follow only the first parent of merge commits (lakectl's).")
@json_option
def annotate(uri: str, recursive: bool, first_parent: bool) -> None:
    """Each object under PATH with the last commit that changed it (lakectl's annotate)."""
    from cli.fs import objects

    repo, ref, path = parse_uri(uri)
    items = []
    for item in objects(repo, ref, path, "" if recursive else "/"):
        if item.get("path_type") == "common_prefix":
            continue
        items.append(item["path"])
        if len(items) > MAX_OBJECTS:
            raise ClientError(f"more than {MAX_OBJECTS} objects under {uri}: annotate a narrower path", EXIT_USAGE)
    rows = [(key, last_commit(repo, ref, key, first_parent)) for key in items]
    data = [
        {
            "path": key,
            "commit_id": commit["id"] if commit else "",
            "committer": commit.get("committer", "") if commit else "",
            "creation_date": when(commit.get("creation_date")) if commit else "",
            "message": commit.get("message", "") if commit else "",
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
