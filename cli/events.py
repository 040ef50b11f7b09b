"""`silt events`: a branch's history events (reads, writes, deletes, commits, merges...), from
a time on, optionally following new ones as they happen: the REST API's event stream
(GET /repositories/{repository}/branches/{branch}/events, Server-Sent Events; Silt's own,
lakeFS has none and lakectl no such command)."""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import click

from cli.common import json_option, rest, state
from cli.rest import exit_of_status, segment
from silt.client_base import EXIT_UNAVAILABLE, EXIT_USAGE, ClientError, parse_uri

_DURATION = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, now: float | None = None) -> int:
    """Unix microseconds of --since: a duration ago (30s, 15m, 2h, 7d) or an ISO 8601 time
    (2026-11-23T16:00:00Z; without a zone, UTC)."""
    now = time.time() if now is None else now
    matched = _DURATION.fullmatch(text.strip())
    if matched:
        return max(0, int((now - int(matched.group(1)) * _UNIT_SECONDS[matched.group(2)]) * 1_000_000))
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ClientError(
            f"--since: expected a duration (30s, 15m, 2h, 7d) or a time, got {text!r}", EXIT_USAGE
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0, int(moment.timestamp() * 1_000_000))


def describe(event: dict[str, Any]) -> str:
    """One line for people: time, type, source, user, and what it was about."""
    stamp = int(event.get("timestamp_us") or 0)
    moment = datetime.fromtimestamp(stamp / 1_000_000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    subject = str(event.get("path") or "")
    commit_id, message = str(event.get("commit_id") or ""), event.get("message")
    if commit_id:
        subject = f"{commit_id[:12]} {message!r}" if message else commit_id[:12]
    size = f" ({event['size']} bytes)" if event.get("size") else ""
    return (
        f"{moment}  {event.get('type', ''):<14} {event.get('source', ''):<8} {event.get('user') or '-':<16}"
        f" {subject}{size}"
    )


def server_sent_events(lines: Iterable[bytes]) -> Iterator[tuple[str, str, str]]:
    """(id, event, data) of each event of a text/event-stream; comments (keepalives) skipped."""
    event_id, kind = "", ""
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield event_id, kind or "message", "\n".join(data)
            kind, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            event_id = value
        elif field == "event":
            kind = value
        elif field == "data":
            data.append(value)


def _watch(repository: str, branch: str, since_us: int, follow: bool) -> Iterator[dict[str, Any]]:
    """The branch's events from the REST API's stream; a followed stream the server ends (a
    restart) is opened again after the last event seen."""
    path = f"/repositories/{segment(repository)}/branches/{segment(branch)}/events"
    after = ""
    while True:
        headers = {"Last-Event-ID": after} if after else None
        answer = rest().stream(path, {"since": since_us, "follow": "true" if follow else "false"}, headers)
        try:
            for event_id, kind, data in server_sent_events(answer):
                if kind == "error":
                    failure = json.loads(data)
                    status = int(failure.get("status") or 500)
                    raise ClientError(str(failure.get("message") or f"HTTP {status}"), exit_of_status(status))
                if kind != "history":
                    continue
                after = event_id or after
                yield json.loads(data)
        except (OSError, http.client.HTTPException):
            if not follow:
                raise ClientError(f"the events stream of {repository}/{branch} broke off", EXIT_UNAVAILABLE) from None
        finally:
            answer.close()
        if not follow:
            return


@click.command("events")
@click.argument("uri", metavar="lakefs://REPO/BRANCH")
@click.option(
    "--since",
    default="1h",
    show_default=True,
    metavar="DURATION|TIME",
    help="From this long ago (30s, 15m, 2h, 7d) or this time (ISO 8601, UTC unless it says otherwise).",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they happen (Ctrl-C ends).")
@json_option
def events(uri: str, since: str, follow: bool) -> None:
    """A branch's history events: reads, writes and deletes through S3 and the REST API, and
    commits, merges, reverts, cherry-picks, resets, branch and tag changes. With --json, one
    JSON object per line."""
    repository, branch, path = parse_uri(uri)
    if path:
        raise ClientError("events are per branch: give lakefs://REPO/BRANCH", EXIT_USAGE)
    since_us = parse_since(since)
    as_json = state().json
    try:
        for event in _watch(repository, branch, since_us, follow):
            click.echo(json.dumps(event) if as_json else describe(event))
    except KeyboardInterrupt:
        return
