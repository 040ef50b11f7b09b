"""A Lua hook's `lakefs` reads narrowed to what the user who fired the event may read
(engine/actions/read_access.py, visible_pages.py): ScopedCalls over a real in-memory engine,
with auth's answers given as key scopes."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.actions import visible_pages
from engine.actions.read_access import NO_USER, ReadAccess
from engine.actions.reads import ScopedCalls
from engine.core.deadline import NO_DEADLINE
from engine.core.hooks import EventUser
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT, WRITE_REPO
from silt.key_scope import KeyScope
from silt.kv.mem import MemStore

REPO = "weather"
RAW_ONLY = KeyScope(REPO, every_key=False, allow=(f"{REPO}/raw/*",))
NO_GOLD = KeyScope(REPO, every_key=True, deny=(f"{REPO}/gold/*",))
EVERY_KEY = KeyScope(REPO, every_key=True)


@dataclass
class Authority:
    """Auth's answers: one read scope a user; WriteRepo for the users named."""

    scopes: dict[str, KeyScope]
    writers: tuple[str, ...] = ()
    asked: list[tuple[str, str, str]] = field(default_factory=list)

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        assert action == READ_OBJECT and repository == REPO and branch == ""
        self.asked.append((user_id, action, source_ip))
        return self.scopes.get(user_id, KeyScope(repository, every_key=False))

    def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        return action == WRITE_REPO and resource == REPO and user_id in self.writers


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graveler]:
    g = open_graveler(MemStore(), LocalAdapter(tmp_path_factory.mktemp("data")))
    g.lifecycle.create_repository(REPO, f"local://{REPO}", "main", False)
    for key in ("raw/a", "raw/sub/c", "gold/b", "top"):
        _put(g, "main", key, key.encode())
    g.commit(REPO, "main", "base")
    g.create_tag(REPO, "base", "main")
    for key in ("raw/new", "gold/new"):
        _put(g, "main", key, b"n")
    g.commit(REPO, "main", "second")
    for key in ("raw/staged", "gold/staged"):
        _put(g, "main", key, b"s")
    yield g
    g.close()


def _put(g: Graveler, branch: str, key: str, data: bytes) -> None:
    namespace = g.refs.repository(REPO).namespace
    address = f"data/{key.replace('/', '_')}-{time.monotonic_ns()}"
    g.committed.adapter.put(namespace, address, io.BytesIO(data), len(data))
    g.stage_entry(REPO, branch, key, pb.Entry(physical_address=address, size=len(data), etag=address))


def _calls(g: Graveler, authority: Authority | None, user: EventUser | None) -> ScopedCalls:
    def create_tag(tag: str, ref: str) -> None:
        g.create_tag(REPO, tag, ref)

    return ScopedCalls(
        g.actions.reads,
        g.refs.repository(REPO),
        NO_DEADLINE,
        create_tag,
        ReadAccess(authority, user, REPO),
    )


def _paths(answer: tuple[int, Any]) -> list[str]:
    status, body = answer
    assert status == 200, body
    return [row["path"] for row in body["results"]]


def _message(answer: tuple[int, Any]) -> tuple[int, str]:
    status, body = answer
    if isinstance(body, bytes):
        body = json.loads(body)
    return status, str(body["message"])


def test_a_user_allowed_raw_only_reads_and_lists_raw_only(engine: Graveler) -> None:
    calls = _calls(engine, Authority({"u": RAW_ONLY}), EventUser("u", "10.0.0.7"))
    assert calls.get_object(REPO, "main", "raw/a") == (200, b"raw/a")
    assert calls.stat_object(REPO, "main", "raw/a")[0] == 200
    # A refused key is the REST API's 403, whether it exists or not: no existence oracle.
    assert _message(calls.get_object(REPO, "main", "gold/b")) == (403, f"user u may not ReadObject on {REPO}/gold/b")
    assert _message(calls.get_object(REPO, "main", "gold/missing"))[0] == 403
    assert _message(calls.stat_object(REPO, "main", "gold/b"))[0] == 403
    assert _paths(calls.list_objects(REPO, "main", "", "", "")) == ["raw/a", "raw/new", "raw/staged", "raw/sub/c"]
    # Common prefixes: only where a readable key may lie below.
    assert _paths(calls.list_objects(REPO, "main", "", "", "/")) == ["raw/"]
    # Paged: next_offset names only what was shown.
    status, first = calls.list_objects(REPO, "main", "", "", "", 2)
    assert status == 200 and first["pagination"]["has_more"] and first["pagination"]["next_offset"] == "raw/new"
    # A diff needs ReadRepo, as the REST API's diff routes do.
    assert _message(calls.diff_refs(REPO, "base", "main")) == (403, f"user u may not ReadRepo on {REPO}")
    assert _message(calls.diff_branch(REPO, "main", "", 100, "", ""))[0] == 403


def test_a_deny_leaves_its_keys_out_of_listings_and_diffs(engine: Graveler) -> None:
    authority = Authority({"v": NO_GOLD})
    calls = _calls(engine, authority, EventUser("v", "10.0.0.8"))
    assert _paths(calls.list_objects(REPO, "main", "", "", "/")) == ["raw/", "top"]
    assert _paths(calls.diff_refs(REPO, "base", "main")) == ["raw/new"]
    assert _paths(calls.diff_branch(REPO, "main", "", 100, "", "")) == ["raw/staged"]
    assert _message(calls.get_object(REPO, "base", "gold/b"))[0] == 403
    # Auth is asked once a run, for the user from their address.
    assert authority.asked == [("v", READ_OBJECT, "10.0.0.8")]


def test_a_user_holding_every_key_reads_everything(engine: Graveler) -> None:
    calls = _calls(engine, Authority({"admin": EVERY_KEY}), EventUser("admin"))
    assert calls.get_object(REPO, "main", "gold/b") == (200, b"gold/b")
    assert "gold/b" in _paths(calls.list_objects(REPO, "main", "", "", ""))
    assert _paths(calls.diff_refs(REPO, "base", "main")) == ["gold/new", "raw/new"]
    assert _paths(calls.diff_branch(REPO, "main", "", 100, "", "")) == ["gold/staged", "raw/staged"]


def test_a_hook_of_an_event_with_no_user_reads_nothing(engine: Graveler) -> None:
    for user in (None, EventUser("")):
        calls = _calls(engine, Authority({"": EVERY_KEY}), user)
        for answer in (
            calls.get_object(REPO, "main", "raw/a"),
            calls.stat_object(REPO, "main", "raw/a"),
            calls.list_objects(REPO, "main", "", "", ""),
            calls.diff_refs(REPO, "base", "main"),
            calls.create_tag(REPO, "main", "t"),
        ):
            assert _message(answer) == (403, NO_USER)


def test_without_auth_every_key_is_read(engine: Graveler) -> None:
    calls = _calls(engine, None, None)
    assert calls.get_object(REPO, "main", "gold/b") == (200, b"gold/b")
    assert calls.create_tag(REPO, "main", "free")[0] == 201


def test_a_hook_tags_only_as_a_writer_of_the_repository(engine: Graveler) -> None:
    authority = Authority({"u": RAW_ONLY, "w": EVERY_KEY}, writers=("w",))
    assert _message(_calls(engine, authority, EventUser("u")).create_tag(REPO, "main", "t1")) == (
        403,
        f"user u may not WriteRepo on {REPO}",
    )
    assert _calls(engine, authority, EventUser("w")).create_tag(REPO, "main", "t2")[0] == 201


def test_a_listing_stopped_at_the_scan_cap_hands_out_a_token_not_a_hidden_key(
    engine: Graveler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past gold/b, gold/new (hidden) the cap of 2 stops the scan: the position stays in graveler.
    monkeypatch.setattr(visible_pages, "MAX_SCANNED", 2)
    calls = _calls(engine, Authority({"u": KeyScope(REPO, every_key=False, allow=(f"{REPO}/top",))}), EventUser("u"))
    status, page = calls.list_objects(REPO, "main", "", "", "")
    assert status == 200 and page["results"] == [] and page["pagination"]["has_more"]
    token = page["pagination"]["next_offset"]
    assert token.startswith(visible_pages.CURSOR_MARK) and "gold" not in token
    shown: list[str] = []
    while token:
        status, page = calls.list_objects(REPO, "main", token, "", "")
        assert status == 200, page
        shown += [row["path"] for row in page["results"]]
        token = page["pagination"]["next_offset"]
    assert shown == ["top"]
    monkeypatch.undo()
    # A token is this run's and this listing's; a position among hidden keys is refused.
    other = _calls(engine, Authority({"u": RAW_ONLY}), EventUser("u"))
    assert _message(other.list_objects(REPO, "main", visible_pages.CURSOR_MARK + "00", "", ""))[0] == 400
    assert _message(other.list_objects(REPO, "main", "gold/a", "", "")) == (
        400,
        "after: a position the hook's user may not list from",
    )
    assert _paths(other.list_objects(REPO, "main", "raw/a", "", "")) == ["raw/new", "raw/staged", "raw/sub/c"]


def test_a_diff_starts_only_where_the_user_may_read_and_a_token_serves_its_own_listing(
    engine: Graveler, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(engine, Authority({"v": NO_GOLD}), EventUser("v"))
    # A diff's `after` among hidden keys would count them through the scan cap, as a listing's.
    refused = (400, "after: a position the hook's user may not list from")
    assert _message(calls.diff_refs(REPO, "base", "main", "gold/a")) == refused
    assert _message(calls.diff_refs(REPO, "base", "main", "gold/", "", "/")) == refused
    assert _message(calls.diff_branch(REPO, "main", "gold/a", 100, "", "")) == refused
    # A token stands for a position in one listing: another listing of the same run refuses it.
    monkeypatch.setattr(visible_pages, "MAX_SCANNED", 1)
    status, page = calls.list_objects(REPO, "main", "", "", "")
    token = page["pagination"]["next_offset"]
    assert status == 200 and token.startswith(visible_pages.CURSOR_MARK)
    foreign = (400, "after: not a position this hook was given for this listing")
    assert _message(calls.diff_refs(REPO, "base", "main", token)) == foreign
    assert _message(calls.list_objects(REPO, "main", token, "g", "")) == foreign
    assert _message(calls.list_objects(REPO, "base", token, "", "")) == foreign
    assert calls.list_objects(REPO, "main", token, "", "")[0] == 200
