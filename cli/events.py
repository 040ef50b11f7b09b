"""`silt events`: a branch's history events (reads, writes, deletes, commits, merges...), from
a time on, optionally following new ones as they happen."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import click
import grpc

from cli.common import client, json_option, state
from silt.client import error_of_rpc
from silt.client_base import EXIT_USAGE, ClientError, parse_uri
from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.codec import source_name, to_json, type_name

_DURATION = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# One WatchEvents call lasts at most this long; --follow then continues after the last id.
WATCH_CALL_SECONDS = 300.0


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


def describe(event: ev.HistoryEvent) -> str:
    """One line for people: time, type, source, user, and what it was about."""
    moment = datetime.fromtimestamp(event.timestamp_us / 1_000_000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    subject = event.path
    if event.commit_id:
        subject = f"{event.commit_id[:12]} {event.message!r}" if event.message else event.commit_id[:12]
    size = f" ({event.size} bytes)" if event.size else ""
    return (
        f"{moment}  {type_name(event.type):<14} {source_name(event.source):<8} {event.user or '-':<16} {subject}{size}"
    )


def _watch(repository: str, branch: str, since_us: int, follow: bool) -> Iterator[ev.HistoryEvent]:
    graveler = client().graveler
    target = client().settings.graveler
    after = ""
    while True:
        request = ev.WatchEventsRequest(
            repository=repository, branch=branch, since_us=since_us, after=after, follow=follow
        )
        try:
            for event in graveler.WatchEvents(request, timeout=WATCH_CALL_SECONDS):
                after = event.id
                yield event
        except grpc.RpcError as exc:
            if not (follow and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED):
                raise error_of_rpc(exc, "graveler", target) from None
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
    repository, branch, rest = parse_uri(uri)
    if rest:
        raise ClientError("events are per branch: give lakefs://REPO/BRANCH", EXIT_USAGE)
    since_us = parse_since(since)
    as_json = state().json
    try:
        for event in _watch(repository, branch, since_us, follow):
            click.echo(json.dumps(to_json(event)) if as_json else describe(event))
    except KeyboardInterrupt:
        return
