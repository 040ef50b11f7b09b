"""Actions inside the engine: the per-repository bound on pre-event runs, background post-hooks
that one repository's hang does not hold up for another, and a pull request check whose slow
old run finishes after a push: its result is dropped, never counted for the new head."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.actions.manager import ActionsOptions
from engine.actions.targets import WebhookPolicy
from engine.actions.webhook import EnvPolicy
from engine.core.deadline import NO_DEADLINE
from engine.core.hooks import EventUser
from engine.core.refs import RepoHandle
from engine.graveler import Graveler, GravelerOptions
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import HookAborted, NotFound, ResourceExhausted
from silt.graveler.v1 import model_pb2 as pb
from silt.key_scope import KeyScope
from silt.kv.mem import MemStore

# How long a test waits for an asynchronous hook run to end: its Lua hooks each start a process,
# which on a two-core machine busy with both test legs took over 10 s once for a run of three
# (8 s of CPU, where a quiet run takes 2.4). Generous: the runs are checked, not their latency.
HOOK_RUN_WAIT_S = 60.0


class Hooks:
    """A webhook server: each path blocks until its gate opens (paths without a gate answer 200)."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.headers: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()
        self.port = 0

    def gate(self, path: str) -> threading.Event:
        return self.gates.setdefault(path, threading.Event())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_seen(self, predicate: Callable[[str, dict[str, Any]], bool], timeout: float = 10) -> None:
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            with self.lock:
                if any(predicate(path, body) for path, body in self.seen):
                    return
            time.sleep(0.01)
        raise AssertionError("the webhook was not called")


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    state = Hooks()

    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with state.lock:
                state.seen.append((self.path, body))
                state.headers[self.path] = dict(self.headers.items())
                gate = state.gates.get(self.path.split("?")[0])
            if gate is not None:
                gate.wait(20)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    for gate in state.gates.values():
        gate.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Graveler]:
    # The webhook receiver is on 127.0.0.1: this engine opts in to private addresses (off by default).
    actions = ActionsOptions(max_runs_per_repository=1, background_workers=2, webhook=WebhookPolicy(allow_private=True))
    options = GravelerOptions(actions=actions)
    g = open_graveler(MemStore(), LocalAdapter(tmp_path / "data"), options)
    yield g
    g.close()


def _repo(g: Graveler, name: str) -> str:
    g.lifecycle.create_repository(name, f"local://{name}", "main", False)
    return name


def _put(g: Graveler, repo: str, branch: str, key: str, data: bytes = b"x") -> None:
    namespace = g.refs.repository(repo).namespace
    address = f"data/{repo}-{branch}-{key.replace('/', '_')}-{time.monotonic_ns()}"
    g.committed.adapter.put(namespace, address, io.BytesIO(data), len(data))
    g.stage_entry(repo, branch, key, pb.Entry(physical_address=address, size=len(data), etag=address))


def _webhook(name: str, event: str, url: str, branches: str = "") -> bytes:
    on = f"  {event}:\n" + (f"    branches: [{branches}]\n" if branches else "")
    return (
        f"name: {name}\non:\n{on}hooks:\n  - id: call\n    type: webhook\n"
        f"    properties:\n      url: {url}\n      timeout: 20s\n"
    ).encode()


def test_a_repository_runs_a_bounded_number_of_pre_hooks_at_once(engine: Graveler, hooks: Hooks) -> None:
    slow, other = _repo(engine, "slow-repo"), _repo(engine, "other-repo")
    gate = hooks.gate("/slow")
    _put(engine, slow, "main", "_lakefs_actions/a.yaml", _webhook("slow", "pre-commit", hooks.url("/slow")))
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            engine.commit(slow, "main", "held by its hook")
        except BaseException as exc:
            errors.append(exc)

    held = threading.Thread(target=commit)
    held.start()
    hooks.wait_seen(lambda path, _: path == "/slow")
    # The one run allowed is in flight: the next is refused at once, not queued behind it.
    started = time.monotonic()
    with pytest.raises(ResourceExhausted, match="pre-event hook runs"):
        engine.commit(slow, "main", "one too many")
    assert time.monotonic() - started < 1
    _put(engine, other, "main", "f")
    engine.commit(other, "main", "another repository is not held")
    gate.set()
    held.join(10)
    assert not errors, errors
    assert (
        engine.refs.get_commit(
            engine.refs.repository(slow), engine.refs.resolve(engine.refs.repository(slow), "main").commit_id
        ).message
        == "held by its hook"
    )


def test_a_hanging_post_hook_does_not_hold_another_repositorys(engine: Graveler, hooks: Hooks) -> None:
    slow, other = _repo(engine, "slow-posts"), _repo(engine, "other-posts")
    hooks.gate("/slow-post")
    _put(engine, slow, "main", "_lakefs_actions/a.yaml", _webhook("slow", "post-commit", hooks.url("/slow-post")))
    _put(engine, other, "main", "_lakefs_actions/a.yaml", _webhook("fast", "post-commit", hooks.url("/fast-post")))
    for n in range(3):  # three post-hooks of one repository hang (one runs, two wait in its queue)
        _put(engine, slow, "main", f"f{n}")
        started = time.monotonic()
        engine.commit(slow, "main", f"slow {n}")
        assert time.monotonic() - started < 10  # the commit never waits for its post-hooks (20 s)
    engine.commit(other, "main", "fast")
    hooks.wait_seen(lambda path, body: path == "/fast-post" and body["repository_id"] == other, timeout=5)


def test_a_check_result_of_an_older_head_is_dropped(engine: Graveler, hooks: Hooks) -> None:
    repo = _repo(engine, "checks-race")
    gate = hooks.gate("/check")
    _put(engine, repo, "main", "_lakefs_actions/c.yaml", _webhook("ci", "pull-request", hooks.url("/check"), "main"))
    engine.commit(repo, "main", "add the check")
    engine.protection.set(
        engine.refs.repository(repo),
        [pb.BranchProtectionRule(pattern="main", required_checks=["ci/call"])],
        "",
        NO_DEADLINE,
    )
    engine.create_branch(repo, "feature", "main")
    _put(engine, repo, "feature", "a")
    first = engine.commit(repo, "feature", "first head").id
    handle = engine.refs.repository(repo)
    pull = engine.pulls.create(handle, "data", "", "feature", "main", "alice")
    engine.checks.opened(handle, pull)
    hooks.wait_seen(lambda path, body: path == "/check" and body["source_ref"] == first)  # run 1 holds

    _put(engine, repo, "feature", "b")
    second = engine.commit(repo, "feature", "second head").id  # a push: run 2 is asked for

    def check() -> pb.PullRequestCheck:
        [only] = engine.pulls.get(handle, pull.id).checks
        return only

    ends = time.monotonic() + HOOK_RUN_WAIT_S
    while check().commit_id != second:
        assert time.monotonic() < ends, check()
        time.sleep(0.01)
    gate.set()  # run 1 (of the first head) and then run 2 finish
    ends = time.monotonic() + HOOK_RUN_WAIT_S
    while check().status != pb.CHECK_STATUS_PASSED:
        # Never a result of the first head once the second is asked for.
        assert check().commit_id == second, check()
        assert time.monotonic() < ends, check()
        time.sleep(0.01)
    assert check().commit_id == second
    assert engine.pulls.standing(handle, engine.pulls.get(handle, pull.id)).blocked_reason == ""


def test_webhooks_to_loopback_are_refused_unless_the_deployment_opts_in(tmp_path: Path, hooks: Hooks) -> None:
    g = open_graveler(MemStore(), LocalAdapter(tmp_path / "data"), GravelerOptions())  # the defaults
    try:
        repo = _repo(g, "private-off")
        port = hooks.port
        spellings = [
            f"http://127.0.0.1:{port}/a",
            f"http://[::ffff:127.0.0.1]:{port}/b",
            f"http://[::ffff:7f00:1]:{port}/c",
            f"http://2130706433:{port}/d",  # decimal
            f"http://0177.0.0.1:{port}/e",  # octal
            f"http://localhost:{port}/f",
        ]
        for n, url in enumerate(spellings):
            _put(g, repo, "main", "_lakefs_actions/a.yaml", _webhook("loop", "pre-commit", url))
            _put(g, repo, "main", f"f{n}")
            with pytest.raises(HookAborted) as refused:
                g.commit(repo, "main", "refused")
            assert "is not an allowed webhook target" in str(refused.value), (url, refused.value)
            assert "loopback address, and allow_private is off" in str(refused.value), (url, refused.value)
        with hooks.lock:
            assert hooks.seen == []  # no spelling reached the receiver
    finally:
        g.close()


TAGGING_HOOK = b"""name: tagger
on:
  post-commit:
hooks:
  - id: tag
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        for _, name in ipairs({"ok-1", "blocked-1"}) do
          local code, _ = lakefs.create_tag(action.repository_id, action.commit_id, name)
          print(name .. " " .. code)
        end
"""
TAG_RULE = b"""name: tag-rule
on:
  pre-create-tag:
hooks:
  - id: no_blocked
    type: lua
    properties:
      script: |
        if string.sub(action.tag_id, 1, 8) == "blocked-" then error("blocked tags are refused") end
"""


def _post_commit_output(engine: Graveler, handle: RepoHandle) -> str:
    """The output of the first hook of main's post-commit run, once that run has ended."""

    def post_run() -> pb.ActionRun | None:
        runs, _, _ = engine.actions.runs.list_page(handle, "main", "", "", 100, NO_DEADLINE)
        return next((r for r in runs if r.event_type == "post-commit" and r.HasField("end_time")), None)

    ends = time.monotonic() + HOOK_RUN_WAIT_S
    while (run := post_run()) is None:
        assert time.monotonic() < ends, "the post-commit hook did not run"
        time.sleep(0.01)
    return engine.actions.runs.get(handle, run.run_id).hooks[0].output


def test_a_tag_created_by_a_hook_passes_the_pre_create_tag_hooks(engine: Graveler) -> None:
    repo = _repo(engine, "hook-tags")
    _put(engine, repo, "main", "_lakefs_actions/rule.yaml", TAG_RULE)
    _put(engine, repo, "main", "_lakefs_actions/tagger.yaml", TAGGING_HOOK)
    commit_id = engine.commit(repo, "main", "tag me").id
    handle = engine.refs.repository(repo)
    output = _post_commit_output(engine, handle)
    assert "ok-1 201" in output and "blocked-1 412" in output, output
    assert engine.refs.get_tag(handle, "ok-1").commit_id == commit_id
    with pytest.raises(NotFound):
        engine.refs.get_tag(handle, "blocked-1")
    runs, _, _ = engine.actions.runs.list_page(handle, "", "", "", 100, NO_DEADLINE)
    refused = [r for r in runs if r.event_type == "pre-create-tag" and r.tag_id == "blocked-1"]
    assert len(refused) == 1 and refused[0].failed


def test_an_env_value_reaches_only_the_hooks_of_repositories_it_is_granted_to(tmp_path: Path, hooks: Hooks) -> None:
    env = EnvPolicy(environ={"SILTACTION_TOKEN": "granted-secret"}, repositories={"SILTACTION_TOKEN": ("ci-*",)})
    actions = ActionsOptions(env=env, webhook=WebhookPolicy(allow_private=True))
    g = open_graveler(MemStore(), LocalAdapter(tmp_path / "data"), GravelerOptions(actions=actions))
    try:
        for repo in (_repo(g, "ci-main"), _repo(g, "elsewhere")):
            hook = _webhook("leak", "pre-commit", hooks.url(f"/{repo}")) + (
                b"      headers:\n        Authorization: 'Bearer {{ ENV.SILTACTION_TOKEN }}'\n"
            )
            _put(g, repo, "main", "_lakefs_actions/a.yaml", hook)
        g.commit("ci-main", "main", "the granted repository's hook sends it")
        with pytest.raises(HookAborted) as refused:
            g.commit("elsewhere", "main", "refused")
        assert "SILTACTION_TOKEN is not granted to 'elsewhere'" in str(refused.value)
        with hooks.lock:
            assert [path for path, _ in hooks.seen] == ["/ci-main"]
        assert hooks.headers["/ci-main"]["Authorization"] == "Bearer granted-secret"
    finally:
        g.close()


DIFFING_HOOK = b"""name: differ
on:
  post-commit:
hooks:
  - id: diff
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local code, diff = lakefs.diff_refs(action.repository_id, "base", action.commit_id)
        for _, d in ipairs(diff.results) do
          print(code .. " " .. d.type .. " " .. d.path .. " " .. d.path_type .. " " .. d.size_bytes)
        end
        local _, grouped = lakefs.diff_refs(action.repository_id, "base", action.commit_id, "", "", "/")
        for _, d in ipairs(grouped.results) do
          print("grouped " .. d.type .. " " .. d.path .. " " .. d.path_type)
        end
"""


def test_a_hook_reads_a_diff_of_two_refs_with_sizes_and_common_prefixes(engine: Graveler) -> None:
    repo = _repo(engine, "hook-diff")
    _put(engine, repo, "main", "gone.txt", b"12345")
    _put(engine, repo, "main", "kept.txt", b"1")
    engine.commit(repo, "main", "base")
    engine.create_tag(repo, "base", "main")
    engine.delete_entry(repo, "main", "gone.txt")
    _put(engine, repo, "main", "dir/new.txt", b"123")
    _put(engine, repo, "main", "_lakefs_actions/differ.yaml", DIFFING_HOOK)
    engine.commit(repo, "main", "change")
    handle = engine.refs.repository(repo)
    output = _post_commit_output(engine, handle)
    assert output.splitlines() == [
        "200 added _lakefs_actions/differ.yaml object " + str(len(DIFFING_HOOK)),
        "200 added dir/new.txt object 3",
        "200 removed gone.txt object 5",  # a removed object's size is its left side's
        "grouped prefix_changed _lakefs_actions/ common_prefix",
        "grouped prefix_changed dir/ common_prefix",
        "grouped removed gone.txt object",
    ], output


READ_AS_USER = {
    "_lakefs_actions/peek.yaml": b"""name: peek
on:
  pre-commit:
    branches: ["scripted"]
hooks:
  - id: peek
    type: lua
    properties:
      script_path: scripts/peek.lua
""",
    "scripts/peek.lua": b"""local lakefs = require("lakefs")
local code, _ = lakefs.get_object(action.repository_id, "main", "gold/b")
print("peek gold/b " .. code)
""",
    "_lakefs_actions/tagger.yaml": b"""name: tagger
on:
  post-commit:
    branches: ["tagging"]
hooks:
  - id: tag
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        local code, _ = lakefs.create_tag(action.repository_id, action.commit_id, "t-1")
        print("tagged " .. code)
""",
    "_lakefs_actions/reader.yaml": b"""name: reader
on:
  pre-create-tag:
  pull-request:
    branches: ["main"]
hooks:
  - id: read
    type: lua
    properties:
      script: |
        local lakefs = require("lakefs")
        -- The listing tells the user's reads (raw/ only) from nobody's (403).
        local listed, _ = lakefs.list_objects(action.repository_id, "main", "", "raw/", "")
        local code, _ = lakefs.get_object(action.repository_id, "main", "gold/b")
        print(action.event_type .. " list " .. listed .. " gold/b " .. code)
""",
}


class RawOnlyAuthority:
    """Auth's answers: `u` reads `raw/*` only and writes the repository; anyone else reads all."""

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        if user_id == "u":
            return KeyScope(repository, every_key=False, allow=(f"{repository}/raw/*",))
        return KeyScope(repository, every_key=True)

    def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        return True


def _run_output(engine: Graveler, handle: RepoHandle, event_type: str, branch: str = "") -> str:
    """The output of the first hook of the newest ended run of event_type."""
    ends = time.monotonic() + HOOK_RUN_WAIT_S
    while True:
        runs, _, _ = engine.actions.runs.list_page(handle, branch, "", "", 100, NO_DEADLINE)
        ended = [r for r in runs if r.event_type == event_type and r.HasField("end_time")]
        if ended:
            return engine.actions.runs.get(handle, ended[0].run_id).hooks[0].output
        assert time.monotonic() < ends, f"no {event_type} run ended"
        time.sleep(0.01)


def test_a_hook_reads_as_its_user_in_scripts_tags_it_makes_and_pull_request_checks(engine: Graveler) -> None:
    engine.actions.authority = RawOnlyAuthority()
    u, admin = EventUser("u", "10.0.0.9"), EventUser("admin")
    repo = _repo(engine, "as-user")
    _put(engine, repo, "main", "raw/a")
    _put(engine, repo, "main", "gold/b")
    for path, data in READ_AS_USER.items():
        _put(engine, repo, "main", path, data)
    engine.commit(repo, "main", "setup", by=admin)
    handle = engine.refs.repository(repo)

    # script_path is read as the user: one they may not read does not run.
    engine.create_branch(repo, "scripted", "main", by=u)
    _put(engine, repo, "scripted", "raw/s")
    with pytest.raises(HookAborted) as refused:
        engine.commit(repo, "scripted", "by u", by=u)
    assert "could not load script_path 'scripts/peek.lua': user u may not ReadObject" in str(refused.value)

    # A tag a hook makes runs its pre-create-tag hooks as the making hook's user.
    engine.create_branch(repo, "tagging", "main", by=u)
    _put(engine, repo, "tagging", "raw/t")
    engine.commit(repo, "tagging", "by u", by=u)
    assert "tagged 201" in _run_output(engine, handle, "post-commit", "tagging")
    assert "pre-create-tag list 200 gold/b 403" in _run_output(engine, handle, "pre-create-tag")

    # A pull request's check reads as its author.
    engine.create_branch(repo, "feature", "main", by=u)
    _put(engine, repo, "feature", "raw/f")
    engine.commit(repo, "feature", "by u", by=u)
    pull = engine.pulls.create(handle, "data", "", "feature", "main", "u")
    engine.checks.opened(handle, pull)
    assert "pull-request list 200 gold/b 403" in _run_output(engine, handle, "pull-request")
