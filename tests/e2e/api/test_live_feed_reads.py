"""Reads in the history feeds: a reader who is no administrator sees its own reads and every
other kind of event, never another user's reads, in the REST API's live feed and in graveler's
ListEvents and WatchEvents; an administrator sees every read (silt/history_events/visibility.py)."""

from __future__ import annotations

import json
from typing import Any

import urllib3

from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2_grpc
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.api.conftest import Api
from tests.support.wait import wait_until


def _headers(creds: Credentials) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")


def _feed(api: Api, repo: str, creds: Credentials) -> list[dict[str, Any]]:
    """The stored events of main, as the live feed sends them to `creds`' user."""
    response = api.request("GET", f"/repositories/{repo}/branches/main/events?follow=false", headers=_headers(creds))
    assert response.status == 200, response.data
    text = response.data.decode()
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


def _reads(events: list[dict[str, Any]]) -> set[str]:
    return {event["user"] for event in events if event["type"] == "read"}


def test_a_reader_sees_no_reads_of_others_and_an_admin_sees_them_all(api: Api, repo: str) -> None:
    admin, reader = api.stack.admin, api.stack.reader
    uploaded = api.request(
        "POST",
        f"/repositories/{repo}/branches/main/objects?path=a.txt",
        body=b"hello",
        headers={**_headers(admin), "Content-Type": "text/plain"},
    )
    assert uploaded.status == 201, uploaded.data
    for creds in (admin, reader):
        got = api.request("GET", f"/repositories/{repo}/refs/main/objects?path=a.txt", headers=_headers(creds))
        assert got.status == 200, got.data

    # Events are flushed to graveler every 200 ms: wait until the admin's feed holds both reads.
    seen = wait_until(lambda: (lambda e: e if len(_reads(e)) == 2 else None)(_feed(api, repo, admin)), 15, "both reads")
    readers = _reads(seen)
    assert "reader" in readers
    admin_id = next(user for user in readers if user != "reader")

    mine = _feed(api, repo, reader)
    assert _reads(mine) == {"reader"}, mine
    assert any(event["type"] == "write" for event in mine)  # other kinds of events stay

    # graveler's own calls, signed as the reader and as the admin.
    for creds, expected in ((reader, {"reader"}), (admin, {"reader", admin_id})):
        channel = signed_channel(api.stack.stack.endpoints["graveler"], creds)
        try:
            graveler = graveler_pb2_grpc.GravelerServiceStub(channel)
            page = graveler.ListEvents(ev.ListEventsRequest(repository=repo, branch="main"), timeout=10)
            assert {e.user for e in page.events if e.type == ev.READ} == expected
            watched = graveler.WatchEvents(ev.WatchEventsRequest(repository=repo, branch="main"), timeout=10)
            assert {e.user for e in watched if e.type == ev.READ} == expected
        finally:
            channel.close()
